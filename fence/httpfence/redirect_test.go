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
// redirectServers starts a service that redirects /away to another host's
// /landed (the same listener under another name is another host) and
// /here to its own /stay, and returns its URL and the headers each of
// those two paths received.
func redirectServers(t *testing.T) (url string, seen func(path string) (http.Header, bool)) {
	var mu sync.Mutex
	got := map[string]http.Header{}
	record := func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got[r.URL.Path] = r.Header.Clone()
		mu.Unlock()
	}
	other := httptest.NewServer(http.HandlerFunc(record))
	t.Cleanup(other.Close)
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
	t.Cleanup(srv.Close)
	return srv.URL, func(path string) (http.Header, bool) {
		mu.Lock()
		defer mu.Unlock()
		h, ok := got[path]
		return h, ok
	}
}

func TestTransportKeepsTheFenceOffOtherHosts(t *testing.T) {
	url, seen := redirectServers(t)
	ctx := fence.NewContext(t.Context(), fz("acct:1", 10, "w-a", "op"))
	post := func(c *http.Client, path string) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+path, strings.NewReader("body"))
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
	if h, ok := seen("/landed"); !ok || h.Get(httpfence.HeaderToken) != "" {
		t.Errorf("the other host got token %q (reached: %v), want none", h.Get(httpfence.HeaderToken), ok)
	}
	if h, _ := seen("/stay"); h.Get(httpfence.HeaderToken) != "10" {
		t.Errorf("a redirect within the host got token %q, want 10", h.Get(httpfence.HeaderToken))
	}
	strict := &http.Client{Transport: &httpfence.Transport{Require: true}}
	if err := post(strict, "/away"); !errors.Is(err, httpfence.ErrMissing) {
		t.Errorf("Require, redirected to another host: %v, want ErrMissing", err)
	}
}
