package asynqfence

import (
	"context"

	"github.com/fencedq/fencedq/jobs"
)

// Report is what the bridge's middleware did with one delivery, for a
// middleware installed before it (tracing, logging): see WatchDelivery.
type Report struct {
	// Ran is true when the delivery ran its handler under a fenced
	// attempt; false when the ledger let nothing run (a duplicate, a job
	// busy, paused, in review, reconciled as applied, or a task refused).
	Ran bool
	// Attempt is the attempt the handler ran under (zero unless Ran).
	Attempt Attempt
	// Err is the handler's error (nil: it succeeded; a panic's, or
	// runtime.Goexit's, as the ledger records it).
	Err error
	// State is the state the attempt's outcome leads to: jobs.Succeeded,
	// jobs.Pending (a retry), jobs.Dead, jobs.Uncertain or jobs.Cancelled;
	// once Committed, the state the ledger recorded.
	State jobs.State
	// Committed is true when the ledger applied the outcome.
	Committed bool
	// Refused is true when the ledger refused the outcome as stale:
	// another attempt's token owns the job, its lease expired before the
	// commit, or its record is gone. Neither Committed nor Refused: the
	// commit failed (Redis unreachable), and the job's next delivery
	// reconciles it.
	Refused bool
}

type reportKey struct{}

// WatchDelivery returns a context to pass on to the bridge's middleware,
// and report, which returns what the bridge did with the delivery once
// the middleware returned (or ended its goroutine, runtime.Goexit, after
// committing): ok is false when no bridge handled the delivery under that
// context. It costs no Redis call.
//
//	mux.Use(func(next asynq.Handler) asynq.Handler {
//		return asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
//			ctx, report := asynqfence.WatchDelivery(ctx)
//			err := next.ProcessTask(ctx, t)
//			if r, ok := report(); ok && r.Refused { ... }
//			return err
//		})
//	}, bridge.Middleware())
func WatchDelivery(ctx context.Context) (context.Context, func() (Report, bool)) {
	w := &watched{}
	return context.WithValue(ctx, reportKey{}, w), func() (Report, bool) { return w.r, w.set }
}

// watched is a delivery's report slot, written by the bridge on the
// delivery's own goroutine before its middleware returns.
type watched struct {
	r   Report
	set bool
}

// report records r for a middleware that watches the delivery of ctx.
func report(ctx context.Context, r Report) {
	if w, ok := ctx.Value(reportKey{}).(*watched); ok {
		w.r, w.set = r, true
	}
}
