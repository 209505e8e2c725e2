package redisfence

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/fencedq/fencedq/fence"
)

// Guard runs run at most once per operation id, fenced by f, for callers
// whose writes do not go through Apply (the HTTP middleware of package
// httpfence, say). Redis cannot hold a transaction open around run, so
// Guard checks first and records last:
//
//  1. The operation id is bound to f.Resource as in Apply; if it is bound
//     to another resource, Guard returns Apply's answer without running.
//     Begin (one script, like Apply without ops): the fence is checked and
//     the high-water mark raised to f, or a *fence.StaleError is returned;
//     an applied record returns a *fence.AlreadyAppliedError; a pending
//     record of another Guard returns fence.ErrInProgress. Otherwise the
//     operation is recorded as pending, expiring after Config.PendingTTL.
//  2. run executes with a context that ends when the pending record expires
//     (by the local clock, counted from before Begin was sent).
//  3. If run returns nil, the record turns into an applied one (kept for
//     Config.EffectTTL). If run fails or panics, the pending record is
//     deleted and the binding given up, so a retry can run, on any
//     resource; the operation is never marked applied without run having
//     succeeded.
//
// Trade-offs, compared with pgfence's Guard (which runs the callback inside
// the transaction): the high-water mark is raised before run, so a newer
// token arriving while run executes is accepted and may write concurrently
// with it; for writes that must be fenced atomically, use Apply. If run
// outlives PendingTTL, a retry may start a second run. If recording fails
// after run succeeded, Guard returns an error although the effect happened
// (matching ErrMutation when the effect record was replaced by another type
// meanwhile, naming its key; not fence.ErrRefused, which a refusal before
// run matches); the pending record then expires and a retry runs again.
func (s *Store) Guard(ctx context.Context, f fence.Fence, run func(ctx context.Context) error) error {
	if err := s.usable(); err != nil {
		return err
	}
	if err := validateFence(f); err != nil {
		return err
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	nonce := hex.EncodeToString(b[:])
	if err := s.claim(ctx, f); err != nil {
		return refusedWrite(err)
	}
	// The pending record expires PendingTTL after the script runs, so the
	// callback's deadline counts from before it is sent, not from its reply.
	deadline := time.Now().Add(s.cfg.PendingTTL)
	if err := s.run(ctx, f, "begin", ms(s.cfg.PendingTTL), nonce, nil); err != nil {
		if refused(err) {
			s.release(ctx, f)
		}
		return refusedWrite(err)
	}
	key := s.EffectKey(f.Resource, f.OperationID)
	done := false
	defer func() {
		if !done {
			_ = abortScript.Run(context.WithoutCancel(ctx), s.client, []string{key}, nonce).Err()
			s.release(ctx, f)
		}
	}()
	runCtx, cancel := context.WithDeadline(ctx, deadline)
	err := run(runCtx)
	cancel()
	if err != nil {
		return err
	}
	done = true
	err = finishScript.Run(context.WithoutCancel(ctx), s.client, []string{key},
		nonce, f.Token.String(), f.Owner, f.Resource, f.OperationID, ms(s.cfg.EffectTTL)).Err()
	if msg, ok := strings.CutPrefix(fmt.Sprint(err), "FENCEDQ "); ok {
		return fmt.Errorf("%w: record %q after it ran: %s", ErrMutation, f.OperationID, msg)
	}
	if err != nil {
		return fmt.Errorf("redisfence: record %q after it ran: %w", f.OperationID, err)
	}
	return nil
}
