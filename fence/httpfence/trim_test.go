package httpfence_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fence/httpfence"
)

// HTTP servers strip the spaces around a header value, so a fence whose
// resource, owner or operation id starts or ends with one would reach the
// service as another fence: "op " and "op" would name one operation (the
// second refused as already applied, its effect never made), "acct " and
// "acct" one high-water mark. The client refuses such a fence instead of
// sending it.
func TestSetHeadersRefusesValuesHTTPWouldTrim(t *testing.T) {
	var seen []fence.Fence
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, _, _ := httpfence.FromRequest(r)
		seen = append(seen, f)
	}))
	defer srv.Close()
	client := &http.Client{Transport: &httpfence.Transport{}}
	for _, f := range []fence.Fence{
		fz("acct:1 ", 5, "w", "op"), fz(" acct:1", 5, "w", "op"),
		fz("acct:1", 5, "w ", "op"), fz("acct:1", 5, "w", " op"), fz("acct:1", 5, "w", "op "),
	} {
		req := httptest.NewRequest(http.MethodPost, "/", nil)
		if err := httpfence.SetHeaders(req, f); !errors.Is(err, fence.ErrInvalid) {
			t.Errorf("SetHeaders(%q) = %v, want ErrInvalid", f, err)
		}
		if len(req.Header) != 0 {
			t.Errorf("SetHeaders(%q) set headers %v", f, req.Header)
		}
		req, _ = http.NewRequestWithContext(fence.NewContext(t.Context(), f), http.MethodPost, srv.URL, nil)
		if resp, err := client.Do(req); !errors.Is(err, fence.ErrInvalid) {
			if err == nil {
				resp.Body.Close()
			}
			t.Errorf("Transport sent %q: %v, want ErrInvalid", f, err)
		}
	}
	if len(seen) != 0 {
		t.Fatalf("the service saw %q", seen)
	}
	// Spaces inside a value travel unchanged.
	f := fz("acct 1", 5, "w 1", "op 1")
	req, _ := http.NewRequestWithContext(fence.NewContext(t.Context(), f), http.MethodPost, srv.URL, nil)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(seen) != 1 || seen[0] != f {
		t.Fatalf("the service saw %q, want %q", seen, f)
	}
}
