package dashboard_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/dashboard"
)

// TestSessionLogsRejectedCredentials: api/session, which says whether the
// credentials sent are valid, logs the ones it rejects as every other
// check does (without them), so guessing a password or token through it
// shows in the log.
func TestSessionLogsRejectedCredentials(t *testing.T) {
	f := newFixture(t)
	h := f.handler(dashboard.Options{Username: user, Password: pass, Token: token})
	for _, set := range []func(*http.Request){
		func(r *http.Request) { r.SetBasicAuth(user, "guess-one") },
		func(r *http.Request) { r.Header.Set("Authorization", "Bearer guess-two") },
	} {
		r := httptest.NewRequest(http.MethodGet, "/api/session", nil)
		set(r)
		res, body := call(t, h, r)
		var s struct{ Authenticated bool }
		must(t, json.Unmarshal(body, &s))
		if res.StatusCode != http.StatusOK || s.Authenticated {
			t.Fatalf("session with wrong credentials: %d %s", res.StatusCode, body)
		}
	}
	logs := f.logs.String()
	if n := strings.Count(logs, "dashboard: rejected credentials"); n != 2 {
		t.Errorf("%d rejected credentials logged, want 2:\n%s", n, logs)
	}
	for _, leak := range []string{"guess-one", "guess-two", pass, token} {
		if strings.Contains(logs, leak) {
			t.Errorf("logs contain %q:\n%s", leak, logs)
		}
	}
	// No credentials sent: nothing to log.
	var s struct{}
	getJSON(t, h, "/api/session", &s)
	if after := f.logs.String(); after != logs {
		t.Errorf("anonymous session logged:\n%s", after[len(logs):])
	}
	// A read-only dashboard (behind a proxy that sends its own
	// Authorization header, say) has no credentials to guess.
	ro := f.handler(dashboard.Options{})
	r := httptest.NewRequest(http.MethodGet, "/api/session", nil)
	r.Header.Set("Authorization", "Bearer proxy-token")
	if res, body := call(t, ro, r); res.StatusCode != http.StatusOK {
		t.Fatalf("read-only session: %d %s", res.StatusCode, body)
	}
	if after := f.logs.String(); after != logs {
		t.Errorf("read-only session logged:\n%s", after[len(logs):])
	}
}
