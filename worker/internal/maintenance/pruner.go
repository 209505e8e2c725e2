package maintenance

import (
	"context"
	"time"

	"github.com/fencedq/fencedq/lease"
)

// prune drops index entries of finished jobs whose records expired after
// retention.
func (s *Services) prune(ctx context.Context, _ lease.Token) error {
	return s.eachQueue(ctx, "pruner", func(q string) error {
		n, err := s.ledger.Prune(ctx, q, time.Now())
		if n > 0 {
			s.log.Debug("pruned finished jobs past retention", "queue", q, "entries", n)
		}
		return err
	})
}
