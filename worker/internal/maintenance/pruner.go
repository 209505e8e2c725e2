package maintenance

import (
	"context"
	"time"

	"github.com/fencedq/fencedq/lease"
)

// prune drops index entries of finished jobs whose records expired after
// retention.
func (s *Services) prune(ctx context.Context, _ lease.Token) error {
	if s.cfg.EffectPruner != nil {
		n, err := s.cfg.EffectPruner(ctx)
		if err != nil {
			s.cfg.Metrics.ReconcileErrors.Inc()
			s.log.Warn("effect log pruning failed", "error", err)
		} else if n > 0 {
			s.log.Info("pruned effect records past their retention", "records", n)
		}
	}
	return s.eachQueue(ctx, "pruner", func(q string) error {
		n, err := s.ledger.Prune(ctx, q, time.Now())
		if n > 0 {
			s.log.Debug("pruned finished jobs past retention", "queue", q, "entries", n)
		}
		return err
	})
}
