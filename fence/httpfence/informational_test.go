package httpfence_test

import (
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/fencedq/fencedq/fence/httpfence"
)

// A handler may send an informational answer (103 Early Hints) before its
// final one. The final status decides: a handler that then fails with 500
// must not have its operation recorded (a retry runs it again), and the
// client gets the 500, not a 200 made up from the body.
func TestMiddlewareJudgesTheFinalStatusNotAnInformationalOne(t *testing.T) {
	for name, mk := range map[string]func(*testing.T) backend{"redis": redisBackend, "postgres": pgBackend} {
		t.Run(name, func(t *testing.T) {
			b := mk(t)
			ctx := t.Context()
			fail := true
			srv := httptest.NewServer(httpfence.Middleware(b.guard, httpfence.Options{})(http.HandlerFunc(
				func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Link", "</style.css>; rel=preload")
					w.WriteHeader(http.StatusEarlyHints)
					if err := b.write(r.Context()); err != nil {
						http.Error(w, err.Error(), http.StatusInternalServerError)
						return
					}
					if fail {
						http.Error(w, "downstream failed", http.StatusInternalServerError)
						return
					}
					w.WriteHeader(http.StatusCreated)
				})))
			t.Cleanup(srv.Close)
			tok := strconv.FormatUint(uint64(1_800_000_000_000_000), 10)
			if r := postFenced(t, srv.URL, "acct:1", tok, "w", "op-1"); r.status != http.StatusInternalServerError {
				t.Fatalf("failing handler after 103: status %d (%q), want 500", r.status, r.raw)
			}
			fail = false
			r := postFenced(t, srv.URL, "acct:1", tok, "w", "op-1")
			if r.status != http.StatusCreated || r.err != nil {
				t.Fatalf("retry after the failure: status %d, %v (%q), want 201 (the handler runs again)", r.status, r.err, r.raw)
			}
			want := 1
			if b.failedKept {
				want = 2
			}
			if n := b.writes(ctx); n != want {
				t.Fatalf("%d writes, want %d", n, want)
			}
		})
	}
}

// net/http panics when a handler writes a status outside 100-999, before
// anything is written. Behind the middleware the same handler must fail
// the same way, inside the guard: its operation is not recorded and its
// Postgres writes roll back, rather than committed before the buffered
// answer fails to be sent.
func TestMiddlewareRefusesAnInvalidStatusBeforeRecording(t *testing.T) {
	for name, mk := range map[string]func(*testing.T) backend{"redis": redisBackend, "postgres": pgBackend} {
		t.Run(name, func(t *testing.T) {
			b := mk(t)
			ctx := t.Context()
			code := 99
			srv := httptest.NewServer(httpfence.Middleware(b.guard, httpfence.Options{})(http.HandlerFunc(
				func(w http.ResponseWriter, r *http.Request) {
					if err := b.write(r.Context()); err != nil {
						http.Error(w, err.Error(), http.StatusInternalServerError)
						return
					}
					w.WriteHeader(code)
				})))
			srv.Config.ErrorLog = log.New(io.Discard, "", 0)
			t.Cleanup(srv.Close)
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, nil)
			if err := httpfence.SetHeaders(req, fz("acct:1", 1_800_000_000_000_000, "w", "op-1")); err != nil {
				t.Fatal(err)
			}
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
				t.Fatalf("a handler writing status 99: answered %d, want the request to fail as net/http fails it", resp.StatusCode)
			}
			code = http.StatusCreated
			r := postFenced(t, srv.URL, "acct:1", "1800000000000000", "w", "op-1")
			if r.status != http.StatusCreated || r.err != nil {
				t.Fatalf("retry: status %d, %v (%q), want 201 (the handler runs again)", r.status, r.err, r.raw)
			}
			want := 1
			if b.failedKept {
				want = 2
			}
			if n := b.writes(ctx); n != want {
				t.Fatalf("%d writes, want %d", n, want)
			}
		})
	}
}
