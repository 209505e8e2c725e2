package dashboard_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/syncbuf"
	"github.com/fencedq/fencedq/jobs"
)

// TestActionsOnADemotedPrimarySayNothingWasDone: a dashboard still
// connected to a primary that a failover demoted (now a read-only replica)
// has every action refused by Redis before it writes. The answers say the
// action was refused and nothing was done (503 write_refused), not that it
// may have been done, and the jobs and the queue are as they were on the
// new primary.
func TestActionsOnADemotedPrimarySayNothingWasDone(t *testing.T) {
	if testing.Short() {
		t.Skip("failover tests skipped in -short mode")
	}
	ctx := context.Background()
	f := redistest.StartFailover(t, redistest.FailoverOptions{})
	ns := redistest.Namespace(t)
	cfg := jobs.Config{Namespace: ns}
	stale := jobs.NewClient(f.Primary.Client(), cfg) // by the primary's address
	t.Cleanup(func() { _ = stale.Close() })
	res, err := stale.Enqueue(ctx, echoArgs{N: 1}, jobs.Queue("later"), jobs.Delay(time.Hour))
	must(t, err)
	id := res.JobID
	dead := deadJobOn(t, ledger.New(f.Primary.Client(), ledger.Config{Namespace: ns}), stale, "later")
	f.Sync()
	f.KillPrimary()
	f.Rejoin() // the old primary is back, a replica of the promoted node

	h, err := dashboard.New(nil, stale, dashboard.Options{Username: user, Password: pass,
		Logger: slog.New(slog.NewJSONHandler(&syncbuf.Buffer{}, nil))})
	must(t, err)
	const want = "nothing was done"
	for _, a := range []struct{ path, body string }{
		{"/api/jobs/later/" + id + "/cancel", `{"note":"refused","state":"pending","token":"","runs":0}`},
		{"/api/jobs/later/" + id + "/run-now", `{"note":"refused"}`},
		{"/api/jobs/later/" + dead + "/resolve", `{"decision":"rerun","note":"refused","state":"dead","runs":0}`},
		{"/api/queues/later/pause", `{"note":"refused"}`},
	} {
		res, b := act(t, h, a.path, a.body)
		if res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), `"code":"write_refused"`) ||
			!strings.Contains(string(b), want) || strings.Contains(string(b), "may have been done") {
			t.Errorf("%s on a demoted primary: %d %s (want 503 write_refused saying %s)", a.path, res.StatusCode, b, want)
		}
	}
	res2, b := act(t, h, "/api/bulk", `{"action":"cancel","note":"refused","jobs":[{"queue":"later","id":"`+id+`"}]}`)
	var br struct {
		Done   int
		Failed []struct{ Code, Error string }
	}
	if res2.StatusCode != http.StatusOK || json.Unmarshal(b, &br) != nil || br.Done != 0 || len(br.Failed) != 1 ||
		br.Failed[0].Code != "write_refused" || !strings.Contains(br.Failed[0].Error, want) {
		t.Errorf("bulk cancel on a demoted primary: %d %s (want the job listed write_refused, saying %s)", res2.StatusCode, b, want)
	}

	live := jobs.NewClient(f.Client(), cfg)
	t.Cleanup(func() { _ = live.Close() })
	rec, err := live.Inspector().Get(ctx, "later", id)
	must(t, err)
	if rec.State != jobs.Pending || !rec.RunAt.After(time.Now().Add(30*time.Minute)) {
		t.Errorf("the job changed on the primary: %s due %v", rec.State, rec.RunAt)
	}
	if st := stateOf(t, live, "later", dead); st != jobs.Dead {
		t.Errorf("the dead job is %s on the primary", st)
	}
	if p, err := live.Inspector().Paused(ctx, "later"); err != nil || p != nil {
		t.Errorf("queue paused on the primary: %+v, %v", p, err)
	}
}

// deadJobOn enqueues a job in queue q through c and commits it dead
// through l, as a pool would.
func deadJobOn(t *testing.T, l *ledger.Ledger, c *jobs.Client, q string) string {
	t.Helper()
	ctx := context.Background()
	res, err := c.Enqueue(ctx, brokenArgs{Why: "x"}, jobs.Queue(q))
	must(t, err)
	cl, err := l.ClaimJob(ctx, q, res.JobID, "w1", time.Minute)
	must(t, err)
	cs, err := l.Complete(ctx, q, []ledger.Completion{{ID: res.JobID, Token: cl.Token,
		Outcome: ledger.Outcome{To: jobs.Dead, Error: "declined", Reason: "permanent error"}}})
	must(t, err)
	if !cs[0].Applied {
		t.Fatalf("commit: %+v", cs[0])
	}
	return res.JobID
}

func stateOf(t *testing.T, c *jobs.Client, q, id string) jobs.State {
	t.Helper()
	rec, err := c.Inspector().Get(context.Background(), q, id)
	must(t, err)
	return rec.State
}
