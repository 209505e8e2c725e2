// Package browser is a minimal Chrome DevTools Protocol driver for tests:
// it starts headless Chromium with --remote-debugging-pipe and speaks the
// protocol over the two pipes that switch opens (Chromium reads
// NUL-terminated JSON commands from its fd 3 and writes NUL-terminated
// replies and events to its fd 4), using the standard library alone.
//
// The browser is never downloaded: the caller passes the path of an
// installed executable, such as Debian's /usr/bin/chromium. Passing the
// pipes as extra descriptors needs a Unix system.
//
// A Browser holds one Chromium process and a throwaway profile; NewPage
// opens a tab and attaches a flat session to it, whose commands carry its
// session id. Every call honours its context, and once Chromium is gone
// every pending and later call fails with an error that ends with the tail
// of Chromium's output.
package browser

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"
)

// Options tune Launch.
type Options struct {
	// Width and Height size the window in CSS pixels; zero means 1280
	// by 1000.
	Width, Height int
	// Flags are more command-line switches, such as "--lang=en".
	Flags []string
}

// defaultFlags make a quiet, self-contained headless browser: no sandbox
// (tests often run as root), no GPU, no first-run work, no traffic of its
// own, no throttling of background timers.
var defaultFlags = []string{
	"--headless",
	"--no-sandbox",
	"--disable-gpu",
	"--no-first-run",
	"--no-default-browser-check",
	"--disable-background-networking",
	"--disable-background-timer-throttling",
	"--disable-backgrounding-occluded-windows",
	"--disable-renderer-backgrounding",
	"--disable-breakpad",
	"--disable-component-update",
	"--disable-crash-reporter",
	"--disable-default-apps",
	"--disable-dev-shm-usage",
	"--disable-extensions",
	"--disable-quic",
	"--disable-sync",
	"--hide-scrollbars",
	"--mute-audio",
	"--no-proxy-server",
	"--password-store=basic",
	"--use-mock-keychain",
}

// outputTail is how much of Chromium's output errors quote.
const outputTail = 4 << 10

// Browser is a running Chromium. Close it to stop the process and remove
// its profile.
type Browser struct {
	cmd     *exec.Cmd
	profile string
	toW     *os.File // our end of Chromium's fd 3
	fromR   *os.File // our end of Chromium's fd 4

	out     chan []byte   // commands for the writer
	done    chan struct{} // closed by fail: Chromium is unusable
	exited  chan struct{} // closed when the process has been reaped
	stop    chan struct{} // closed by Close: the dispatcher returns
	wake    chan struct{} // an event is queued for the dispatcher
	workers sync.WaitGroup

	mu       sync.Mutex
	nextID   int64
	pending  map[int64]chan message
	handlers map[eventKey][]func(json.RawMessage)
	waiters  map[eventKey][]chan struct{}
	queue    []message
	cause    error // why done was closed
	exitErr  error // the process's exit status, once exited
	output   []byte

	failOnce  sync.Once
	closeOnce sync.Once
	closeErr  error
}

type eventKey struct{ session, method string }

// message is one protocol frame in either direction.
type message struct {
	ID        int64           `json:"id,omitempty"`
	SessionID string          `json:"sessionId,omitempty"`
	Method    string          `json:"method,omitempty"`
	Params    json.RawMessage `json:"params,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Data    string `json:"data"`
	} `json:"error,omitempty"`
}

// Launch starts the Chromium at exe, headless, with a new profile in a
// temporary directory. ctx bounds the start only: the browser runs until
// Close.
func Launch(ctx context.Context, exe string, opts Options) (*Browser, error) {
	if opts.Width == 0 {
		opts.Width = 1280
	}
	if opts.Height == 0 {
		opts.Height = 1000
	}
	profile, err := os.MkdirTemp("", "browser-profile-")
	if err != nil {
		return nil, err
	}
	args := append([]string(nil), defaultFlags...)
	args = append(args, opts.Flags...)
	args = append(args,
		"--window-size="+strconv.Itoa(opts.Width)+","+strconv.Itoa(opts.Height),
		"--user-data-dir="+profile,
		"--remote-debugging-pipe",
		"about:blank",
	)
	// Chromium reads commands from fd 3 and writes to fd 4; its output
	// goes to a pipe of our own, so Wait returns when Chromium exits even
	// if a helper process still holds the output open.
	toR, toW, err := os.Pipe()
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(profile))
	}
	fromR, fromW, err := os.Pipe()
	if err != nil {
		return nil, errors.Join(err, closeAll(toR, toW), os.RemoveAll(profile))
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, errors.Join(err, closeAll(toR, toW, fromR, fromW), os.RemoveAll(profile))
	}
	cmd := exec.Command(exe, args...)
	cmd.ExtraFiles = []*os.File{toR, fromW}
	cmd.Stdout, cmd.Stderr = outW, outW
	ownProcessGroup(cmd)
	err = cmd.Start()
	closeAll(toR, fromW, outW) // the child has its copies
	if err != nil {
		return nil, errors.Join(err, closeAll(toW, fromR, outR), os.RemoveAll(profile))
	}

	b := &Browser{
		cmd: cmd, profile: profile, toW: toW, fromR: fromR,
		out:      make(chan []byte),
		done:     make(chan struct{}),
		exited:   make(chan struct{}),
		stop:     make(chan struct{}),
		wake:     make(chan struct{}, 1),
		pending:  map[int64]chan message{},
		handlers: map[eventKey][]func(json.RawMessage){},
		waiters:  map[eventKey][]chan struct{}{},
	}
	outputDone := make(chan struct{})
	b.workers.Add(4)
	go func() { defer b.workers.Done(); defer close(outputDone); b.readOutput(outR) }()
	go func() { defer b.workers.Done(); b.read() }()
	go func() { defer b.workers.Done(); b.write() }()
	go func() { defer b.workers.Done(); b.dispatch() }()
	go func() {
		err := cmd.Wait()
		// Let the last lines of output in before calls quote them.
		select {
		case <-outputDone:
		case <-time.After(500 * time.Millisecond):
		}
		b.mu.Lock()
		b.exitErr = err
		if err == nil {
			b.exitErr = errors.New("exit status 0")
		}
		b.mu.Unlock()
		close(b.exited)
		b.fail(errors.New("chromium exited"))
	}()

	if err := b.Call(ctx, "Browser.getVersion", nil, nil); err != nil {
		return nil, errors.Join(fmt.Errorf("browser: start %s: %w", exe, err), b.Close())
	}
	return b, nil
}

// Call sends a browser-level command (one without a session, such as
// Target.createTarget) and decodes its result into result unless result
// is nil.
func (b *Browser) Call(ctx context.Context, method string, params, result any) error {
	return b.call(ctx, "", method, params, result)
}

func (b *Browser) call(ctx context.Context, session, method string, params, result any) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("browser: %s: %w", method, context.Cause(ctx))
	}
	m := message{SessionID: session, Method: method}
	if params != nil {
		raw, err := json.Marshal(params)
		if err != nil {
			return fmt.Errorf("browser: %s: %w", method, err)
		}
		m.Params = raw
	}
	reply := make(chan message, 1)
	b.mu.Lock()
	b.nextID++
	m.ID = b.nextID
	b.pending[m.ID] = reply
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		delete(b.pending, m.ID)
		b.mu.Unlock()
	}()
	frame, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("browser: %s: %w", method, err)
	}

	select {
	case b.out <- append(frame, 0):
	case <-b.done:
		return b.goneErr(method)
	case <-ctx.Done():
		return fmt.Errorf("browser: %s: %w", method, context.Cause(ctx))
	}
	select {
	case r := <-reply:
		if r.Error != nil {
			return fmt.Errorf("browser: %s: %s (code %d) %s", method, r.Error.Message, r.Error.Code, r.Error.Data)
		}
		if result != nil {
			if err := json.Unmarshal(r.Result, result); err != nil {
				return fmt.Errorf("browser: %s: decode %s: %w", method, r.Result, err)
			}
		}
		return nil
	case <-b.done:
		return b.goneErr(method)
	case <-ctx.Done():
		return fmt.Errorf("browser: %s: %w", method, context.Cause(ctx))
	}
}

// goneErr says why Chromium can no longer answer, quoting its output.
func (b *Browser) goneErr(method string) error {
	select { // the exit status and the last output, if they come soon
	case <-b.exited:
	case <-time.After(time.Second):
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	status := "still running"
	if b.exitErr != nil {
		status = b.exitErr.Error()
	}
	return fmt.Errorf("browser: %s: chromium is gone (%v; process: %s); its output ends with:\n%s",
		method, b.cause, status, b.output)
}

// fail marks Chromium unusable: pending and later calls return at once.
func (b *Browser) fail(cause error) {
	b.failOnce.Do(func() {
		b.mu.Lock()
		b.cause = cause
		b.mu.Unlock()
		close(b.done)
	})
}

// write sends the commands, one at a time, until Chromium is gone. A
// write that blocks holds up no caller: each waits on its own context.
func (b *Browser) write() {
	for {
		select {
		case frame := <-b.out:
			if _, err := b.toW.Write(frame); err != nil {
				b.fail(fmt.Errorf("writing to chromium: %w", err))
				return
			}
		case <-b.done:
			return
		}
	}
}

// read hands each reply to its caller and queues each event for the
// dispatcher, so a slow handler never holds up a reply.
func (b *Browser) read() {
	r := bufio.NewReader(b.fromR)
	for {
		frame, err := r.ReadBytes(0)
		if err != nil {
			b.fail(fmt.Errorf("reading from chromium: %w", err))
			return
		}
		var m message
		if err := json.Unmarshal(frame[:len(frame)-1], &m); err != nil {
			b.fail(fmt.Errorf("reading from chromium: %w in %.200q", err, frame))
			return
		}
		b.mu.Lock()
		if m.ID != 0 {
			if reply, ok := b.pending[m.ID]; ok {
				reply <- m // buffered; one reply per id
			}
		} else if m.Method != "" {
			k := eventKey{m.SessionID, m.Method}
			for _, w := range b.waiters[k] {
				select {
				case w <- struct{}{}:
				default:
				}
			}
			if len(b.handlers[k]) > 0 {
				b.queue = append(b.queue, m)
				select {
				case b.wake <- struct{}{}:
				default:
				}
			}
		}
		b.mu.Unlock()
	}
}

// dispatch runs the event handlers in the order the events came, on a
// goroutine of their own: a handler may call the browser.
func (b *Browser) dispatch() {
	for {
		select {
		case <-b.wake:
		case <-b.stop:
			return
		}
		for {
			b.mu.Lock()
			if len(b.queue) == 0 {
				b.mu.Unlock()
				break
			}
			m := b.queue[0]
			b.queue = b.queue[1:]
			hs := b.handlers[eventKey{m.SessionID, m.Method}]
			b.mu.Unlock()
			for _, h := range hs {
				h(m.Params)
			}
		}
	}
}

// readOutput keeps the tail of Chromium's stdout and stderr.
func (b *Browser) readOutput(r *os.File) {
	defer r.Close()
	buf := make([]byte, 4096)
	for {
		n, err := r.Read(buf)
		b.mu.Lock()
		b.output = append(b.output, buf[:n]...)
		if len(b.output) > outputTail {
			b.output = append([]byte(nil), b.output[len(b.output)-outputTail:]...)
		}
		b.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// on registers fn for the events named method of session.
func (b *Browser) on(session, method string, fn func(json.RawMessage)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	k := eventKey{session, method}
	b.handlers[k] = append(b.handlers[k], fn)
}

// waitEvent returns a channel that receives when the next event named
// method of session arrives, and a function that stops watching.
func (b *Browser) waitEvent(session, method string) (<-chan struct{}, func()) {
	k := eventKey{session, method}
	w := make(chan struct{}, 1)
	b.mu.Lock()
	b.waiters[k] = append(b.waiters[k], w)
	b.mu.Unlock()
	return w, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		ws := b.waiters[k]
		for i := range ws {
			if ws[i] == w {
				b.waiters[k] = append(ws[:i:i], ws[i+1:]...)
				break
			}
		}
		if len(b.waiters[k]) == 0 {
			delete(b.waiters, k)
		}
	}
}

// Close stops Chromium (asking it to close, then killing its process
// group) and removes its profile. It is safe to call more than once.
func (b *Browser) Close() error {
	b.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = b.Call(ctx, "Browser.close", nil, nil) // Chromium may exit before it answers
		cancel()
		select {
		case <-b.exited:
		case <-time.After(3 * time.Second):
		}
		killProcessGroup(b.cmd.Process) // whatever helper outlived it
		<-b.exited
		b.fail(errors.New("closed"))
		close(b.stop)
		closeAll(b.toW, b.fromR) // ends the reader
		b.workers.Wait()
		b.closeErr = removeProfile(b.profile)

	})
	return b.closeErr
}

// removeProfile removes dir, retrying while a dying helper process may
// still be writing into it.
func removeProfile(dir string) error {
	var err error
	for range 20 {
		if err = os.RemoveAll(dir); err == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("browser: remove profile: %w", err)
}

func closeAll(files ...*os.File) error {
	var errs []error
	for _, f := range files {
		errs = append(errs, f.Close())
	}
	return errors.Join(errs...)
}
