package maintenance

import (
	"context"
	"time"

	"github.com/fencedq/fencedq/lease"
)

// pruner drops index entries of finished jobs whose records expired after
// retention, released entries of the queues' unique indexes (unique jobs:
// their job gone or out of its unique states, their period over), repairs
// fair groups whose head was lost (ledger.RepairGroups), the
// records of finished workflows past retention whose steps expired, and,
// with an EffectPruner, effect records past theirs.
type pruner struct {
	service
	interval time.Duration
	effects  EffectPruner // nil: effect records are kept
	// now is the clock retention is measured by (time.Now).
	now func() time.Time
}

// runOnce is one prune pass. An effect log that fails to prune is logged
// and counted, and the queues are pruned all the same.
func (p *pruner) runOnce(ctx context.Context, _ lease.Token) error {
	if p.effects != nil {
		n, err := p.effects(ctx)
		if err != nil {
			p.failed("effect log pruning failed", "error", err)
		} else if n > 0 {
			p.log.Info("pruned effect records past their retention", "records", n)
		}
	}
	qs, err := p.ledger.Queues(ctx)
	if err != nil {
		return err
	}
	// One look at every queue; only the calls a queue needs are made.
	now := p.now()
	needs := p.ledger.PruneLook(ctx, qs, now)
	return p.eachOf(ctx, qs, func(i int, q string) error {
		need := needs[i]
		if need.Finished {
			n, err := p.ledger.Prune(ctx, q, now)
			if n > 0 {
				p.log.Debug("pruned finished jobs past retention", "queue", q, "entries", n)
			}
			if err != nil {
				return err
			}
		}
		if need.Unique {
			n, err := p.ledger.PruneUnique(ctx, q)
			if n > 0 {
				p.log.Debug("pruned released unique keys", "queue", q, "keys", n)
			}
			if err != nil {
				return err
			}
		}
		if need.Groups {
			g, err := p.ledger.RepairGroups(ctx, q)
			if g > 0 {
				p.log.Warn("gave fair groups whose head was lost a head", "queue", q, "groups", g)
			}
			if err != nil {
				return err
			}
		}
		if need.Workflows {
			w, err := p.ledger.PruneWorkflows(ctx, q, now)
			if w > 0 {
				p.log.Debug("pruned finished workflows past retention", "queue", q, "workflows", w)
			}
			return err
		}
		return nil
	})
}
