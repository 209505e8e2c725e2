package httpfence_test

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/fencedq/fencedq/fence/httpfence"
)

// Options.AllowUnfenced lets through requests without any fencing header.
// A request that sends the fencing headers, with empty values (a client
// whose fence was never filled in), or with the value only in a repeat
// after an empty one, is no such request: it is refused as incomplete
// instead of running its write unguarded.
func TestAllowUnfencedRefusesEmptyFencingHeaders(t *testing.T) {
	var runs atomic.Int32
	srv := httptest.NewServer(httpfence.Middleware(redisBackend(t).guard, httpfence.Options{AllowUnfenced: true})(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { runs.Add(1) })))
	defer srv.Close()
	names := []string{httpfence.HeaderToken, httpfence.HeaderResource, httpfence.HeaderOwner, httpfence.HeaderIdempotencyKey}
	send := func(h http.Header) int {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL, nil)
		req.Header = h
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	empty := http.Header{}
	repeated := http.Header{}
	for _, n := range names {
		empty[n] = []string{""}
		repeated[n] = []string{"", map[string]string{
			httpfence.HeaderToken: "1800000000000000", httpfence.HeaderResource: "acct:1",
			httpfence.HeaderOwner: "w", httpfence.HeaderIdempotencyKey: "op"}[n]}
	}
	for name, h := range map[string]http.Header{"empty values": empty, "values after empty ones": repeated,
		"an empty token alone": {httpfence.HeaderToken: {""}}} {
		if st := send(h); st != http.StatusPreconditionRequired && st != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 428 or 400", name, st)
		}
	}
	if n := runs.Load(); n != 0 {
		t.Fatalf("the handler ran %d times unguarded, want 0", n)
	}
	if st := send(http.Header{}); st != http.StatusOK || runs.Load() != 1 {
		t.Fatalf("an unfenced request: status %d, %d runs, want 200 and 1", st, runs.Load())
	}
}
