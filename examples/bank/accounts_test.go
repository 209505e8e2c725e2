package bank_test

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/examples/bank"
	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fencedqtest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// TestTransferWithAnUnknownAccount: a transfer naming an account that does
// not exist (a typo in an --enqueue, say) moves nothing in any store: its
// job is dead with an error naming the account, not applied to an account
// made up on the way nor refused as insufficient funds.
func TestTransferWithAnUnknownAccount(t *testing.T) {
	for _, kind := range []string{"redis", "postgres", "http"} {
		t.Run(kind, func(t *testing.T) {
			e := newBankEnv(t, kind)
			ctx := context.Background()
			env := fencedqtest.New(e.rdb, jobs.Config{Namespace: e.ns})
			for _, x := range []bank.Transfer{
				{From: "acct-000", To: "acct-typo", Cents: 100},
				{From: "acct-typo", To: "acct-001", Cents: 100},
			} {
				before := e.balances()
				res := fencedqtest.Work(ctx, t, env, &bank.Worker{Store: e.store}, x)
				missing := x.From
				if x.From == "acct-000" {
					missing = x.To
				}
				if res.Outcome != worker.OutcomeDead || !errors.Is(res.Err, fence.ErrInvalid) || !strings.Contains(res.Err.Error(), "no account "+missing) {
					t.Errorf("%+v: %s %v, want dead naming no account %s", x, res.Outcome, res.Err, missing)
				}
				if after := e.balances(); !maps.Equal(after, before) {
					t.Errorf("%+v moved money: %v -> %v", x, before, after)
				}
			}
		})
	}
}
