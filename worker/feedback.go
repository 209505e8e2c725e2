package worker

import (
	"context"

	"github.com/fencedq/fencedq/fence"
	rules "github.com/fencedq/fencedq/internal/attempt"
)

// raiseAbove feeds a storage refusal back to the token counter: when the
// handler's error is storage refusing the attempt's own fence with a
// higher stored token (a token a failover made the ledger or the lease
// counter forget), the counter of the attempt's fence is raised above it,
// so the job's next attempt is accepted at once instead of being refused
// until the clock catches up. It runs before the outcome is committed, so
// the retry's next claim already mints above the mark.
func (p *Pool) raiseAbove(a *attempt, err error) {
	tok := a.fence()
	mark, ok := rules.StorageMark(err, fence.Fence{Resource: a.resource, Token: tok, Owner: a.owner, OperationID: a.job.OperationID})
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), commitTimeout)
	defer cancel()
	if l := a.resourceLease(); l != nil {
		err = p.leases.Raise(ctx, a.resource, mark)
	} else {
		_, err = p.ledger.Raise(ctx, a.job.Queue, a.job.ID, mark)
	}
	if err != nil {
		a.log.Warn("storage holds a higher token, but raising the token counter above it failed; the next attempt may be refused too",
			"resource", a.resource, "storage_token", mark.String(), "error", err)
		return
	}
	a.log.Warn("storage holds a higher token than this attempt's (lost by a Redis failover?); the next attempt mints above it",
		"resource", a.resource, "fence_token", tok.String(), "storage_token", mark.String())
}
