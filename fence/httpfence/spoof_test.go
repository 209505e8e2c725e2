package httpfence_test

import (
	"math"
	"net/http"
	"strconv"
	"testing"
	"time"

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
			srv := fencedServer(t, b)
			post := func(tok, op string) int { return postFenced(t, srv.URL, "acct:spoofed", tok, "w", op).status }
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
			if st := post(l.Token.String(), "legit"); st != http.StatusCreated {
				t.Fatalf("the lease holder's write (token %d): status %d, want %d", l.Token, st, http.StatusCreated)
			}
			// Far epochs with a current time part are tokens a lease mints
			// after failovers; they are accepted.
			if st := post(strconv.FormatUint(uint64(l.Token)+100<<52, 10), "later-epoch"); st != http.StatusCreated {
				t.Fatalf("a later epoch's token: status %d, want %d", st, http.StatusCreated)
			}
			if n := b.writes(ctx); n != 2 {
				t.Fatalf("%d writes, want 2", n)
			}
		})
	}
}
