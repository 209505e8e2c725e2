package workflow_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
	"github.com/fencedq/fencedq/workflow"
)

// Bulky is a step kind with large args.
type Bulky struct {
	Blob string `json:"blob"`
}

func (Bulky) Kind() string { return "wf_bulky" }

// replyBytes counts, while on, the bytes of the values Redis's replies
// carried.
type replyBytes struct {
	on atomic.Bool
	n  atomic.Int64
}

func (r *replyBytes) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *replyBytes) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, c redis.Cmder) error {
		err := next(ctx, c)
		r.count(c)
		return err
	}
}

func (r *replyBytes) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, c := range cmds {
			r.count(c)
		}
		return err
	}
}

func (r *replyBytes) count(c redis.Cmder) {
	if !r.on.Load() {
		return
	}
	n := 0
	switch c := c.(type) {
	case *redis.MapStringStringCmd:
		for k, v := range c.Val() {
			n += len(k) + len(v)
		}
	case *redis.SliceCmd:
		for _, v := range c.Val() {
			s, _ := v.(string)
			n += len(s)
		}
	case *redis.StringCmd:
		n = len(c.Val())
	case *redis.StringSliceCmd:
		for _, s := range c.Val() {
			n += len(s)
		}
	}
	r.n.Add(int64(n))
}

// bytesRead returns how many bytes Redis's replies carried while f ran.
func (e *env) bytesRead(f func()) int64 {
	hook := &replyBytes{}
	e.rdb.(*redis.Client).AddHook(hook)
	hook.on.Store(true)
	f()
	hook.on.Store(false)
	return hook.n.Load()
}

// enqueueOutputs enqueues workflow "outputs" of steps Bulky steps s0, s1,
// ... (more given: added after them) and runs a pool whose handler records
// an output of size bytes for each.
func (e *env) enqueueOutputs(steps, size int, more func(*workflow.Workflow)) *workflow.Result {
	e.t.Helper()
	w := workflow.New("outputs")
	for i := range steps {
		w.Add(fmt.Sprint("s", i), Bulky{})
	}
	if more != nil {
		more(w)
	}
	res, err := workflow.Enqueue(context.Background(), e.client, w)
	if err != nil {
		e.t.Fatal(err)
	}
	e.run(true, nil, func(p *worker.Pool) error {
		return worker.Register(p, jobs.WorkFunc[Bulky](func(ctx context.Context, _ *jobs.Job[Bulky]) error {
			return jobs.RecordOutput(ctx, map[string]string{"blob": strings.Repeat("y", size)})
		}))
	})
	return res
}

// TestReadingAWorkflowLeavesItsStepsArgsUnread: a workflow's status (Get,
// List) shows each step's state, token, attempts, reason and output, never
// its args: reading it does not carry the steps' args (up to
// workflow.MaxPayloadBytes of them) from Redis, so a dashboard listing large
// workflows reads what it shows.
func TestReadingAWorkflowLeavesItsStepsArgsUnread(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const steps, blob = 16, 256 << 10
	w := workflow.New("bulky")
	for i := range steps {
		w.Add(fmt.Sprint("s", i), Bulky{Blob: strings.Repeat("x", blob)})
	}
	res, err := workflow.Enqueue(ctx, e.client, w)
	if err != nil {
		t.Fatal(err)
	}
	hook := &replyBytes{}
	e.rdb.(*redis.Client).AddHook(hook)
	hook.on.Store(true)
	st, err := workflow.Get(ctx, e.client, res.ID)
	if err != nil {
		t.Fatal(err)
	}
	list, err := workflow.List(ctx, e.client, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	hook.on.Store(false)
	if len(st.Steps) != steps || st.Steps[0].State != jobs.Pending || len(list) != 1 || list[0].Done != 0 || list[0].Total != steps {
		t.Fatalf("status %+v, list %v", st, list)
	}
	if n := hook.n.Load(); n >= blob {
		t.Fatalf("reading the workflow twice carried %d bytes from Redis; its steps' args are %d bytes", n, steps*blob)
	}
	// a step's key holding another type reads as a record in review saying
	// so, as a job's does, and fails no read of the others
	s0 := res.Steps["s0"]
	if err := e.rdb.Set(ctx, e.ledger.JobKey(s0.Queue, s0.JobID), "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	st = e.status(res.ID)
	if st.Steps[0].State != jobs.Review || !strings.Contains(st.Steps[0].Reason, "no hash") || st.Steps[1].State != jobs.Pending {
		t.Fatalf("a step's key of another type: %+v", st.Steps[:2])
	}
}
