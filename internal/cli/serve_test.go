package cli

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestServeWaitsForRequestsInFlight: when its context ends (SIGINT or
// SIGTERM), Serve returns only once the requests in flight have been
// answered (up to its 5 s grace), so a command does not close its Redis
// client, or exit, under a handler still writing (an operator's action
// on the dashboard, a scrape of /metrics).
func TestServeWaitsForRequestsInFlight(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	var finished atomic.Bool
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		time.Sleep(500 * time.Millisecond)
		finished.Store(true)
		_, _ = io.WriteString(w, "done")
	})
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- Serve(ctx, ln, h) }()
	answer := make(chan string, 1)
	go func() {
		resp, err := http.Get("http://" + ln.Addr().String() + "/")
		if err != nil {
			answer <- "error: " + err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		answer <- string(b)
	}()
	<-started
	cancel()
	if err := <-served; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if !finished.Load() {
		t.Fatal("Serve returned while a request was still being handled")
	}
	if got := <-answer; got != "done" {
		t.Fatalf("the request in flight got %q, want its answer", got)
	}
}

// TestServeClosesIdleConnections: a keep-alive connection left idle after
// its answer is closed after the server's idle timeout, so clients that
// never close theirs do not hold sockets and goroutines for good.
func TestServeClosesIdleConnections(t *testing.T) {
	defer func(d time.Duration) { idleTimeout = d }(idleTimeout)
	idleTimeout = 100 * time.Millisecond
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- Serve(ctx, ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") }))
	}()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	// Read the answer, then wait for the server to close the connection:
	// the read returns EOF well before the deadline only if it does.
	if err := c.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("the idle connection was not closed by the server: %v (read %q)", err, b)
	}
	if !strings.Contains(string(b), "200 OK") {
		t.Fatalf("answer %q, want 200 OK", b)
	}
}

// TestServeServerTimeouts: the server bounds reading a whole request and
// keeping an idle connection, not only reading the headers.
func TestServeServerTimeouts(t *testing.T) {
	srv := newServer(http.NotFoundHandler())
	if srv.ReadHeaderTimeout <= 0 || srv.ReadTimeout <= 0 || srv.IdleTimeout <= 0 {
		t.Fatalf("timeouts: header %v, read %v, idle %v; want all set", srv.ReadHeaderTimeout, srv.ReadTimeout, srv.IdleTimeout)
	}
	if srv.WriteTimeout != 0 {
		t.Fatalf("write timeout %v: a slow reader's answer would be cut", srv.WriteTimeout)
	}
}

// TestListenMalformedAddrIsUsage: Listen refuses a malformed address as a
// usage error (exit 2), while a port in use stays a runtime failure.
func TestListenMalformedAddrIsUsage(t *testing.T) {
	for _, addr := range []string{"bad:99999", "127.0.0.1", "127.0.0.1:x-no-such-service"} {
		if ln, err := Listen("--addr", addr); !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "--addr") {
			if ln != nil {
				ln.Close()
			}
			t.Errorf("Listen(%q): %v, want a usage error naming --addr", addr, err)
		}
	}
	taken, err := Listen("--addr", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	if _, err := Listen("--addr", taken.Addr().String()); err == nil || errors.Is(err, ErrUsage) {
		t.Errorf("Listen on a port in use: %v, want a runtime error", err)
	}
}
