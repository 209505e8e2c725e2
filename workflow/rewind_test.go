package workflow_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
	"github.com/fencedq/fencedq/workflow"
)

// A workflow is an enqueue of its client: its acknowledgement is checked
// for a rewind, and a workflow Redis lost (restarted from an older
// snapshot) is written again by Client.Resubmit, once; one Redis kept is
// left alone.
func TestWorkflowLostInARewindIsDetectedAndResubmitted(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Options{})
	rdb := srv.Client()
	e := newEnvOn(t, rdb, redistest.Namespace(t))
	c := jobs.NewClient(rdb, jobs.Config{Namespace: e.ns, Registerer: e.reg})
	kept, err := workflow.Enqueue(ctx, c, diamond())
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.Save(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	lost, err := workflow.Enqueue(ctx, c, diamond(), workflow.OperationID("lost"))
	if err != nil {
		t.Fatal(err)
	}
	srv.Restart() // back to the snapshot: the second workflow is gone
	if _, err := workflow.Enqueue(ctx, c, diamond()); err != nil {
		t.Fatal(err)
	}
	if v := counter(t, e.reg, "fencedq_ledger_rewinds_total", ""); v != 1 {
		t.Fatalf("fencedq_ledger_rewinds_total = %v after a workflow enqueue met the rewind, want 1", v)
	}
	out, err := c.Resubmit(ctx)
	if err != nil || len(out) != 1 || out[0].Restored != 4 {
		t.Fatalf("resubmitted %+v, %v; want the lost workflow's 4 steps", out, err)
	}
	for _, id := range []string{kept.ID, lost.ID} {
		if st, err := workflow.Get(ctx, c, id); err != nil || len(st.Steps) != 4 {
			t.Fatalf("workflow %s after the re-submission: %+v, %v", id, st, err)
		}
	}
	counts, err := c.Inspector().Counts(ctx, jobs.DefaultQueue)
	if err != nil || counts[jobs.Pending] != 3 || counts[jobs.Waiting] != 9 {
		t.Fatalf("counts %v, %v: want three workflows of 4 steps, each once", counts, err)
	}
	if again, err := c.Resubmit(ctx); err != nil || len(again) != 0 {
		t.Fatalf("a second re-submission: %+v, %v", again, err)
	}
}

// cutBeforeCommit cuts replication just before a workflow's home call (its
// commit) is sent, once the replica holds everything before it: a failover
// then loses the commit and keeps the steps written in other queues.
type cutBeforeCommit struct {
	f    *redistest.Failover
	once sync.Once
}

func (h *cutBeforeCommit) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *cutBeforeCommit) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if args := cmd.Args(); cmd.Name() == "fcall" && len(args) > 1 {
			if fn, _ := args[1].(string); strings.Contains(fn, "wf_enqueue") && slices.Contains(args, any("home")) {
				h.once.Do(func() {
					h.f.Sync()
					h.f.CutReplication()
				})
			}
		}
		return next(ctx, cmd)
	}
}

func (h *cutBeforeCommit) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestAcknowledgedWorkflowAbandonedAfterARewindRunsWhenResubmitted: a
// failover lost an acknowledged workflow's commit but kept its steps of
// another queue; past the grace the maintenance leader took it for never
// committed and cancelled it. The client's re-submission, which knows it
// was acknowledged, brings it back: it runs to its end.
func TestAcknowledgedWorkflowAbandonedAfterARewindRunsWhenResubmitted(t *testing.T) {
	if testing.Short() {
		t.Skip("failover tests skipped in -short mode")
	}
	ctx := context.Background()
	f := redistest.StartFailover(t, redistest.FailoverOptions{})
	rdb := f.Client()
	e := newEnvOn(t, rdb, redistest.Namespace(t))
	c := jobs.NewClient(rdb, jobs.Config{Namespace: e.ns})
	t.Cleanup(func() { _ = c.Close() })
	rdb.AddHook(&cutBeforeCommit{f: f})
	w := workflow.New("order").
		Add("charge", step("charge"), workflow.Options(jobs.Queue("wf-home"))).
		Add("audit", step("audit"), workflow.Options(jobs.Queue("wf-other"))).
		Add("ship", step("ship", "charge", "audit"), workflow.After("charge", "audit"), workflow.Options(jobs.Queue("wf-other")))
	res, err := workflow.Enqueue(ctx, c, w, workflow.OperationID("order:1"))
	if err != nil {
		t.Fatal(err)
	}
	f.KillPrimary() // the replica is promoted without the commit

	e.grace = time.Millisecond
	stop := e.start("wf-home", "wf-other")
	e.wait(res, "ship", jobs.Cancelled) // by audit's cancel, or abandon's
	if r := e.wait(res, "audit", jobs.Cancelled); !strings.Contains(r.Reason, "never committed") {
		t.Fatalf("audit cancelled with reason %q, want never committed", r.Reason)
	}
	stop() // a pass abandoning it again mid-re-submission would be that grace's doing
	if out, err := c.Resubmit(ctx); err != nil || len(out) != 1 || out[0].Restored != 3 {
		t.Fatalf("resubmitted %+v, %v; want the workflow's 3 steps", out, err)
	}
	e.grace = 0
	e.run(true, prometheus.NewRegistry(), func(p *worker.Pool) error { return worker.Register(p, jobs.WorkFunc[Step](e.work)) },
		"wf-home", "wf-other")
	for _, s := range []string{"charge", "audit", "ship"} {
		e.wait(res, s, jobs.Succeeded)
	}
	st := e.status(res.ID)
	if st.State != workflow.Succeeded || st.CancelledBy != "" || st.Done != 3 {
		t.Fatalf("re-submitted workflow: %+v", st)
	}
	for _, s := range []string{"charge", "audit", "ship"} {
		if n := e.runs.count(s); n != 1 {
			t.Fatalf("step %s ran %d times, want once", s, n)
		}
	}
}
