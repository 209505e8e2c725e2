// Package bank is a small, realistic fencedq example: accounts whose money
// moves only through fenced transfer jobs, so a paused or crashed worker can
// neither lose nor double-apply a transfer.
//
// A Transfer job leases its source account ("account:<from>"): transfers
// out of one account run one at a time and are fenced against each other;
// credits commute, so they need no lease. The Store applies the debit, the
// credit and the operation id in one atomic step guarded by the attempt's
// fence (PostgreSQL through pgfence, Redis through redisfence, or the bank
// as an HTTP service through httpfence: NewService and HTTPStore), and its
// effect log answers the resolver. The demo and the chaos suite use it.
//
// RunWorker is a whole worker process for transfers: its flags
// (WorkerConfig.AddFlags), its store, a pool, /metrics and /healthz, and a
// graceful shutdown. The command examples/bank/cmd/bank-worker runs it (the
// workers of docker-compose.yml); see its flags with
//
//	go run ./examples/bank/cmd/bank-worker --help
//
// The package's tests run the paused-worker, crash and leader-failover
// scenarios with real worker processes (the test binary re-executed, see
// main_test.go), real PostgreSQL and real Redis.
package bank

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/jobs"
)

// ErrInsufficientFunds means the source account cannot cover a transfer; a
// permanent failure.
var ErrInsufficientFunds = errors.New("bank: insufficient funds")

// Transfer moves Cents from one account to another.
type Transfer struct {
	From  string `json:"from"`
	To    string `json:"to"`
	Cents int64  `json:"cents"`
	// Memo is free text from the customer: sensitive, redacted wherever
	// args are shown.
	Memo string `json:"memo,omitempty" fencedq:"sensitive"`
}

// Kind names the job kind.
func (Transfer) Kind() string { return "transfer" }

// Validate rejects transfers that can never succeed.
func (t Transfer) Validate() error {
	switch {
	case t.From == "" || t.To == "":
		return errors.New("from and to accounts are required")
	case t.From == t.To:
		return errors.New("from and to must differ")
	case t.Cents <= 0:
		return fmt.Errorf("cents must be positive, got %d", t.Cents)
	}
	return nil
}

// knownAccounts refuses t, with fence.ErrInvalid naming the account, unless
// both its accounts are among found: a transfer never creates an account.
func knownAccounts(t Transfer, found []string) error {
	for _, a := range []string{t.From, t.To} {
		if !slices.Contains(found, a) {
			return fmt.Errorf("%w: no account %s (accounts are created by Store.Setup, bank-worker --accounts)", fence.ErrInvalid, a)
		}
	}
	return nil
}

// Resource is the lease resource: the source account.
func (t Transfer) Resource() string { return "account:" + t.From }

// Store is the protected storage holding the accounts.
type Store interface {
	// Setup creates the accounts with initial cents each if absent
	// (idempotent).
	Setup(ctx context.Context, accounts []string, initial int64) error
	// Transfer applies t under f atomically: fence.ErrStale if a newer token
	// wrote the source account, fence.ErrAlreadyApplied if the operation was
	// applied before, ErrInsufficientFunds, fence.ErrInvalid for an account
	// Setup did not create; nothing changes on any error.
	Transfer(ctx context.Context, f fence.Fence, t Transfer) error
	// Applied reports whether an operation id was applied (the effect log).
	fence.EffectLog
	// Balances returns every account's balance.
	Balances(ctx context.Context) (map[string]int64, error)
}

// Accounts returns n account names: acct-000, acct-001, ...
func Accounts(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("acct-%03d", i)
	}
	return out
}

// Total sums balances.
func Total(b map[string]int64) int64 {
	var t int64
	for _, v := range b {
		t += v
	}
	return t
}

// Worker runs transfer jobs against a Store.
type Worker struct {
	Store Store
	// BeforeWrite, if set, runs after the fence is raised and before the
	// transfer is written (tests and the demo use it to stage pauses).
	BeforeWrite func(ctx context.Context, j *jobs.Job[Transfer])
}

// FenceRaiser is implemented by stores that can raise a resource's
// high-water mark on acquire, cutting a stale holder off before the new
// holder's first write.
type FenceRaiser interface {
	FenceOnAcquire(ctx context.Context, f fence.Fence) error
}

// Work applies the transfer with the attempt's fence.
func (w *Worker) Work(ctx context.Context, j *jobs.Job[Transfer]) error {
	f, ok := fence.FromContext(ctx)
	if !ok {
		return jobs.Permanent(errors.New("bank: no fence in context (run transfers through a worker pool)"))
	}
	if r, ok := w.Store.(FenceRaiser); ok {
		if err := r.FenceOnAcquire(ctx, f); err != nil {
			return err
		}
	}
	if w.BeforeWrite != nil {
		w.BeforeWrite(ctx, j)
	}
	err := w.Store.Transfer(ctx, f, j.Args)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fence.ErrAlreadyApplied):
		return nil // an earlier attempt applied it: done, exactly once
	case errors.Is(err, ErrInsufficientFunds), errors.Is(err, fence.ErrInvalid):
		return jobs.Permanent(err)
	case errors.Is(err, fence.ErrStale):
		return err
	default:
		// The call may have committed before it failed (a timeout, a broken
		// connection during COMMIT): the outcome is unknown, not failed.
		return jobs.Unknown(err)
	}
}

// Reconcile asks the store's effect log whether the transfer was applied.
func (w *Worker) Reconcile(ctx context.Context, j *jobs.Job[Transfer]) (jobs.Verdict, error) {
	_, ok, err := w.Store.Applied(ctx, j.OperationID)
	switch {
	case err != nil:
		return jobs.CannotTell, err
	case ok:
		return jobs.Applied, nil
	}
	return jobs.NotApplied, nil
}
