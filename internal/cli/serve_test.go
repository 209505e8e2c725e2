package cli

import (
	"context"
	"io"
	"net"
	"net/http"
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
