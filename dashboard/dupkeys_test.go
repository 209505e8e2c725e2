package dashboard_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/jobs"
)

// TestActionBodyWithARepeatedKeyIsRefused: an action body naming a field
// twice (in any case: encoding/json matches keys without regard to it,
// and keeps the last) is refused before anything is written, at any
// depth, so the decision taken is never another than the one a reader of
// the body sees first.
func TestActionBodyWithARepeatedKeyIsRefused(t *testing.T) {
	f := newFixture(t)
	h := f.handler(dashboard.Options{Username: user, Password: pass})
	review := f.reviewJob("default", chargeArgs{Account: "a", Card: secret}, "op-review")
	later := f.enqueue(echoArgs{N: 1}, jobs.Delay(time.Hour), jobs.OperationID("op-later"))
	for _, c := range []struct{ path, body string }{
		{"/api/jobs/default/" + review + "/resolve", `{"decision":"succeeded","decision":"dead"}`},
		{"/api/jobs/default/" + review + "/resolve", `{"decision":"succeeded","DECISION":"dead"}`},
		{"/api/jobs/default/" + review + "/resolve", `{"decision":"succeeded","deci\u017fion":"dead"}`}, // long s folds to s
		{"/api/jobs/default/" + later + "/cancel", `{"note":"a","Note":"b"}`},
		{"/api/jobs/default/" + later + "/run-now", `{"state":"pending","state":"pending"}`},
		{"/api/queues/default/pause", `{"note":"a","note":"b"}`},
		{"/api/bulk", `{"action":"cancel","note":"x","jobs":[{"queue":"default","id":"` + later + `","ID":"other"}]}`},
		{"/api/bulk", `{"action":"cancel","note":"x","jobs":[{"queue":"default","id":"` + later + `"}],"action":"run_now"}`},
	} {
		res, body := act(t, h, c.path, c.body)
		var e struct{ Code, Error string }
		_ = json.Unmarshal(body, &e)
		if res.StatusCode != http.StatusBadRequest || e.Code != "invalid" {
			t.Errorf("POST %s %s: %d %s", c.path, c.body, res.StatusCode, body)
		}
	}
	if st := f.state("default", review); st != jobs.Review {
		t.Fatalf("job %s is %s after refused decisions", review, st)
	}
	if st := f.state("default", later); st != jobs.Pending {
		t.Fatalf("job %s is %s after refused actions", later, st)
	}
	p, err := f.insp.Paused(t.Context(), "default")
	must(t, err)
	if p != nil {
		t.Fatalf("queue paused by a refused body: %+v", p)
	}
	// The same fields once each, nested objects alike, are taken.
	res, body := act(t, h, "/api/bulk", `{"action":"cancel","note":"x","jobs":[{"queue":"default","id":"`+later+`"}]}`)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("bulk cancel: %d %s", res.StatusCode, body)
	}
	res, body = act(t, h, "/api/jobs/default/"+review+"/resolve", `{"decision":"dead","note":"n"}`)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("resolve: %d %s", res.StatusCode, body)
	}
}
