package httpfence_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fence/httpfence"
)

// acceptAll is a Guard that accepts every fence and records what it saw.
type acceptAll struct{ seen []fence.Fence }

func (g *acceptAll) Guard(ctx context.Context, f fence.Fence, run func(ctx context.Context) error) error {
	g.seen = append(g.seen, f)
	return run(ctx)
}

// A fencing header sent twice is ambiguous (which token, which resource
// authorises the write?): the middleware refuses the request as an invalid
// fence instead of picking one of the values, and the handler does not run.
func TestMiddlewareRefusesRepeatedHeaders(t *testing.T) {
	for _, name := range []string{httpfence.HeaderToken, httpfence.HeaderResource, httpfence.HeaderOwner, httpfence.HeaderIdempotencyKey} {
		t.Run(name, func(t *testing.T) {
			g := &acceptAll{}
			ran := false
			h := httpfence.Middleware(g, httpfence.Options{})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				ran = true
			}))
			req := httptest.NewRequest(http.MethodPost, "/", nil)
			if err := httpfence.SetHeaders(req, fz("acct:1", 5, "w", "op-1")); err != nil {
				t.Fatal(err)
			}
			second := map[string]string{httpfence.HeaderToken: "900", httpfence.HeaderResource: "acct:2",
				httpfence.HeaderOwner: "w2", httpfence.HeaderIdempotencyKey: "op-2"}[name]
			req.Header.Add(name, second)
			if _, _, err := httpfence.FromRequest(req); err == nil {
				t.Errorf("FromRequest accepted %s sent twice", name)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			var body httpfence.ErrorBody
			_ = json.Unmarshal(rec.Body.Bytes(), &body)
			if rec.Code != http.StatusBadRequest || body.Error != "invalid_fence" {
				t.Errorf("%s sent twice: status %d, body %s; want 400 invalid_fence", name, rec.Code, rec.Body.String())
			}
			if ran || len(g.seen) != 0 {
				t.Errorf("%s sent twice: the guard saw %v and the handler ran %v", name, g.seen, ran)
			}
		})
	}
}

// CheckResponse reads a 409 to tell the middleware's answers from the
// service's own; a service's own 409 keeps its whole body for the caller,
// however long.
func TestCheckResponseKeepsTheWholeBody(t *testing.T) {
	body := strings.Repeat("conflict details ", 10_000) // 170 KB
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusConflict)
		_, _ = io.WriteString(w, body)
	}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := httpfence.CheckResponse(resp); err != nil {
		t.Fatalf("CheckResponse of the service's own 409: %v", err)
	}
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(body) {
		t.Fatalf("body after CheckResponse: %d bytes, want %d", len(got), len(body))
	}
}

// A fencing header whose bytes are not UTF-8 (HTTP lets a client send
// them) is bad input: 400 invalid_fence from either guard, never a 503
// that tells the client the outcome is unknown and to retry.
func TestMiddlewareRefusesHeaderBytesTheStoreCannotHold(t *testing.T) {
	for name, mk := range map[string]func(*testing.T) backend{"redis": redisBackend, "postgres": pgBackend} {
		t.Run(name, func(t *testing.T) {
			b := mk(t)
			h := httpfence.Middleware(b.guard, httpfence.Options{})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if err := b.write(r.Context()); err != nil {
					http.Error(w, err.Error(), http.StatusInternalServerError)
				}
			}))
			req := httptest.NewRequest(http.MethodPost, "/", nil)
			req.Header.Set(httpfence.HeaderToken, "5")
			req.Header.Set(httpfence.HeaderResource, "acct:\xff")
			req.Header.Set(httpfence.HeaderOwner, "w")
			req.Header.Set(httpfence.HeaderIdempotencyKey, "op-1")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code == http.StatusServiceUnavailable || (rec.Code != http.StatusBadRequest && rec.Code != http.StatusOK) {
				t.Fatalf("status %d, body %s; want 400 invalid_fence (or 200 from a store that holds any bytes)", rec.Code, rec.Body.String())
			}
		})
	}
}
