package workflow_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/workflow"
)

// onCall runs do once, just before the first command sent (alone or in a
// pipeline) that holds every one of args, each a whole argument, one of
// them holding fn.
type onCall struct {
	fn   string
	args []string
	do   func()
	once sync.Once
}

func (h *onCall) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *onCall) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		var have []string
		for _, a := range cmd.Args() {
			if s, ok := a.(string); ok {
				have = append(have, s)
			}
		}
		if slices.ContainsFunc(have, func(a string) bool { return strings.Contains(a, h.fn) }) &&
			!slices.ContainsFunc(h.args, func(a string) bool { return !slices.Contains(have, a) }) {
			h.once.Do(h.do)
		}
		return next(ctx, cmd)
	}
}

func (h *onCall) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			_ = h.ProcessHook(func(context.Context, redis.Cmder) error { return nil })(ctx, cmd)
		}
		return next(ctx, cmds)
	}
}

// TestResubmissionRacingTheAbandonPassRuns: a workflow acknowledged to
// its client lost its commit in a rewind (Redis restarted from a snapshot
// taken before it), keeping its steps of another queue; the maintenance
// leader's abandon pass and the client's re-submission then run at once,
// the re-submission landing between the abandon's record and its first
// cancel (revive), or between its own read of the record and its commit
// (home). Either way the workflow runs to its end, each step once: the
// abandon cancels no step the re-submission committed.
func TestResubmissionRacingTheAbandonPassRuns(t *testing.T) {
	for _, tc := range []struct {
		name string
		// abandonFirst: the re-submission's commit waits for a whole
		// abandon pass, which found no record; else the re-submission
		// runs between the abandon's record and its first cancel
		abandonFirst bool
	}{
		{"between the abandon's record and its cancels", false},
		{"between the re-submission's read and its commit", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			srv := redistest.Start(t, redistest.Options{})
			rdb := srv.Client()
			e := newEnvOn(t, rdb, redistest.Namespace(t))
			c := jobs.NewClient(rdb, jobs.Config{Namespace: e.ns})
			t.Cleanup(func() { _ = c.Close() })
			// the snapshot holds the steps of wf-other, not the commit
			snap := srv.Client()
			rdb.AddHook(&onCall{fn: "_wf_enqueue", args: []string{"home"}, do: func() {
				if err := snap.Save(ctx).Err(); err != nil {
					t.Error(err)
				}
			}})
			w := workflow.New("order").
				Add("charge", step("charge"), workflow.Options(jobs.Queue("wf-home"))).
				Add("audit", step("audit"), workflow.Options(jobs.Queue("wf-other"))).
				Add("ship", step("ship", "charge", "audit"), workflow.After("charge", "audit"), workflow.Options(jobs.Queue("wf-other")))
			res, err := workflow.Enqueue(ctx, c, w, workflow.OperationID("order:1"))
			if err != nil {
				t.Fatal(err)
			}
			srv.Restart()
			// an enqueue of the client meets the rewind
			probe := workflow.New("probe").Add("probe", step("probe"), workflow.Options(jobs.Queue("wf-home")))
			if _, err := workflow.Enqueue(ctx, c, probe); err != nil {
				t.Fatal(err)
			}

			arb := srv.Client()
			leader := ledger.New(arb, ledger.Config{Namespace: e.ns})
			abandon := func() {
				if _, err := leader.AbandonUncommitted(ctx, []string{"wf-home", "wf-other"}, time.Now().Add(time.Hour)); err != nil {
					t.Error(err)
				}
			}
			var resubmitted []jobs.Resubmitted
			resubmit := func() {
				if resubmitted, err = c.Resubmit(ctx); err != nil {
					t.Error(err)
				}
			}
			if tc.abandonFirst {
				rdb.AddHook(&onCall{fn: "_wf_enqueue", args: []string{"home"}, do: abandon})
				resubmit()
			} else {
				arb.AddHook(&onCall{fn: "_cancel", args: []string{ledger.UncommittedActor}, do: resubmit})
				abandon()
			}
			if len(resubmitted) != 1 {
				t.Fatalf("resubmitted %+v; want the workflow", resubmitted)
			}
			abandon() // a later pass changes nothing

			e.start("wf-home", "wf-other")
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
		})
	}
}
