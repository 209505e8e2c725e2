// Package fencedqtest helps an application's tests with its fencedq jobs,
// against the Redis the tests already use:
//
//   - RequireEnqueued asserts that code under test enqueued a job (its
//     kind, args and options) without running it; RequireNotEnqueued
//     asserts it did not, Enqueued lists what it did;
//   - Work and WorkJob run one job's handler inline, waiting for it (a
//     handler that never returns fails the test once the attempt's lease
//     lapses, the job left uncertain), as a real attempt: a fenced claim in the ledger with a new
//     token, the resource lease the kind names, a context carrying the
//     fence, the lease and the deadline, and the outcome committed by the
//     attempt's token, so protected storage (pgfence, redisfence,
//     httpfence) sees exactly what a pool's attempt gives it;
//   - WaitState waits for a job, worked by a pool the test runs, to reach a
//     state.
//
// Every helper takes an Env: the Redis client and the jobs.Config (its
// namespace) the application's client and pools use. RequireEnqueued,
// RequireNotEnqueued and Enqueued read the whole namespace, so tests that
// run in parallel (t.Parallel) each need a namespace of their own.
//
//	func TestCheckoutEnqueuesAReceipt(t *testing.T) {
//		env := fencedqtest.New(rdb, jobs.Config{Namespace: ns})
//		checkout(ctx, client, "order-1") // the code under test enqueues
//		job := fencedqtest.RequireEnqueued[Receipt](ctx, t, env, &fencedqtest.Want{
//			Args: Receipt{Order: "order-1"}, Queue: "mail", OperationID: "receipt:order-1",
//		})
//		res := fencedqtest.WorkJob(ctx, t, env, &ReceiptWorker{mail: fake}, job.Record.Queue, job.Record.ID)
//		if res.Outcome != worker.OutcomeSucceeded {
//			t.Fatalf("receipt: %s: %v", res.Outcome, res.Err)
//		}
//	}
//
// With a pool running in the test, wait for the job instead:
//
//	rec := env.WaitState(ctx, t, job.Record.ID, jobs.Succeeded)
//
// The helpers fail the test (t.Fatal) on anything they cannot do, with
// what they found; a job's args appear in failure messages redacted. A
// context that already ended fails Work, WorkJob and the Enqueued helpers
// at once, saying so (WaitState still takes one look at the job).
// Inline runs use no pool, so the pool's middleware (worker.Config.Middleware)
// is not applied, and no renewal runs: the attempt's leases last its
// timeout plus a second, so a maintenance leader running in the same
// namespace leaves the attempt alone.
package fencedqtest

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
)

// Env is the Redis and the namespace a test's jobs live in.
type Env struct {
	rdb     redis.UniversalClient
	cfg     jobs.Config
	ledger  *ledger.Ledger
	leases  *lease.Manager
	client  *jobs.Client
	effects fence.EffectLog // the pools' Maintenance.EffectLog, if any
	timeout time.Duration   // the pools' HandlerTimeout (0: DefaultTimeout)
	err     error           // a nil rdb or an invalid cfg: every helper fails the test with it
}

// Option configures an Env.
type Option func(*Env)

// WithEffectLog says the application's pools run with log as their
// worker.Config.Maintenance.EffectLog. As in those pools, an inline attempt
// whose handler returns a dependency's timeout before the job's deadline
// then leaves the job uncertain (the log can reconcile it) instead of
// retrying it; without it only a kind with a Reconcile method does.
func WithEffectLog(log fence.EffectLog) Option { return func(e *Env) { e.effects = log } }

// WithHandlerTimeout says the application's pools run with d as their
// worker.Config.HandlerTimeout: an inline attempt of a job that sets no
// timeout then has d, as in those pools, instead of DefaultTimeout. A d
// that is not positive leaves DefaultTimeout.
func WithHandlerTimeout(d time.Duration) Option { return func(e *Env) { e.timeout = d } }

// New returns the Env of the jobs of cfg's namespace on rdb: pass the
// jobs.Config the application's client and pools are built from (its
// EnqueueMiddleware applies to Work's enqueues). A nil rdb or an invalid
// cfg makes every helper fail the test, naming the mistake, as does a nil
// or zero Env. Give the options the pools' settings that decide an
// attempt's outcome (WithEffectLog, WithHandlerTimeout).
func New(rdb redis.UniversalClient, cfg jobs.Config, opts ...Option) *Env {
	var err error
	if rdb == nil || reflect.ValueOf(rdb).Kind() == reflect.Pointer && reflect.ValueOf(rdb).IsNil() {
		err = fmt.Errorf("%w: New was given a nil Redis client", jobs.ErrInvalid)
	} else {
		err = cfg.Validate()
	}
	cfg = cfg.WithDefaults()
	e := &Env{
		err: err,
		rdb: rdb, cfg: cfg,
		ledger: ledger.New(rdb, ledger.Config{Namespace: cfg.Namespace, Retention: cfg.Retention}),
		leases: lease.NewManager(rdb, lease.Config{Namespace: cfg.Namespace}),
		client: jobs.NewClient(rdb, cfg),
	}
	for _, o := range opts {
		if o != nil {
			o(e)
		}
	}
	return e
}

// check fails the test when e was built over a nil Redis client or an
// invalid jobs.Config, or is a nil or zero Env, which New did not make.
func (e *Env) check(tb testing.TB) {
	tb.Helper()
	if e == nil || (e.ledger == nil && e.err == nil) {
		tb.Fatalf("fencedqtest: a nil or zero Env: create it with fencedqtest.New")
	}
	if e.err != nil {
		tb.Fatalf("fencedqtest: %v", e.err)
	}
}

// checkContext fails the test of helper when ctx already ended, before
// anything is read or written: the client would report it as something
// else (an enqueue "not sent", Redis "could not be reached").
func checkContext(ctx context.Context, tb testing.TB, helper string) {
	tb.Helper()
	if ctx.Err() != nil {
		tb.Fatalf("fencedqtest: %s: the context had already ended (%v) before anything was read or written", helper, context.Cause(ctx))
	}
}
