package workflow_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

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
