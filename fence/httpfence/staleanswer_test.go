package httpfence_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fence/httpfence"
)

// A 409 stale_token answer whose request is not at hand (a response built
// or replayed by the caller, a transport that does not set resp.Request)
// still says which fence was refused: the middleware echoes the request's
// resource, token and Idempotency-Key in its body.
func TestCheckResponseStaleFenceFromTheAnswer(t *testing.T) {
	body := `{"error":"stale_token","resource":"doc:1","operation_id":"job-2","token":"33","stored_token":"34"}`
	for name, req := range map[string]*http.Request{"no request": nil, "unfenced request": {Header: http.Header{}}} {
		resp := &http.Response{StatusCode: http.StatusConflict, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(body)), Request: req}
		var stale *fence.StaleError
		if err := httpfence.CheckResponse(resp); !errors.As(err, &stale) {
			t.Fatalf("%s: %v, want a *fence.StaleError", name, err)
		}
		want := fence.Fence{Resource: "doc:1", Token: 33, OperationID: "job-2"}
		if stale.Fence != want || stale.StoredToken != 34 {
			t.Errorf("%s: fence %+v, stored %d; want %+v, stored 34", name, stale.Fence, stale.StoredToken, want)
		}
		if got := stale.Error(); got != `fence: stale token 33 for "doc:1" (storage has token 34)` {
			t.Errorf("%s: %q", name, got)
		}
	}
}
