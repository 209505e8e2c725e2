package workflow_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/workflow"
)

// TestEnqueuePassesThroughTheClientsMiddleware: a workflow's steps are
// enqueues of the client, so its enqueue middleware (a tenant header, a
// trace context) sees them once, as one batch, and its amendments reach
// every step's job; it sees each step's result, and an amendment out of
// bounds is refused with jobs.ErrInvalid, writing nothing.
func TestEnqueuePassesThroughTheClientsMiddleware(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	var (
		calls int
		kinds []string
		seen  []*jobs.Result
	)
	tenancy := func(next jobs.EnqueueFunc) jobs.EnqueueFunc {
		return func(ctx context.Context, reqs []*jobs.EnqueueRequest) ([]*jobs.Result, error) {
			calls++
			for _, r := range reqs {
				kinds = append(kinds, r.Kind()+":"+r.WorkflowStep())
				r.SetHeader("tenant", "acme")
				if r.Queue == "bad" {
					r.Queue = "bad queue"
				}
			}
			res, err := next(ctx, reqs)
			seen = res
			return res, err
		}
	}
	client := jobs.NewClient(rdb, jobs.Config{Namespace: ns, EnqueueMiddleware: []jobs.EnqueueMiddleware{tenancy}})
	w := workflow.New("order").Add("charge", step("charge")).
		Add("ship", step("ship"), workflow.After("charge"), workflow.Options(jobs.Header("carrier", "dhl")))
	res, err := workflow.Enqueue(ctx, client, w, workflow.OperationID("order:1"))
	if err != nil {
		t.Fatal(err)
	}
	if calls != 1 || !slices.Equal(kinds, []string{"wf_step:charge", "wf_step:ship"}) || len(seen) != 2 {
		t.Fatalf("middleware called %d times with kinds %v, results %v: want once, with both steps named", calls, kinds, seen)
	}
	for i, name := range []string{"charge", "ship"} {
		ref := res.Steps[name]
		rec, err := client.Inspector().Get(ctx, ref.Queue, ref.JobID)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Headers["tenant"] != "acme" {
			t.Errorf("step %s's job has headers %v: the middleware's header is missing", name, rec.Headers)
		}
		if seen[i] == nil || seen[i].JobID != ref.JobID || seen[i].Queue != "default" {
			t.Errorf("middleware saw result %+v for step %s, want job %s", seen[i], name, ref.JobID)
		}
	}
	if rec, _ := client.Inspector().Get(ctx, res.Steps["ship"].Queue, res.Steps["ship"].JobID); rec.Headers["carrier"] != "dhl" {
		t.Errorf("ship's own header lost: %v", rec.Headers)
	}

	// Enqueued again: deduplicated as a whole, and the middleware is told so.
	again, err := workflow.Enqueue(ctx, client, w, workflow.OperationID("order:1"))
	if err != nil || !again.Deduplicated || len(seen) != 2 || seen[0] == nil || !seen[0].Deduplicated {
		t.Fatalf("second enqueue %+v %v, middleware saw %+v: want deduplicated", again, err, seen)
	}

	// An amendment out of bounds writes nothing.
	bad := workflow.New("bad").Add("a", step("a"), workflow.Options(jobs.Queue("bad")))
	if _, err := workflow.Enqueue(ctx, client, bad); !errors.Is(err, jobs.ErrInvalid) {
		t.Fatalf("a step the middleware moved to an invalid queue: %v, want ErrInvalid", err)
	}
	if list, err := workflow.List(ctx, client, 0, 10); err != nil || len(list) != 1 {
		t.Fatalf("workflows %+v %v, want only the first", list, err)
	}
}
