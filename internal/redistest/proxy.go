package redistest

import (
	"bytes"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
)

// Proxy is a TCP proxy in front of a Redis server that loses replies on
// demand: armed with DropReply or HoldReply, it forwards the next request
// holding given strings, lets the server run it, and keeps its reply from
// the client. That is the network fault that leaves a call's outcome
// unknown: the server did the work, the client never heard of it. Armed
// with DelayReply, it hands that reply over late instead.
type Proxy struct {
	// Addr is the proxy's host:port on loopback; clients connect here.
	Addr string

	tb     testing.TB
	target string
	ln     net.Listener
	wg     sync.WaitGroup

	mu     sync.Mutex
	faults []*fault
	conns  map[net.Conn]struct{}
	closed bool
}

// fault is one armed loss of a reply.
type fault struct {
	match [][]byte
	close bool // close the client's connection (else leave it silent)
	// release, when set, delays the reply instead of losing it: it is
	// forwarded once release is closed.
	release <-chan struct{}
	once    sync.Once
	done    chan struct{}
}

// StartProxy starts a proxy to the Redis server at target, stopped when the
// test ends.
func StartProxy(tb testing.TB, target string) *Proxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("redistest: proxy listen: %v", err)
	}
	p := &Proxy{Addr: ln.Addr().String(), tb: tb, target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	tb.Cleanup(p.stop)
	return p
}

// Client returns a go-redis client connected through the proxy, closed at
// test end. opts may be nil; its Addr is replaced.
func (p *Proxy) Client(opts *redis.Options) *redis.Client {
	o := redis.Options{}
	if opts != nil {
		o = *opts
	}
	o.Addr = p.Addr
	c := redis.NewClient(&o)
	p.tb.Cleanup(func() { _ = c.Close() })
	return c
}

// DropReply arms the proxy once: the next request that holds every one of
// match is forwarded to the server, and the server's reply to it is
// discarded and the client's connection closed (the client reads EOF). The
// channel is closed once a reply was dropped.
func (p *Proxy) DropReply(match ...string) <-chan struct{} { return p.arm(true, match) }

// HoldReply is DropReply leaving the client's connection open and silent:
// the client waits for the reply until its read timeout, as when the
// server runs a call for longer than that.
func (p *Proxy) HoldReply(match ...string) <-chan struct{} { return p.arm(false, match) }

// DelayReply arms the proxy once: the reply to the next request that
// holds every one of match is kept from the client until release is
// closed, then forwarded (a slow network: the call's reply arrives late).
// The channel returned is closed once the server's reply is held.
func (p *Proxy) DelayReply(release <-chan struct{}, match ...string) <-chan struct{} {
	return p.armFault(&fault{release: release, done: make(chan struct{})}, match)
}

func (p *Proxy) arm(closeConn bool, match []string) <-chan struct{} {
	return p.armFault(&fault{close: closeConn, done: make(chan struct{})}, match)
}

func (p *Proxy) armFault(f *fault, match []string) <-chan struct{} {
	for _, m := range match {
		f.match = append(f.match, []byte(m))
	}
	p.mu.Lock()
	p.faults = append(p.faults, f)
	p.mu.Unlock()
	return f.done
}

// take removes and returns the first armed fault that req matches.
func (p *Proxy) take(req []byte) *fault {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, f := range p.faults {
		all := true
		for _, m := range f.match {
			all = all && bytes.Contains(req, m)
		}
		if all {
			p.faults = append(p.faults[:i], p.faults[i+1:]...)
			return f
		}
	}
	return nil
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		if !p.track(c, s) {
			return
		}
		var lost atomic.Pointer[fault]
		p.wg.Add(2)
		go p.requests(c, s, &lost)
		go p.replies(c, s, &lost)
	}
}

// track registers a connection pair, or closes it when the proxy stopped.
func (p *Proxy) track(c, s net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = c.Close()
		_ = s.Close()
		return false
	}
	p.conns[c], p.conns[s] = struct{}{}, struct{}{}
	return true
}

// requests forwards the client's requests to the server, marking the
// connection's next reply lost when a request matches an armed fault.
func (p *Proxy) requests(c, s net.Conn, lost *atomic.Pointer[fault]) {
	defer p.wg.Done()
	defer func() { _ = s.Close() }()
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			if f := p.take(buf[:n]); f != nil {
				lost.Store(f)
			}
			if _, werr := s.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// replies forwards the server's replies to the client, except from a lost
// reply on: the connection is then closed, or kept silent.
func (p *Proxy) replies(c, s net.Conn, lost *atomic.Pointer[fault]) {
	defer p.wg.Done()
	defer func() { _ = c.Close() }()
	buf := make([]byte, 64<<10)
	for {
		n, err := s.Read(buf)
		if f := lost.Load(); f != nil && n > 0 && f.release != nil {
			f.once.Do(func() { close(f.done) })
			<-f.release
			lost.Store(nil)
		} else if f != nil && n > 0 {
			f.once.Do(func() { close(f.done) })
			if f.close {
				return
			}
			n = 0 // silent: discard this and every later reply
		}
		if n > 0 {
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *Proxy) stop() {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	if err := p.ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		p.tb.Errorf("redistest: proxy close: %v", err)
	}
	p.wg.Wait()
}
