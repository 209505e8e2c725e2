package ledger

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/fencedq/fencedq/internal/epoch"
	"github.com/fencedq/fencedq/lease"
)

var (
	//go:embed lua/claim_job.lua
	claimJobSrc    string
	claimJobScript = mintingScript("claim_job", claimJobSrc, 5)
)

// ClaimJob is the fenced claim of job id of queue q alone, due or not and
// whether or not the queue is paused: the attempt Claim would start on it
// (a new token in the fencing epoch, see Claim; owner, lease deadline
// now + ttl, attempt + 1). A job that
// is not pending fails with ErrWrongState (a bridged one too: its own queue
// delivers it), a missing one with ErrNotFound.
func (l *Ledger) ClaimJob(ctx context.Context, q, id, owner string, ttl time.Duration) (*Claimed, error) {
	var r *reply
	err := l.epoch.Mint(ctx, func(st epoch.State) (bool, error) {
		v, err := l.run(ctx, l.lanes.other, claimJobScript, q, id, owner, ttl.Milliseconds(),
			st.ReplID, st.Epoch, st.Born).Result()
		r = newReply("claim job", v, err)
		if err := r.need(2); err != nil {
			return false, err
		}
		return r.int(0) == -1, nil // another primary: refresh (nothing was claimed)
	})
	if err != nil {
		return nil, wrap("claim "+id, err)
	}
	if r.int(0) == 0 {
		why := r.str(1)
		if why == "missing" {
			return nil, noJob(q, id)
		}
		return nil, fmt.Errorf("%w: job %s is %s, not pending", ErrWrongState, id, why)
	}
	if err := r.need(4); err != nil {
		return nil, wrap("claim "+id, err)
	}
	tok, deadline, attempt := lease.Token(r.uint(1)), time.UnixMilli(r.int(2)), int(r.int(3))
	if r.err != nil {
		return nil, wrap("claim "+id, r.err)
	}
	rec, err := l.Get(ctx, q, id)
	if err != nil {
		return nil, err
	}
	return &Claimed{
		ID: id, Queue: q, Token: tok, Deadline: deadline, Attempt: attempt, Payload: rec.Payload, Kind: rec.Kind,
		OperationID: rec.OperationID, Resource: rec.Resource, Timeout: rec.Timeout, MaxRetries: rec.MaxRetries,
		KindDefers: rec.KindDefers, Headers: rec.Headers,
	}, nil
}
