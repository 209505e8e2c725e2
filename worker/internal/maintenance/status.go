package maintenance

import (
	"context"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
)

// status sets the per-state job gauges and publishes the leader's status
// for the dashboard and the CLI.
func (s *Services) status(ctx context.Context, leader lease.Token) error {
	now, err := s.ledger.ServerTime(ctx)
	if err != nil {
		return err
	}
	// Once a minute, the queues' history buckets (ledger.Ledger.RecordSeries)
	// are recorded too (a pass that fails records the minute again on the
	// next one).
	minute := now.Truncate(jobs.SeriesStep).UnixMilli()
	record := s.seriesMinute.Load() != minute
	err = s.eachQueue(ctx, "status", func(q string) error {
		counts, err := s.ledger.Counts(ctx, q)
		if err != nil {
			return err
		}
		for st, n := range counts {
			s.cfg.Metrics.Jobs.WithLabelValues(q, string(st)).Set(float64(n))
		}
		if record {
			return s.ledger.RecordSeries(ctx, q, now)
		}
		return nil
	})
	if record && err == nil {
		s.seriesMinute.Store(minute)
	}
	if err != nil {
		return err
	}
	s.cfg.Metrics.LastScan.Set(float64(time.Now().Unix()))
	return s.ledger.SetReconcilerStatus(ctx, ledger.ReconcilerStatus{
		Leader: s.cfg.WorkerID, Token: leader, LastScan: now,
		Expired: s.expired.Load(), Resolved: s.resolved.Load(),
	})
}
