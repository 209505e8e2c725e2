package main

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// proxy is a TCP proxy on loopback in front of PostgreSQL. The nemesis
// slows or stalls only the server-to-client direction: queries (COMMIT
// included) reach the database at once and are applied, but their answers
// arrive late, so the caller's deadline passes after the database accepted
// the work. That is the "timeout after the dependency accepted it" fault:
// the outcome is unknown to the worker, the job must become uncertain and
// be reconciled, never guessed.
type proxy struct {
	ln       net.Listener
	upstream string
	// Addr is the proxy's listening address.
	Addr string

	mu         sync.Mutex
	latency    time.Duration // added to every server-to-client chunk
	stallUntil time.Time     // no server-to-client bytes before this
	changed    chan struct{} // closed and replaced when the above change
	conns      map[*proxyConn]struct{}
	closed     bool
}

// proxyConn is one proxied connection.
type proxyConn struct {
	client, server net.Conn
	once           sync.Once
}

// close closes both sides once.
func (c *proxyConn) close() {
	c.once.Do(func() {
		_ = c.client.Close()
		_ = c.server.Close()
	})
}

// startProxy listens on a free loopback port and forwards to upstream.
func startProxy(upstream string) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &proxy{ln: ln, upstream: upstream, Addr: ln.Addr().String(),
		changed: make(chan struct{}), conns: map[*proxyConn]struct{}{}}
	go p.accept()
	return p, nil
}

// accept serves every connection until the listener closes.
func (p *proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		go p.serve(c)
	}
}

// serve relays one connection: client to server untouched, server to
// client through hold.
func (p *proxy) serve(client net.Conn) {
	server, err := net.DialTimeout("tcp", p.upstream, 5*time.Second)
	if err != nil {
		_ = client.Close()
		return
	}
	pc := &proxyConn{client: client, server: server}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		pc.close()
		return
	}
	p.conns[pc] = struct{}{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.conns, pc)
		p.mu.Unlock()
		pc.close()
	}()

	// client -> server: untouched.
	go func() {
		_, _ = io.Copy(server, client)
		pc.close()
	}()

	// server -> client: read chunks as they come, release each when its
	// latency has passed and no stall is on.
	type chunk struct {
		b       []byte
		release time.Time
	}
	chunks := make(chan chunk, 256)
	go func() {
		defer close(chunks)
		for {
			buf := make([]byte, 32<<10)
			n, err := server.Read(buf)
			if n > 0 {
				p.mu.Lock()
				lat := p.latency
				p.mu.Unlock()
				chunks <- chunk{b: buf[:n], release: time.Now().Add(lat)}
			}
			if err != nil {
				return
			}
		}
	}()
	defer func() {
		pc.close()
		go func() { // let the reader see the closed connection and finish
			for range chunks {
			}
		}()
	}()
	for ch := range chunks {
		if !p.hold(ch.release) {
			return
		}
		if _, err := client.Write(ch.b); err != nil {
			return
		}
	}
}

// hold waits until release has passed and no stall is on. It returns false
// when the proxy closed.
func (p *proxy) hold(release time.Time) bool {
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return false
		}
		until := release
		if p.stallUntil.After(until) {
			until = p.stallUntil
		}
		changed := p.changed
		p.mu.Unlock()
		wait := time.Until(until)
		if wait <= 0 {
			return true
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-changed:
			t.Stop()
		}
	}
}

// notify wakes every held chunk to re-read the settings (p.mu held).
func (p *proxy) notify() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// stall holds every server-to-client byte for d.
func (p *proxy) stall(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stallUntil = time.Now().Add(d)
	p.notify()
}

// setLatency delays every server-to-client chunk by d (0 turns it off).
func (p *proxy) setLatency(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.latency = d
	p.notify()
}

// heal ends any stall and latency.
func (p *proxy) heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.latency = 0
	p.stallUntil = time.Time{}
	p.notify()
}

// close stops accepting and cuts every connection.
func (p *proxy) close() {
	p.mu.Lock()
	p.closed = true
	conns := p.conns
	p.conns = map[*proxyConn]struct{}{}
	p.notify()
	p.mu.Unlock()
	_ = p.ln.Close()
	for c := range conns {
		c.close()
	}
}
