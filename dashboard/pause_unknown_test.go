package dashboard_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/fencedq/fencedq/dashboard"
)

// TestPauseUnknownQueueSaysSo: a pause (or resume) of a queue no job or
// pool has used (most likely a mistyped name) is done, as for the CLI,
// and its answer says the queue was unknown ("known": false), so a script
// can notice the typo; a queue in use answers "known": true.
func TestPauseUnknownQueueSaysSo(t *testing.T) {
	f := newFixture(t)
	h := f.handler(dashboard.Options{Username: user, Password: pass})
	f.enqueue(echoArgs{N: 1})
	for _, c := range []struct {
		path  string
		known bool
	}{
		{"/api/queues/defualt/pause", false},
		{"/api/queues/defualt/resume", true}, // the pause listed it
		{"/api/queues/never-used/resume", false},
		{"/api/queues/default/pause", true},
	} {
		res, body := act(t, h, c.path, `{"note":"maintenance"}`)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s", c.path, res.StatusCode, body)
		}
		var got struct {
			Known *bool `json:"known"`
		}
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatal(err)
		}
		if got.Known == nil || *got.Known != c.known {
			t.Errorf("%s: answer %s, want \"known\": %v", c.path, body, c.known)
		}
	}
}
