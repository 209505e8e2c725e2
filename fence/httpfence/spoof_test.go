package httpfence_test

import (
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/fencedq/fencedq/fence/httpfence"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/lease"
)

// A fenced service takes its fence from the request: a client that never
// held a lease can send any token. A token no lease mints, whose time part
// lies far past the clock (2^64-1, say), would become the resource's mark
// for good: no lease token can ever exceed it, so every holder after it
// would be refused as stale. The middleware refuses such a token as
// invalid and stores nothing; a token a lease minted is accepted.
func TestMiddlewareRefusesTokensNoLeaseMints(t *testing.T) {
	for name, mk := range map[string]func(*testing.T) backend{"redis": redisBackend, "postgres": pgBackend} {
		t.Run(name, func(t *testing.T) {
			b := mk(t)
			ctx := t.Context()
			srv := httptest.NewServer(httpfence.Middleware(b.guard, httpfence.Options{})(http.HandlerFunc(
				func(w http.ResponseWriter, r *http.Request) {
					if err := b.write(r.Context()); err != nil {
						http.Error(w, err.Error(), http.StatusInternalServerError)
					}
				})))
			defer srv.Close()
			post := func(tok, op string) int {
				t.Helper()
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, nil)
				req.Header.Set(httpfence.HeaderToken, tok)
				req.Header.Set(httpfence.HeaderResource, "acct:spoofed")
				req.Header.Set(httpfence.HeaderOwner, "w")
				req.Header.Set(httpfence.HeaderIdempotencyKey, op)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				return resp.StatusCode
			}
			// Any epoch, with a time part two years ahead, or the largest token.
			ahead := uint64(time.Now().Add(2 * 366 * 24 * time.Hour).UnixMicro())
			for _, tok := range []uint64{math.MaxUint64, 7<<52 | ahead, ahead} {
				if st := post(strconv.FormatUint(tok, 10), "spoof-"+strconv.FormatUint(tok, 10)); st != http.StatusBadRequest {
					t.Errorf("token %d: status %d, want %d", tok, st, http.StatusBadRequest)
				}
			}
			m := lease.NewManager(redistest.Start(t, redistest.Options{}).Client(), lease.Config{Namespace: redistest.Namespace(t)})
			l, err := m.Acquire(ctx, "acct:spoofed", "w", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if st := post(l.Token.String(), "legit"); st != http.StatusOK {
				t.Fatalf("the lease holder's write (token %d): status %d, want %d", l.Token, st, http.StatusOK)
			}
			// Far epochs with a current time part are tokens a lease mints
			// after failovers; they are accepted.
			if st := post(strconv.FormatUint(uint64(l.Token)+100<<52, 10), "later-epoch"); st != http.StatusOK {
				t.Fatalf("a later epoch's token: status %d, want %d", st, http.StatusOK)
			}
			if n := b.writes(ctx); n != 2 {
				t.Fatalf("%d writes, want 2", n)
			}
		})
	}
}
