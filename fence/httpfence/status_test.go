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

// The already-applied answer is a 2xx. The same header on an error status
// (a gateway's 502 passing an upstream's headers on, a service failing
// after a middleware of its own set it) proves nothing: CheckResponse
// leaves it to the caller's status check, rather than reporting the
// operation applied and its effect done. Odd statuses without the fencing
// answers are the caller's to judge too, and their bodies stay readable.
func TestCheckResponseOnlyTrustsAlreadyAppliedOn2xx(t *testing.T) {
	req, _ := http.NewRequest(http.MethodPost, "http://svc/", nil)
	if err := httpfence.SetHeaders(req, fz("acct:1", 5, "w", "op")); err != nil {
		t.Fatal(err)
	}
	resp := func(status int, already bool, body string) *http.Response {
		h := http.Header{}
		if already {
			h.Set(httpfence.HeaderAlreadyApplied, "true")
		}
		return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader(body)), Request: req}
	}
	for _, status := range []int{http.StatusBadRequest, http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable, 0, 999} {
		r := resp(status, true, `{"status":"already_applied","stored_token":"5"}`)
		if err := httpfence.CheckResponse(r); err != nil {
			t.Errorf("status %d with %s: %v, want nil (the status is the caller's to judge)", status, httpfence.HeaderAlreadyApplied, err)
		}
		if b, _ := io.ReadAll(r.Body); !strings.Contains(string(b), "already_applied") {
			t.Errorf("status %d: body %q no longer readable", status, b)
		}
	}
	for _, status := range []int{http.StatusOK, http.StatusCreated, http.StatusNoContent} {
		if err := httpfence.CheckResponse(resp(status, true, `{"status":"already_applied","operation_id":"op","stored_token":"5"}`)); !errors.Is(err, fence.ErrAlreadyApplied) {
			t.Errorf("status %d with %s: %v, want ErrAlreadyApplied", status, httpfence.HeaderAlreadyApplied, err)
		}
	}
	if err := httpfence.CheckResponse(resp(http.StatusConflict, false, `{"error":"stale_token","stored_token":"9"}`)); !errors.Is(err, fence.ErrStale) {
		t.Errorf("409 stale_token: %v, want ErrStale", err)
	}
	if err := httpfence.CheckResponse(resp(http.StatusConflict, false, "<html>conflict</html>")); err != nil {
		t.Errorf("409 without a fencing body: %v, want nil", err)
	}
}
