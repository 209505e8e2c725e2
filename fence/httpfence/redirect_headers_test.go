package httpfence_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/fence/httpfence"
)

// net/http's client copies a request's headers to the requests of its
// redirects, to any host (only Authorization and cookies stay home). A
// fence set on the request with SetHeaders, sent through a Transport,
// must stay off another host as a fence from the context does.
func TestTransportKeepsSetHeadersOffOtherHosts(t *testing.T) {
	url, seen := redirectServers(t)
	client := &http.Client{Transport: &httpfence.Transport{}}
	for _, path := range []string{"/away", "/here"} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url+path, strings.NewReader("body"))
		req.Header.Set("X-Other", "kept")
		if err := httpfence.SetHeaders(req, fz("acct:1", 10, "w-a", "op")); err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	landed, ok := seen("/landed")
	if !ok {
		t.Fatal("the redirect to the other host was not followed")
	}
	for _, name := range []string{httpfence.HeaderToken, httpfence.HeaderResource, httpfence.HeaderOwner, httpfence.HeaderIdempotencyKey} {
		if v := landed.Get(name); v != "" {
			t.Errorf("the other host got %s %q, want none", name, v)
		}
	}
	if landed.Get("X-Other") != "kept" {
		t.Errorf("the other host lost an unrelated header: %v", landed)
	}
	if stay, _ := seen("/stay"); stay.Get(httpfence.HeaderToken) != "10" {
		t.Errorf("a redirect within the host got token %q, want 10", stay.Get(httpfence.HeaderToken))
	}
}
