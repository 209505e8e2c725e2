package jobstest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
)

type noteArgs struct{}

func (noteArgs) Kind() string { return "note" }

func TestWaitStateSeesTheCommit(t *testing.T) {
	rdb, ns := redistest.New(t)
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	t.Cleanup(func() { _ = c.Close() })
	l := ledger.New(rdb, ledger.Config{Namespace: ns})
	ctx := context.Background()
	res, err := c.Enqueue(ctx, noteArgs{})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := l.Claim(ctx, jobs.DefaultQueue, "w1", time.Minute, 1)
	if err != nil || len(cl.Jobs) != 1 {
		t.Fatal(cl, err)
	}
	done := make(chan error, 1)
	go func() { // commits while WaitState waits
		_, err := l.Complete(ctx, jobs.DefaultQueue, []ledger.Completion{{ID: res.JobID, Token: cl.Jobs[0].Token,
			Outcome: ledger.Outcome{To: jobs.Succeeded}}})
		done <- err
	}()
	rec := jobstest.WaitState(t, l, jobs.DefaultQueue, res.JobID, jobs.Succeeded)
	if rec.State != jobs.Succeeded || rec.ID != res.JobID {
		t.Fatalf("record %+v", rec)
	}
	// The commit can be seen before its call returns: wait for it, so the
	// test's cleanup does not close the client under it.
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestWaitStateFailureShowsTheJob(t *testing.T) {
	t.Setenv(testsignal.ScaleEnv, "0.02") // 200 ms: these waits are meant to fail
	rdb, ns := redistest.New(t)
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	t.Cleanup(func() { _ = c.Close() })
	l := ledger.New(rdb, ledger.Config{Namespace: ns})
	res, err := c.Enqueue(context.Background(), noteArgs{})
	if err != nil {
		t.Fatal(err)
	}
	f := redistest.NewFatalCatcher(t)
	go jobstest.WaitState(f, l, jobs.DefaultQueue, res.JobID, jobs.Succeeded)
	if msg := <-f.Msg; !strings.Contains(msg, "want state succeeded") || !strings.Contains(msg, "it is pending") {
		t.Fatalf("failure message %q", msg)
	}
	go jobstest.WaitState(f, l, jobs.DefaultQueue, "no-such-job", jobs.Succeeded)
	if msg := <-f.Msg; !strings.Contains(msg, "never found") {
		t.Fatalf("failure message %q", msg)
	}
}
