package worker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/metrics"
	"github.com/fencedq/fencedq/lease"
)

// renewer keeps every running attempt's leases alive: every LeaseTTL/3 it
// renews all ledger leases of a queue in one call, and the resource leases
// through the lease manager, whose concurrent calls share pipelines. An
// attempt whose lease is lost has its context cancelled at once; one whose
// renewals fail is cancelled by its watchdog at its local deadline. Neither
// is renewed again.
type renewer struct {
	p       *Pool
	mu      sync.Mutex
	active  map[*attempt]struct{}
	stopped error // set by stopAll: attempts added later are cancelled with it
}

func newRenewer(p *Pool) *renewer { return &renewer{p: p, active: map[*attempt]struct{}{}} }

func (r *renewer) add(a *attempt) {
	r.mu.Lock()
	r.active[a] = struct{}{}
	stopped := r.stopped
	r.mu.Unlock()
	if stopped != nil {
		a.cancel(stopped)
	}
}

// stopAll cancels the context of every running attempt, and of every one
// that starts later, with cause (the pool's shutdown timeout passed).
func (r *renewer) stopAll(cause error) {
	r.mu.Lock()
	r.stopped = cause
	as := make([]*attempt, 0, len(r.active))
	for a := range r.active {
		as = append(as, a)
	}
	r.mu.Unlock()
	for _, a := range as {
		a.cancel(cause)
	}
}

// running returns the running attempts.
func (r *renewer) running() []*attempt {
	r.mu.Lock()
	defer r.mu.Unlock()
	as := make([]*attempt, 0, len(r.active))
	for a := range r.active {
		as = append(as, a)
	}
	return as
}

func (r *renewer) remove(a *attempt) {
	r.mu.Lock()
	delete(r.active, a)
	r.mu.Unlock()
}

func (r *renewer) run(ctx context.Context) {
	t := time.NewTicker(r.p.cfg.LeaseTTL / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.renewAll(ctx)
		}
	}
}

// renewAll renews every active attempt once. An attempt is confirmed (its
// local deadline moves to sent + LeaseTTL - margin) only when every lease it
// holds was renewed.
func (r *renewer) renewAll(ctx context.Context) {
	now := time.Now()
	r.mu.Lock()
	byQueue := map[string][]*attempt{}
	for a := range r.active {
		if !a.renewing(now) {
			continue
		}
		byQueue[a.job.Queue] = append(byQueue[a.job.Queue], a)
	}
	r.mu.Unlock()
	n := 0
	defer func() { r.p.hooks.renewed.Signal(n) }()
	if len(byQueue) == 0 {
		return
	}
	for _, as := range byQueue {
		n += len(as)
	}
	sent := time.Now()
	var mu sync.Mutex
	failed := map[*attempt]bool{}
	fail := func(as ...*attempt) {
		mu.Lock()
		for _, a := range as {
			failed[a] = true
		}
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for q, as := range byQueue {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !r.renewQueue(ctx, q, as) {
				fail(as...)
			}
		}()
		for _, a := range as {
			l := a.resourceLease()
			if l == nil {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				if !r.renewResource(ctx, a, l) {
					fail(a)
				}
			}()
		}
	}
	wg.Wait()
	for _, as := range byQueue {
		for _, a := range as {
			if !failed[a] {
				a.confirm(sent)
			}
		}
	}
}

// renewQueue renews the ledger leases of one queue's attempts and reports
// whether the call succeeded.
func (r *renewer) renewQueue(ctx context.Context, q string, as []*attempt) bool {
	batch := make([]ledger.Attempt, len(as))
	for i, a := range as {
		batch[i] = ledger.Attempt{ID: a.job.ID, Token: a.job.Token}
	}
	out, err := r.p.ledger.Renew(ctx, q, r.p.cfg.LeaseTTL, batch)
	if err != nil {
		if ctx.Err() == nil {
			r.p.log.Warn("lease renewal failed; attempts stop at their local deadline unless a later renewal succeeds",
				"queue", q, "attempts", len(as), "error", err)
		}
		return false
	}
	for i, a := range as {
		switch out[i].Status {
		case ledger.Lost:
			r.p.metrics.Fenced.WithLabelValues(ledger.Logical(q), metrics.StageRenew).Inc()
			a.loseLease(fmt.Errorf("%w: the ledger says the job is %s", lease.ErrLost, out[i].State))
		case ledger.CancelRequested:
			a.cancelByOperator()
		}
	}
	return true
}

// renewResource renews an attempt's named-resource lease and reports
// whether it was confirmed.
func (r *renewer) renewResource(ctx context.Context, a *attempt, l *lease.Lease) bool {
	cur := *l
	err := r.p.leases.Renew(ctx, &cur, r.p.cfg.LeaseTTL)
	if errors.Is(err, lease.ErrLost) {
		a.loseLease(r.p.shownErr(a, fmt.Errorf("resource %s: %w", a.resource, err)))
	}
	return err == nil
}
