// Package fenceout cuts an uncertain job's attempt off from a store that
// can raise marks (fence.Fencer), so that the attempt, should it still run
// (a paused process, a handler that ignores its context), can no longer
// write there: the maintenance leader's resolver and the asynq bridge do it
// before they ask whether the attempt's operation was applied, and a
// jobs.Client given a Fencer before an operator's decision that it was not.
package fenceout

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/lease"
)

// fenceOutTTL bounds the resource lease Attempt takes to raise a mark
// above every earlier holder of the resource: it is released at once, and
// one whose release failed holds the resource no longer than this.
const fenceOutTTL = 5 * time.Second

// Attempt cuts rec's attempt (the one that left the job uncertain) off
// from the store fr (nil: it does nothing): it raises the mark of the
// attempt's resource so that a write with the attempt's fence is refused
// as stale, while every later attempt's is accepted. Until then the
// attempt may still be running (a paused process, a handler that ignores
// its context) and write after it was found or decided "not applied";
// once it returns nil, that answer about rec's operation is final for
// writes through fr. owner
// names who raises the mark (never an attempt's owner).
//
// A job that is its own resource is fenced by its ledger token: the mark
// goes to (that token, owner), or one above it when the attempt already
// wrote with its token (a later attempt's token is above that too, unless
// the clock stepped back: that attempt's writes are then refused and its
// job retried). A named resource is fenced by its lease's tokens, which
// the ledger does not keep: Attempt takes the resource's lease through
// leases (its token is above every earlier one) and raises the mark to it
// before releasing it; while another job holds the lease, the mark goes to
// that holder's own fence (its writes stay accepted), and while the
// attempt itself still holds it (its owner's, the job's pool and id),
// as for a job resource: an attempt of the same job by the same pool that
// an operator's re-run started since has that owner too, and is then
// refused and retried. A mark already above leaves nothing to do.
func Attempt(ctx context.Context, rec *ledger.Record, fr fence.Fencer, leases *lease.Manager, owner string) error {
	if fr == nil {
		return nil
	}
	f := fence.Fence{Resource: rec.LeaseResource(), Token: rec.Token, Owner: owner, OperationID: rec.OperationID}
	bump := true // the attempt's own token: one above it if the attempt holds the mark
	if rec.Resource != "" {
		if leases == nil {
			return fmt.Errorf("no lease manager to fence resource %q", rec.Resource)
		}
		l, err := leases.Acquire(ctx, rec.Resource, owner, fenceOutTTL)
		var held *lease.HeldError
		switch {
		case errors.As(err, &held) && held.Owner == rec.Owner+"/"+rec.ID:
			f.Token = held.Token // the attempt itself, its lease not yet expired
		case errors.As(err, &held):
			f.Token, f.Owner, bump = held.Token, held.Owner, false
		case err != nil:
			return fmt.Errorf("taking resource %q's lease: %w", rec.Resource, err)
		default:
			defer func() { _ = leases.Release(context.WithoutCancel(ctx), l) }()
			f.Token, bump = l.Token, false
		}
	}
	err := fr.FenceOnAcquire(ctx, f)
	var stale *fence.StaleError
	if !errors.As(err, &stale) {
		return err
	}
	if stale.StoredToken > f.Token || !bump {
		return nil // a mark above the attempt's token already refuses it
	}
	f.Token++ // the attempt wrote with its token: its mark is (token, its owner)
	if err := fr.FenceOnAcquire(ctx, f); err != nil && !errors.As(err, &stale) {
		return err
	}
	return nil
}
