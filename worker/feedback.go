package worker

import (
	"context"
	"errors"
	"time"

	"github.com/fencedq/fencedq/fence"
	rules "github.com/fencedq/fencedq/internal/attempt"
	"github.com/fencedq/fencedq/lease"
)

// storageRefused records a storage refusal (the handler's error matches
// fence.ErrStale) in the ledger, where the dashboard and inspect show it
// with the queue's fenced rejections, and feeds it back to the token
// counter: when storage refused the attempt's own fence with a higher
// stored token (a token a failover made the ledger or the lease counter
// forget), the counter of the attempt's fence is raised above it, so the
// job's next attempt is accepted at once instead of being refused until the
// clock catches up. It runs before the outcome is committed, so the retry's
// next claim already mints above the mark. A mark no counter mints (its
// time part far in the future: rules.PlausibleMark) is logged, not fed back.
func (p *Pool) storageRefused(a *attempt, err error) {
	tok := a.fence()
	mark, raise := rules.StorageMark(err, fence.Fence{Resource: a.resource, Token: tok, Owner: a.owner, OperationID: a.job.OperationID})
	if raise && !rules.PlausibleMark(mark, tok, time.Now()) {
		a.log.Warn("storage refused the attempt's token with a mark no fencedq counter mints (a buggy or hostile storage?); the token counter is not raised to it",
			"resource", p.shown(a, a.resource), "fence_token", tok.String(), "storage_token", mark.String())
		raise = false
	}
	ctx, cancel := context.WithTimeout(context.Background(), commitTimeout)
	defer cancel()
	var rerr error
	jobMark := mark
	if l := a.resourceLease(); l != nil {
		jobMark = 0 // the mark is the resource's: its lease counter is raised
		if raise {
			rerr = p.leases.Raise(ctx, a.resource, mark)
		}
	}
	if !raise {
		jobMark = 0
	}
	recorded, lerr := p.ledger.StorageRefused(ctx, a.job.Queue, a.job.ID, a.job.Token, jobMark)
	if err := errors.Join(rerr, lerr); err != nil {
		a.log.Warn("storage refused the attempt's token; recording it (and raising the token counter above storage's) failed",
			"resource", p.shown(a, a.resource), "fence_token", tok.String(), "storage_token", markText(mark, raise), "error", p.shown(a, err.Error()))
		return
	}
	if recorded || (raise && a.resourceLease() != nil) {
		a.log.Warn("storage holds a higher token than this attempt's (lost by a Redis failover?); the next attempt mints above it",
			"resource", p.shown(a, a.resource), "fence_token", tok.String(), "storage_token", mark.String())
	}
}

func markText(mark lease.Token, ok bool) string {
	if !ok {
		return "unknown"
	}
	return mark.String()
}
