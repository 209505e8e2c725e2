package worker_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// TestRunAgainAfterAFailedStart: a pool whose Run failed to start (Redis
// not up yet, as at a deploy where the application starts first) runs
// when Run is called again, instead of answering ErrRunning for a pool
// that never ran.
func TestRunAgainAfterAFailedStart(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	rdb := srv.Client()
	e := newEnvOn(t, rdb, redistest.Namespace(t))
	p := e.pool(e.config())
	ran := make(chan string, 1)
	if err := worker.Register(p, jobs.WorkFunc[effectArgs](func(_ context.Context, j *jobs.Job[effectArgs]) error {
		ran <- j.ID
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := p.Run(ctx)
	if err == nil || errors.Is(err, worker.ErrRunning) {
		t.Fatalf("Run with Redis down: %v, want the connection error", err)
	}
	srv.Restart()
	e.start(p)
	id := e.enqueue(effectArgs{Name: "after-restart"}).JobID
	select {
	case got := <-ran:
		if got != id {
			t.Fatalf("ran %s, want %s", got, id)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the pool started again did not run the job")
	}
	jobstest.WaitState(t, e.ledger, "default", id, jobs.Succeeded)
}

// ptrArgs is a job kind registered through a pointer type, its Kind
// method on the value.
type ptrArgs struct {
	N int `json:"n"`
}

func (ptrArgs) Kind() string { return "ptr-args" }

// TestPointerArgsRegisterAndRun: a worker for a pointer to args whose Kind
// is a value method registers (it used to panic on the nil zero value) and
// runs the jobs enqueued with such pointers.
func TestPointerArgsRegisterAndRun(t *testing.T) {
	e := newEnv(t)
	p := e.pool(e.config())
	got := make(chan int, 1)
	if err := worker.Register(p, jobs.WorkFunc[*ptrArgs](func(_ context.Context, j *jobs.Job[*ptrArgs]) error {
		got <- j.Args.N
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	e.start(p)
	id := e.enqueue(&ptrArgs{N: 7}).JobID
	select {
	case n := <-got:
		if n != 7 {
			t.Fatalf("args N = %d, want 7", n)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the job did not run")
	}
	jobstest.WaitState(t, e.ledger, "default", id, jobs.Succeeded)
}

// TestRunWithoutWorkersWarns: a pool run before any worker is registered
// says so when it starts, rather than only as each claimed job is put
// back.
func TestRunWithoutWorkersWarns(t *testing.T) {
	e := newEnv(t)
	stop := e.start(e.pool(e.config()))
	for end := time.Now().Add(10 * time.Second); !strings.Contains(e.logs.String(), "pool started") && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	logs := e.logs.String()
	if !strings.Contains(logs, `"level":"WARN","msg":"no workers registered`) {
		t.Fatalf("no warning about a pool without workers:\n%s", tail(logs, 10))
	}
}
