package maintenance

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/metrics"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
)

// ExpireBatch bounds how many expired attempts one expire call moves; a
// pass calls again until a queue has fewer left.
const ExpireBatch = 500

// tally is what the expirer and the resolver decided while this process
// led, which the status service publishes.
type tally struct {
	expired  atomic.Int64
	resolved atomic.Int64
}

// expirer moves running jobs whose lease deadline passed without a commit
// to uncertain, where the resolver finds them.
type expirer struct {
	service
	interval time.Duration
	batch    int
	tally    *tally
	decided  *testsignal.Signal[Decision]
	// wake is the expirer's own wake-up at the earliest running deadline.
	wake chan struct{}
}

// wakeUps is the expirer's wake channel (a task's wake).
func (x *expirer) wakeUps(context.Context) <-chan struct{} { return x.wake }

// runOnce is one expiry pass over every queue. Its expire calls also raise
// each queue's leader high-water to this leader's token, so a deposed
// leader is refused everywhere. It calls Expire only on the queues a look
// (Ledger.FirstDeadline, plain reads) shows with a passed deadline or
// without this leader's token recorded, all in one round trip
// (Ledger.ExpireAll): an idle queue costs one read. After the pass it wakes itself at the
// earliest running deadline when that comes before the next interval, so a
// crashed worker's job is found within about its lease TTL.
func (x *expirer) runOnce(ctx context.Context, leader lease.Token) error {
	next := time.Duration(-1)
	defer func() {
		if next >= 0 && next < x.interval {
			time.AfterFunc(next+5*time.Millisecond, func() {
				select {
				case x.wake <- struct{}{}:
				default:
				}
			})
		}
	}()
	qs, err := x.ledger.Queues(ctx)
	if err != nil {
		return err
	}
	firsts, err := x.ledger.FirstDeadline(ctx, qs, leader)
	if err != nil {
		return err
	}
	var todo []string
	for i, q := range qs {
		if firsts[i] != 0 {
			// Nothing expired here, and this leader's token is recorded.
			if d := firsts[i]; d > 0 && (next < 0 || d < next) {
				next = d
			}
			continue
		}
		todo = append(todo, q)
	}
	// The queues' expire calls go together, in batches of ExpireBatch
	// attempts each; a queue whose batch was full is called again.
	for len(todo) > 0 {
		res, errs := x.ledger.ExpireAll(ctx, todo, leader, x.batch)
		var again []string
		for i, q := range todo {
			if err := errs[i]; err != nil {
				if errors.Is(err, jobs.ErrStale) || ctx.Err() != nil {
					return err
				}
				x.failed(ctx, "maintenance pass failed on one queue", "queue", q, "error", err)
				continue
			}
			if x.report(q, res[i], &next) {
				again = append(again, q)
			}
		}
		todo = again
	}
	return nil
}

// lostMsg is logged for a running or uncertain job whose record is gone
// while its index entry was left: Redis evicted it (a maxmemory policy
// other than noeviction) or someone deleted it. No pass can resolve it.
const lostMsg = "job record gone (evicted by Redis or deleted): the job is lost and its index entry removed; " +
	"check the effect of its operation by hand, and set maxmemory-policy noeviction"

// report logs and counts what one expire call of queue q did, lowers *next
// to the earliest deadline left, and reports whether the call's batch was
// full (the queue may have more to expire).
func (x *expirer) report(q string, exp *ledger.Expired, next *time.Duration) (full bool) {
	if exp.NextIn >= 0 && (*next < 0 || exp.NextIn < *next) {
		*next = exp.NextIn
	}
	for _, id := range exp.Moved {
		x.tally.expired.Add(1)
		x.metrics.Expired.WithLabelValues(ledger.Logical(q)).Inc()
		x.log.Warn("lease expired without commit: job is uncertain", "queue", q, "job_id", id)
		x.decided.Signal(Decision{JobID: id, Result: ResultExpired})
	}
	for _, id := range exp.Reviewed {
		x.metrics.Rejected.WithLabelValues(ledger.Logical(q), metrics.ReasonMalformed).Inc()
		x.log.Warn("job record holds an unknown state (edited or corrupt): moved to review", "queue", q, "job_id", id)
	}
	for _, id := range exp.Lost {
		x.metrics.Rejected.WithLabelValues(ledger.Logical(q), metrics.ReasonUnknownJob).Inc()
		x.log.Error(lostMsg, "queue", q, "job_id", id, "job_state", jobs.Running)
	}
	for _, id := range exp.Dropped {
		x.log.Warn("running entry without a running job removed", "queue", q, "job_id", id)
	}
	return len(exp.Moved)+len(exp.Reviewed)+len(exp.Lost)+len(exp.Dropped) >= x.batch
}
