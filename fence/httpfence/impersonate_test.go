package httpfence_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/fence"
)

// A fence authorises writes: whoever sends the holder's token and owner
// writes as the holder, without raising the mark, so the holder never
// learns of it. The middleware's refusals must not hand them out: a client
// that sends a stale token, or another holder's operation id, learns no
// owner but its own, and resending what it learned is refused. Pools still
// get the mark they raise their counters to.
func TestMiddlewareAnswersGiveNoHolderAway(t *testing.T) {
	for name, mk := range map[string]func(*testing.T) backend{"redis": redisBackend, "postgres": pgBackend} {
		t.Run(name, func(t *testing.T) {
			b := mk(t)
			ctx := t.Context()
			srv := fencedServer(t, b)
			const holder = "holder-secret-owner"
			post := func(res, tok, owner, op string) reply { return postFenced(t, srv.URL, res, tok, owner, op) }
			if r := post("acct:1", "1000", holder, "holder-op"); r.status != http.StatusCreated {
				t.Fatalf("the holder's write: %d %q", r.status, r.raw)
			}
			// A stale token: 409 with the mark, and no owner.
			r := post("acct:1", "1", "attacker", "probe")
			if r.status != http.StatusConflict || r.body.Error != "stale_token" || r.body.StoredToken != "1000" {
				t.Fatalf("stale probe: %d %q", r.status, r.raw)
			}
			if strings.Contains(r.raw, holder) {
				t.Errorf("the stale answer names the holder: %s", r.raw)
			}
			var se *fence.StaleError
			if !errors.As(r.err, &se) || se.StoredToken != 1000 || se.Fence.Token != 1 {
				t.Errorf("CheckResponse(stale) = %v, want the mark 1000 for token 1", r.err)
			}
			owner := r.body.StoredOwner
			if owner == "" {
				owner = "attacker"
			}
			if r2 := post("acct:1", r.body.StoredToken, owner, "impersonated"); r2.status != http.StatusConflict {
				t.Errorf("resending the answer's token %q with owner %q: %d %q, want 409", r.body.StoredToken, owner, r2.status, r2.raw)
			}
			// Another holder's operation id (sent on another resource, as
			// a stale token is refused first): already applied, and no owner.
			r = post("acct:2", "1", "attacker", "holder-op")
			if r.status != http.StatusOK || r.body.Status != "already_applied" {
				t.Fatalf("applied probe: %d %q", r.status, r.raw)
			}
			if strings.Contains(r.raw, holder) {
				t.Errorf("the already-applied answer names the holder: %s", r.raw)
			}
			var ae *fence.AlreadyAppliedError
			if !errors.As(r.err, &ae) || !ae.Elsewhere() || ae.Record.Token != 1000 {
				t.Errorf("CheckResponse(applied elsewhere) = %v", r.err)
			}
			// The holder's own repeat is told its own owner back.
			r = post("acct:1", "1000", holder, "holder-op")
			if !errors.As(r.err, &ae) || ae.Elsewhere() || ae.Record.Owner != holder {
				t.Errorf("CheckResponse(holder's repeat) = %v", r.err)
			}
			if n := b.writes(ctx); n != 1 {
				t.Fatalf("%d writes, want only the holder's", n)
			}
		})
	}
}
