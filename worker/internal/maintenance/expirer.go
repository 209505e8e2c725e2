package maintenance

import (
	"context"

	"github.com/fencedq/fencedq/lease"
)

// expire moves running jobs whose lease deadline passed without a commit
// to uncertain. Its call also raises each queue's reconciler high-water to
// this leader's token, so a deposed leader is refused everywhere.
func (s *Services) expire(ctx context.Context, leader lease.Token) error {
	return s.eachQueue(ctx, "expirer", func(q string) error {
		for {
			exp, err := s.ledger.Expire(ctx, q, leader, ExpireBatch)
			if err != nil {
				return err
			}
			for _, id := range exp.Moved {
				s.expired.Add(1)
				s.cfg.Metrics.Decisions.WithLabelValues(q, "expired").Inc()
				s.log.Warn("lease expired without commit: job is uncertain", "queue", q, "job_id", id)
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
