package fencedqtest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/fencedqtest"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
)

// TestWorkJobWhoseHandlerNeverReturns: a handler under test that ignores
// its context and never returns fails the test, naming the job, once its
// attempt's lease lapsed (its deadline and a second), instead of hanging
// the test binary until go test's timeout; the attempt is committed
// uncertain (its effect may still happen), so the job is not left running.
func TestWorkJobWhoseHandlerNeverReturns(t *testing.T) {
	env, client := newEnv(t)
	ctx := context.Background()
	res, err := client.Enqueue(ctx, debit{Account: "a1", Cents: 5}, jobs.Timeout(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	defer close(release)
	f := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fencedqtest.WorkJob(ctx, f, env, jobs.WorkFunc[debit](func(context.Context, *jobs.Job[debit]) error {
			<-release // ignores its context
			return nil
		}), res.Queue, res.JobID)
	}()
	select {
	case <-done:
	case <-time.After(testsignal.Scale(30 * time.Second)):
		t.Fatal("WorkJob still waits for a handler that never returns, 30 s after its 200 ms deadline")
	}
	f.mu.Lock()
	msg := f.msg
	f.mu.Unlock()
	if !strings.Contains(msg, res.JobID) || !strings.Contains(msg, "did not return") {
		t.Fatalf("failure %q, want one naming the job and saying its handler did not return", msg)
	}
	rec, err := client.Inspector().Get(ctx, res.Queue, res.JobID)
	if err != nil || rec.State != jobs.Uncertain {
		t.Fatalf("record %+v (%v): want uncertain after the abandoned attempt", rec, err)
	}
}
