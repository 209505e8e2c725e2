package workflow_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
	"github.com/fencedq/fencedq/workflow"
)

// Slow is a step kind that holds its attempt a little and records how many
// of its attempts ran at once.
type Slow struct {
	Name string `json:"name"`
}

func (Slow) Kind() string { return "wf_slow" }

// TestStepOptionsReachTheJob: a step's headers, concurrency limit and rate
// limit are the job's, as for Enqueue: six parallel steps under a limit of
// one never overlap, and each carries its header.
func TestStepOptionsReachTheJob(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	var (
		mu          sync.Mutex
		cur, most   int
		headersSeen = map[string]string{}
	)
	w := workflow.New("limited").Add("root", step("root"))
	names := []string{"a", "b", "c", "d", "e", "f"}
	for _, n := range names {
		w.Add(n, Slow{Name: n}, workflow.After("root"), workflow.Options(
			jobs.Limit("export:wf", 1), jobs.Rate("calls", 1000, time.Second), jobs.Header("tenant", "acme-"+n)))
	}
	res, err := workflow.Enqueue(ctx, e.client, w)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := e.client.Inspector().Get(ctx, res.Steps["a"].Queue, res.Steps["a"].JobID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.LimitKey != "export:wf" || rec.LimitMax != 1 || rec.RateKey != "calls" || rec.RateMax != 1000 ||
		rec.RatePer != time.Second || rec.Headers["tenant"] != "acme-a" {
		t.Fatalf("step a's record lost its options: limit %q/%d rate %q/%d/%v headers %v",
			rec.LimitKey, rec.LimitMax, rec.RateKey, rec.RateMax, rec.RatePer, rec.Headers)
	}

	p, err := worker.NewPool(e.rdb, worker.Config{Jobs: jobs.Config{Namespace: e.ns}, Concurrency: 8,
		LeaseTTL: time.Second, HandlerTimeout: 5 * time.Second, ShutdownTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := worker.Register(p, jobs.WorkFunc[Step](e.work)); err != nil {
		t.Fatal(err)
	}
	if err := worker.Register(p, jobs.WorkFunc[Slow](func(ctx context.Context, j *jobs.Job[Slow]) error {
		mu.Lock()
		cur++
		most = max(most, cur)
		headersSeen[j.Args.Name] = j.Headers["tenant"]
		mu.Unlock()
		time.Sleep(20 * time.Millisecond) // room for a second holder, were the limit ignored
		mu.Lock()
		cur--
		mu.Unlock()
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(runCtx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("pool: %v", err)
		}
	}()
	for _, n := range names {
		e.wait(res, n, jobs.Succeeded)
	}
	mu.Lock()
	defer mu.Unlock()
	if most != 1 {
		t.Fatalf("%d steps under a limit of 1 ran at once", most)
	}
	for _, n := range names {
		if headersSeen[n] != "acme-"+n {
			t.Errorf("step %s ran with header %q, want %q", n, headersSeen[n], fmt.Sprint("acme-", n))
		}
	}
}

// TestDelayedDependentStepKeepsItsDelay: a step with dependencies and a
// Delay becomes due at its delay's end, not when its dependencies finish.
func TestDelayedDependentStepKeepsItsDelay(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	w := workflow.New("delayed").Add("a", step("a")).
		Add("b", step("b", "a"), workflow.After("a"), workflow.Options(jobs.Delay(time.Hour)))
	res, err := workflow.Enqueue(ctx, e.client, w)
	if err != nil {
		t.Fatal(err)
	}
	q := res.Steps["a"].Queue
	c, err := e.ledger.Claim(ctx, q, "t", time.Minute, 10)
	if err != nil || len(c.Jobs) != 1 || c.Jobs[0].ID != res.Steps["a"].JobID {
		t.Fatalf("claim: %+v, %v (want step a alone)", c, err)
	}
	out, err := e.ledger.Complete(ctx, q, []ledger.Completion{{ID: c.Jobs[0].ID, Token: c.Jobs[0].Token,
		Outcome: ledger.Outcome{To: jobs.Succeeded}}})
	if err != nil || !out[0].Applied {
		t.Fatalf("completing a: %+v, %v", out, err)
	}
	rec, err := e.client.Inspector().Get(ctx, q, res.Steps["b"].JobID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != jobs.Pending || time.Until(rec.RunAt) < 50*time.Minute {
		t.Fatalf("step b after a: state %s, run at %v (want pending, due in about an hour)", rec.State, rec.RunAt)
	}
	if c, err := e.ledger.Claim(ctx, q, "t", time.Minute, 10); err != nil || len(c.Jobs) != 0 {
		t.Fatalf("step b was claimable at once: %+v, %v", c, err)
	}
}

// TestStepOperationIDOfAnotherJobIsRefused: a step whose operation id
// already names a job in its queue (or another step's) is refused before
// anything is written; the operation never runs twice.
func TestStepOperationIDOfAnotherJobIsRefused(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for _, op := range []string{"charge-order-7", "charge order 7"} { // a named id, an operation key
		first, err := e.client.Enqueue(ctx, step("plain"), jobs.OperationID(op))
		if err != nil {
			t.Fatal(err)
		}
		w := workflow.New("dup").Add("root", step("root")).
			Add("charge", step("charge", "root"), workflow.After("root"), workflow.Options(jobs.OperationID(op)))
		if _, err := workflow.Enqueue(ctx, e.client, w); !errors.Is(err, jobs.ErrInvalid) || !strings.Contains(err.Error(), first.JobID) {
			t.Fatalf("op %q: %v, want ErrInvalid naming job %s", op, err, first.JobID)
		}
	}
	w := workflow.New("twice").Add("a", step("a"), workflow.Options(jobs.OperationID("same"))).
		Add("b", step("b"), workflow.Options(jobs.OperationID("same")))
	if _, err := workflow.Enqueue(ctx, e.client, w); !errors.Is(err, jobs.ErrInvalid) {
		t.Fatalf("two steps with one operation id: %v, want ErrInvalid", err)
	}
	counts, err := e.client.Inspector().Counts(ctx, jobs.DefaultQueue)
	if err != nil {
		t.Fatal(err)
	}
	if counts[jobs.Pending] != 2 || counts[jobs.Waiting] != 0 {
		t.Fatalf("jobs after the refused workflows: %v (want the two plain jobs only)", counts)
	}
	// A workflow enqueued again with its operation id is not refused: its
	// steps' own ids hold their operation ids.
	again := func() (*workflow.Result, error) {
		return workflow.Enqueue(ctx, e.client, workflow.New("again").Add("s", step("s"), workflow.Options(jobs.OperationID("mine"))),
			workflow.OperationID("wf-again"))
	}
	r1, err := again()
	if err != nil {
		t.Fatal(err)
	}
	if r2, err := again(); err != nil || r2.ID != r1.ID {
		t.Fatalf("the same workflow again: %+v, %v", r2, err)
	}
}
