package httpfence_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fence/httpfence"
)

// A fence authorises writes: whoever holds its token and owner is accepted
// as the holder. A redirect to another host must not carry it, as
// net/http's client drops Authorization there; a redirect within the host
// keeps it.
func TestTransportKeepsTheFenceOffOtherHosts(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]string{} // host and path -> token header
	record := func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Host+r.URL.Path] = r.Header.Get(httpfence.HeaderToken)
		mu.Unlock()
	}
	other := httptest.NewServer(http.HandlerFunc(record))
	defer other.Close()
	// The same listener under another name is another host.
	elsewhere := strings.Replace(other.URL, "127.0.0.1", "localhost", 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/away":
			http.Redirect(w, r, elsewhere+"/landed", http.StatusTemporaryRedirect)
		case "/here":
			http.Redirect(w, r, "/stay", http.StatusTemporaryRedirect)
		default:
			record(w, r)
		}
	}))
	defer srv.Close()
	ctx := fence.NewContext(t.Context(), fz("acct:1", 10, "w-a", "op"))
	post := func(c *http.Client, path string) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+path, strings.NewReader("body"))
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	client := &http.Client{Transport: &httpfence.Transport{}}
	if err := post(client, "/away"); err != nil {
		t.Fatal(err)
	}
	if err := post(client, "/here"); err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(elsewhere, "http://")
	if tok, ok := seen[host+"/landed"]; !ok || tok != "" {
		t.Errorf("the other host got token %q (reached: %v), want none", tok, ok)
	}
	if tok := seen[strings.TrimPrefix(srv.URL, "http://")+"/stay"]; tok != "10" {
		t.Errorf("a redirect within the host got token %q, want 10", tok)
	}
	strict := &http.Client{Transport: &httpfence.Transport{Require: true}}
	if err := post(strict, "/away"); !errors.Is(err, httpfence.ErrMissing) {
		t.Errorf("Require, redirected to another host: %v, want ErrMissing", err)
	}
}
