package worker_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

type retriedArgs struct{}

func (retriedArgs) Kind() string { return "retried" }

// TestRetryDelayThatPanicsOrGoesNegative: a Config.RetryDelay that panics
// (a table of delays indexed past its end) does not bring the pool down:
// the retry is scheduled by the default delay and the panic is logged with
// the job id; a negative delay retries at once. Both jobs are retried
// until they succeed.
func TestRetryDelayThatPanicsOrGoesNegative(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	delays := []time.Duration{-time.Hour}
	cfg.RetryDelay = func(n int) time.Duration { return delays[n-1] } // panics from retry 2
	p := e.pool(cfg)
	if err := worker.Register(p, jobs.WorkFunc[retriedArgs](func(_ context.Context, j *jobs.Job[retriedArgs]) error {
		if j.Attempt < 3 {
			return errors.New("try again")
		}
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	e.start(p)
	res := e.enqueue(retriedArgs{})
	ctx := context.Background()
	var rec *jobs.Record
	// The second retry waits the default delay (2 to 4 s) before the third
	// attempt: the bound leaves room for it on a loaded machine.
	redistest.AwaitWithin(t, e.rdb, e.ns, "the job to succeed on its third attempt", 30*time.Second, func() bool {
		var err error
		rec, err = e.client.Inspector().Get(ctx, jobs.DefaultQueue, res.JobID)
		return err == nil && rec.State == jobs.Succeeded
	})
	if rec.Attempts != 3 {
		t.Errorf("%d attempts, want 3", rec.Attempts)
	}
	if !strings.Contains(e.logs.String(), "RetryDelay panicked") || !strings.Contains(e.logs.String(), res.JobID) {
		t.Errorf("the panicking RetryDelay was not logged with the job id:\n%s", tail(e.logs.String(), 10))
	}
}

type snoozedArgs struct {
	Snooze bool `json:"snooze"`
}

func (snoozedArgs) Kind() string { return "snoozed" }

// TestRetryAfterOverridesRetryDelay: a handler returning jobs.RetryAfter
// gets its retry due after the delay it gave, not the pool's RetryDelay
// (here: at once), and the attempt counts as a retry; a plain error of the
// same kind is retried by RetryDelay, at once, until it succeeds.
func TestRetryAfterOverridesRetryDelay(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.RetryDelay = func(int) time.Duration { return 0 }
	p := e.pool(cfg)
	if err := worker.Register(p, jobs.WorkFunc[snoozedArgs](func(_ context.Context, j *jobs.Job[snoozedArgs]) error {
		switch {
		case j.Args.Snooze:
			return jobs.RetryAfter(errors.New("upstream says 429"), time.Hour)
		case j.Attempt < 2:
			return errors.New("try again")
		}
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	e.start(p)
	ctx := context.Background()
	before := time.Now()
	snoozed := e.enqueue(snoozedArgs{Snooze: true})
	plain := e.enqueue(snoozedArgs{})
	in := e.client.Inspector()
	var rec *jobs.Record
	redistest.AwaitWithin(t, e.rdb, e.ns, "the snoozed job's first attempt to end", 30*time.Second, func() bool {
		var err error
		rec, err = in.Get(ctx, jobs.DefaultQueue, snoozed.JobID)
		return err == nil && rec.Attempts == 1 && rec.State == jobs.Pending
	})
	if rec.RunAt.Before(before.Add(50*time.Minute)) || rec.Error != "upstream says 429" {
		t.Errorf("snoozed job: due %v (enqueued %v), error %q; want due about an hour later, the handler's error kept",
			rec.RunAt, before, rec.Error)
	}
	redistest.AwaitWithin(t, e.rdb, e.ns, "the plain job to succeed on its retry", 30*time.Second, func() bool {
		r, err := in.Get(ctx, jobs.DefaultQueue, plain.JobID)
		return err == nil && r.State == jobs.Succeeded && r.Attempts == 2
	})
	if rec, err := in.Get(ctx, jobs.DefaultQueue, snoozed.JobID); err != nil || rec.Attempts != 1 || rec.State != jobs.Pending {
		t.Errorf("snoozed job after the plain one's retry: %+v, %v; want pending after its one attempt", rec, err)
	}
	var after *jobs.RetryAfterError
	if err := jobs.RetryAfter(nil, -time.Second); !errors.As(err, &after) || after.Delay != 0 {
		t.Errorf("RetryAfter(nil, -1s): %v, want a *RetryAfterError with no delay", err)
	}
}

type farArgs struct {
	Literal bool `json:"literal"`
}

func (farArgs) Kind() string { return "far" }

// TestRetryDelayIsCappedAtMaxDelay: a RetryDelay of 292 years, like a
// RetryAfterError built by hand with that delay, schedules the retry at
// most jobs.MaxDelay ahead, as jobs.RetryAfter does.
func TestRetryDelayIsCappedAtMaxDelay(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.RetryDelay = func(int) time.Duration { return math.MaxInt64 }
	p := e.pool(cfg)
	if err := worker.Register(p, jobs.WorkFunc[farArgs](func(_ context.Context, j *jobs.Job[farArgs]) error {
		if j.Args.Literal {
			return &jobs.RetryAfterError{Err: errors.New("later"), Delay: math.MaxInt64}
		}
		return errors.New("later")
	})); err != nil {
		t.Fatal(err)
	}
	e.start(p)
	ctx := context.Background()
	in := e.client.Inspector()
	for _, args := range []farArgs{{}, {Literal: true}} {
		res := e.enqueue(args)
		var rec *jobs.Record
		redistest.AwaitWithin(t, e.rdb, e.ns, "the job's first attempt to end", 30*time.Second, func() bool {
			var err error
			rec, err = in.Get(ctx, jobs.DefaultQueue, res.JobID)
			return err == nil && rec.Attempts == 1 && rec.State == jobs.Pending
		})
		if limit := time.Now().Add(jobs.MaxDelay); rec.RunAt.After(limit) || rec.RunAt.Before(limit.Add(-time.Hour)) {
			t.Errorf("%+v: retry due %v, want about jobs.MaxDelay ahead (%v)", args, rec.RunAt, limit)
		}
	}
}
