package maintenance

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
)

// pruner drops index entries of finished jobs whose records expired after
// retention, released entries of the queues' unique indexes (unique jobs:
// their job gone or out of its unique states, their period over), repairs
// fair groups whose head was lost (ledger.RepairGroups), ends the
// concurrency-limit permits whose holder was lost (ledger.RepairLimits),
// puts back due-index entries scored far ahead (ledger.RepairDue), the
// records of finished workflows past retention whose steps expired, and,
// with an EffectPruner, effect records past theirs.
type pruner struct {
	service
	interval time.Duration
	effects  EffectPruner // nil: effect records are kept
	// now reads the clock retention is measured by: the namespace's time
	// (Ledger.ReadTime), which finished jobs are scored and expire by.
	now func(context.Context) (time.Time, error)
	// pruned gets the queues whose indexes a pass pruned, for the status
	// service to read again.
	pruned *queueSet
}

// runOnce is one prune pass. An effect log that fails to prune is logged
// and counted, and the queues are pruned all the same.
func (p *pruner) runOnce(ctx context.Context, _ lease.Token) error {
	if p.effects != nil {
		n, err := p.effects(ctx)
		if err != nil {
			p.failed(ctx, "effect log pruning failed", "error", err)
		} else if n > 0 {
			p.log.Info("pruned effect records past their retention", "records", n)
		}
	}
	qs, err := p.ledger.Queues(ctx)
	if err != nil {
		return err
	}
	now, err := p.now(ctx)
	if err != nil {
		return err
	}
	// One look at every queue; only the calls a queue needs are made.
	needs := p.ledger.PruneLook(ctx, qs, now)
	return p.eachOf(ctx, qs, func(i int, q string) error {
		need := needs[i]
		var errs []error
		for _, step := range []struct {
			needed bool
			run    func() (int64, error)
			level  slog.Level
			msg    string
		}{
			{need.Finished, func() (int64, error) { return p.ledger.Prune(ctx, q, now) },
				slog.LevelDebug, "pruned finished jobs past retention"},
			{need.Unique, func() (int64, error) { return p.ledger.PruneUnique(ctx, q) },
				slog.LevelDebug, "pruned released unique keys"},
			{need.Groups, func() (int64, error) { return p.ledger.RepairGroups(ctx, q) },
				slog.LevelWarn, "gave fair groups whose head was lost a head"},
			{need.Limits, func() (int64, error) { return p.ledger.RepairLimits(ctx, q) },
				slog.LevelWarn, "ended concurrency-limit permits whose holder was lost"},
			{need.Due, func() (int64, error) { return p.ledger.RepairDue(ctx, q) },
				slog.LevelWarn, "put back due-index entries scored beyond any due time"},
			{need.Workflows, func() (int64, error) {
				n, err := p.ledger.PruneWorkflows(ctx, q, now)
				return int64(n), err
			}, slog.LevelDebug, "pruned finished workflows past retention"},
		} {
			if !step.needed {
				continue
			}
			n, err := step.run()
			if n > 0 || err != nil {
				p.pruned.add(q)
			}
			if n > 0 {
				p.log.Log(ctx, step.level, step.msg, "queue", q, "count", n)
			}
			if errors.Is(err, jobs.ErrStale) || ctx.Err() != nil {
				return err
			}
			// The queue's other calls run all the same: a key one of them
			// fails at (of another type, say) must not stop the others.
			errs = append(errs, err)
		}
		return errors.Join(errs...)
	})
}
