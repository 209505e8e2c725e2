package dashboard_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/dashboard"
)

// TestSiblingKeyIDs: an id naming a job's sibling key (<id>:history, a
// list) is no job: reads, searches and actions answer 404 (not 503 from a
// WRONGTYPE reply), log no error and leave the job alone.
func TestSiblingKeyIDs(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	h := f.handler(dashboard.Options{Username: user, Password: pass})
	id := f.reviewJob("default", echoArgs{N: 1}, "op-sibling")
	before, err := f.ledger.History(ctx, "default", id)
	must(t, err)
	sib := id + ":history"

	if res, body := call(t, h, httptest.NewRequest(http.MethodGet, "/api/jobs/default/"+sib, nil)); res.StatusCode != http.StatusNotFound {
		t.Fatalf("GET %s: %d %s", sib, res.StatusCode, body)
	}
	var m struct{ Matches []json.RawMessage }
	getJSON(t, h, "/api/search?q="+sib, &m)
	if len(m.Matches) != 0 {
		t.Fatalf("search %s: %d matches", sib, len(m.Matches))
	}
	for _, a := range []struct{ path, body string }{
		{"cancel", `{"note":"x"}`},
		{"run-now", `{"note":"x"}`},
		{"resolve", `{"decision":"rerun","note":"x"}`},
	} {
		if res, body := act(t, h, "/api/jobs/default/"+sib+"/"+a.path, a.body); res.StatusCode != http.StatusNotFound {
			t.Fatalf("%s %s: %d %s", a.path, sib, res.StatusCode, body)
		}
	}
	res, body := act(t, h, "/api/bulk", `{"action":"rerun","note":"x","jobs":[{"queue":"default","id":"`+sib+`"}]}`)
	var bulk struct {
		Failed []struct{ Code string }
	}
	must(t, json.Unmarshal(body, &bulk))
	if res.StatusCode != http.StatusOK || len(bulk.Failed) != 1 || bulk.Failed[0].Code != "not_found" {
		t.Fatalf("bulk re-run of %s: %d %s", sib, res.StatusCode, body)
	}

	after, err := f.ledger.History(ctx, "default", id)
	must(t, err)
	if len(after) != len(before) {
		t.Fatalf("history of %s changed: %d entries, was %d", id, len(after), len(before))
	}
	if logs := f.logs.String(); strings.Contains(logs, `"level":"ERROR"`) || strings.Contains(logs, "WRONGTYPE") {
		t.Fatalf("logs: %s", logs)
	}
}
