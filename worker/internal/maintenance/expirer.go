package maintenance

import (
	"context"
	"time"

	"github.com/fencedq/fencedq/internal/metrics"
	"github.com/fencedq/fencedq/lease"
)

// expire moves running jobs whose lease deadline passed without a commit
// to uncertain. Its call also raises each queue's reconciler high-water to
// this leader's token, so a deposed leader is refused everywhere.
// After a pass it wakes itself at the earliest running deadline when that
// comes before the next interval, so a crashed worker's job is found within
// about its lease TTL.
func (s *Services) expire(ctx context.Context, leader lease.Token) error {
	next := time.Duration(-1)
	defer func() {
		if next >= 0 && next < s.cfg.Interval {
			time.AfterFunc(next+5*time.Millisecond, func() {
				select {
				case s.expireWake <- struct{}{}:
				default:
				}
			})
		}
	}()
	return s.eachQueue(ctx, "expirer", func(q string) error {
		for {
			exp, err := s.ledger.Expire(ctx, q, leader, ExpireBatch)
			if err != nil {
				return err
			}
			if exp.NextIn >= 0 && (next < 0 || exp.NextIn < next) {
				next = exp.NextIn
			}
			for _, id := range exp.Moved {
				s.expired.Add(1)
				s.cfg.Metrics.Decisions.WithLabelValues(q, metrics.ResultExpired).Inc()
				s.log.Warn("lease expired without commit: job is uncertain", "queue", q, "job_id", id)
				s.cfg.Decided.Signal(Decision{JobID: id, Result: metrics.ResultExpired})
			}
			for _, id := range exp.Dropped {
				s.log.Warn("running entry without a running job removed", "queue", q, "job_id", id)
			}
			if len(exp.Moved)+len(exp.Dropped) < ExpireBatch {
				return nil
			}
		}
	})
}
