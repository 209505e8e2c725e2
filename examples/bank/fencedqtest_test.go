package bank_test

import (
	"context"
	"errors"
	"testing"

	"github.com/fencedq/fencedq/examples/bank"
	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fencedqtest"
	"github.com/fencedq/fencedq/internal/syncbuf"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
	"github.com/fencedq/fencedq/worker"
)

// TestTransferInlineWithHelpers is how an application tests its transfers
// with package fencedqtest: the enqueued job is asserted (args, memo
// included, operation id, the source account as its resource) without
// running it, then its handler runs inline as a real attempt, whose token
// the store checks.
func TestTransferInlineWithHelpers(t *testing.T) {
	for _, kind := range []string{"redis", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			e := newBankEnv(t, kind)
			ctx := context.Background()
			env := fencedqtest.New(e.rdb, jobs.Config{Namespace: e.ns})
			x := bank.Transfer{From: "acct-000", To: "acct-001", Cents: 300, Memo: "rent"}
			e.enqueue(x, "rent-1")
			job := fencedqtest.RequireEnqueued[bank.Transfer](ctx, t, env, &fencedqtest.Want{
				Args: x, OperationID: "rent-1", Resource: "account:acct-000", State: jobs.Pending,
			})
			fencedqtest.RequireNotEnqueued[bank.Transfer](ctx, t, env, &fencedqtest.Want{Args: bank.Transfer{From: "acct-000", To: "acct-001", Cents: 300}})

			before := e.balances()
			res := fencedqtest.WorkJob(ctx, t, env, &bank.Worker{Store: e.store}, job.Record.Queue, job.Record.ID)
			if res.Outcome != worker.OutcomeSucceeded || res.Err != nil {
				t.Fatalf("inline transfer: %s %v", res.Outcome, res.Err)
			}
			e.wantOneTransfer(before, x)
			if applied, ok, err := e.store.Applied(ctx, "rent-1"); err != nil || !ok || applied.Token != res.Token {
				t.Fatalf("effect log %+v %v %v: want rent-1 applied by token %d", applied, ok, err, res.Token)
			}

			// A newer holder fenced the account: the inline attempt's token is
			// refused, nothing moves, and the job is retried.
			r, ok := e.store.(bank.FenceRaiser)
			if !ok {
				t.Fatalf("the %s store raises no fence on acquire", kind)
			}
			if err := r.FenceOnAcquire(ctx, fence.Fence{Resource: x.Resource(), Token: lease.Token(1) << 62, Owner: "newer"}); err != nil {
				t.Fatal(err)
			}
			before = e.balances()
			stale := fencedqtest.Work(ctx, t, env, &bank.Worker{Store: e.store}, bank.Transfer{From: "acct-000", To: "acct-002", Cents: 1},
				jobs.OperationID("stale-1"))
			if stale.Outcome != worker.OutcomeRetry || !errors.Is(stale.Err, fence.ErrStale) {
				t.Fatalf("attempt below the account's fence: %s %v, want a retry for a stale token", stale.Outcome, stale.Err)
			}
			if after := e.balances(); after["acct-000"] != before["acct-000"] {
				t.Fatalf("a stale attempt moved money: %v -> %v", before, after)
			}
		})
	}
}

// TestPoolTransferWithHelpers waits with fencedqtest for a pool the test
// runs.
func TestPoolTransferWithHelpers(t *testing.T) {
	e := newBankEnv(t, "redis")
	ctx := context.Background()
	logs := &syncbuf.Buffer{}
	p, err := worker.NewPool(e.rdb, e.poolConfig("P", logs))
	if err != nil {
		t.Fatal(err)
	}
	if err := worker.Register(p, &bank.Worker{Store: e.store}); err != nil {
		t.Fatal(err)
	}
	e.run(p, logs)
	x := bank.Transfer{From: "acct-001", To: "acct-003", Cents: 40}
	before := e.balances()
	res := e.enqueue(x, "pay-40")
	rec := fencedqtest.New(e.rdb, jobs.Config{Namespace: e.ns}).WaitState(ctx, t, res.JobID, jobs.Succeeded, jobs.Dead)
	if rec.State != jobs.Succeeded || rec.Attempts != 1 {
		t.Fatalf("transfer %+v", rec)
	}
	e.wantOneTransfer(before, x)
}
