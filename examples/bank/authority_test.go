package bank_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/examples/bank"
	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fence/httpfence"
)

// TestEffectsViewNamesNoOwner: GET /effects/{op} answers any caller, so it
// says whether and where an operation applied, and with which token, but
// not the owner: with the token it authorises writes as the holder.
func TestEffectsViewNamesNoOwner(t *testing.T) {
	e := newBankEnv(t, "http")
	ctx := context.Background()
	x := bank.Transfer{From: "acct-000", To: "acct-001", Cents: 1}
	if err := e.store.Transfer(ctx, fz(x, 10, "holder-secret", "op-1"), x); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(e.serviceURL + "/effects/op-1")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || strings.Contains(string(b), "holder-secret") || !strings.Contains(string(b), `"10"`) {
		t.Fatalf("GET /effects/op-1: %s %s, want the record without its owner", resp.Status, b)
	}
	rec, ok, err := e.store.Applied(ctx, "op-1")
	if err != nil || !ok || rec != (fence.Effect{OperationID: "op-1", Resource: x.Resource(), Token: 10}) {
		t.Fatalf("Applied = %+v, %v, %v", rec, ok, err)
	}
}

// TestHTTPStoreKeepsTheFenceOffOtherHosts: a service answering with a
// redirect to another host does not get the fence sent there (net/http's
// client copies a request's headers to its redirects, whatever the host).
func TestHTTPStoreKeepsTheFenceOffOtherHosts(t *testing.T) {
	got := make(chan http.Header, 4)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(other.Close)
	// 127.0.0.1 and localhost are other hosts to the client.
	target := strings.Replace(other.URL, "127.0.0.1", "localhost", 1)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(front.Close)
	s := bank.NewHTTPStore(front.URL, nil)
	x := bank.Transfer{From: "acct-000", To: "acct-001", Cents: 1}
	ctx := context.Background()
	if err := s.Transfer(ctx, fz(x, 10, "holder-secret", "op-1"), x); err == nil {
		t.Fatal("transfer answered 503 elsewhere: nil error")
	}
	if err := s.FenceOnAcquire(ctx, fz(x, 11, "holder-secret", "")); err == nil || errors.Is(err, fence.ErrStale) {
		t.Fatalf("fence on acquire answered 503 elsewhere: %v", err)
	}
	for range 2 {
		h := <-got
		for _, name := range []string{httpfence.HeaderToken, httpfence.HeaderOwner, httpfence.HeaderResource, httpfence.HeaderIdempotencyKey} {
			if v := h.Get(name); v != "" {
				t.Errorf("redirect to another host got %s: %q", name, v)
			}
		}
	}
}
