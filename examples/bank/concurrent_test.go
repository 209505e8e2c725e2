package bank_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/fencedq/fencedq/examples/bank"
	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/lease"
)

// TestConcurrentInterleavedTransfers sends 50 concurrent writers through
// each bank store, with interleaved tokens on three source accounts (some
// writers reuse another owner's token), and checks the acceptance history
// (issue 4). The stores keep no acceptance log of their own, so the
// checker works from what every call saw and when:
//
//   - no error other than fence.ErrStale;
//   - per account, no two owners share an accepted token;
//   - accepted tokens never decrease: a write accepted after another
//     accepted write had returned carries a token at least as high;
//   - every rejection is explained by a write accepted before it returned
//     with a higher token (or the same token of another owner);
//   - the effect log holds exactly the accepted operations, with their
//     fences, and the balances are exactly the accepted transfers.
//
// fence/internal/fencetest (InterleavedTokensNeverDecrease,
// ConcurrentSameOperation) checks the same rules on the raw pgfence and
// redisfence stores with a server-side acceptance log; this test runs
// them through the bank's stores, the HTTP service included.
func TestConcurrentInterleavedTransfers(t *testing.T) {
	for _, kind := range []string{"postgres", "redis", "http"} {
		t.Run(kind, func(t *testing.T) { testInterleaved(t, kind) })
	}
}

type call struct {
	f          fence.Fence
	x          bank.Transfer
	start, end time.Time
	err        error
}

func testInterleaved(t *testing.T, kind string) {
	e := newBankEnv(t, kind)
	ctx := context.Background()
	accounts := bank.Accounts(4)
	sources := accounts[:3]
	before := e.balances()
	const writers, each = 50, 6
	calls := make([][]call, writers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for w := range writers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 11))
			<-start
			for i := range each {
				from := sources[r.IntN(len(sources))]
				to := accounts[r.IntN(len(accounts))]
				for to == from {
					to = accounts[r.IntN(len(accounts))]
				}
				x := bank.Transfer{From: from, To: to, Cents: int64(1 + r.IntN(9))}
				// Tokens rise over the rounds but overlap between writers.
				tok := lease.Token(1 + 3*i + r.IntN(8))
				owner := fmt.Sprintf("owner-%d", tok)
				if r.IntN(5) == 0 {
					owner = fmt.Sprintf("impostor-%d-%d", w, i) // reuses tok
				}
				c := call{f: fence.Fence{Resource: x.Resource(), Token: tok, Owner: owner, OperationID: fmt.Sprintf("op-%d-%d", w, i)}, x: x}
				c.start = time.Now()
				c.err = e.store.Transfer(ctx, c.f, x)
				c.end = time.Now()
				calls[w] = append(calls[w], c)
			}
		})
	}
	close(start)
	wg.Wait()

	byResource := map[string][]call{}
	var accepted, rejected []call
	for _, cs := range calls {
		for _, c := range cs {
			switch {
			case c.err == nil:
				accepted = append(accepted, c)
				byResource[c.f.Resource] = append(byResource[c.f.Resource], c)
			case errors.Is(c.err, fence.ErrStale):
				rejected = append(rejected, c)
			default:
				t.Fatalf("transfer %+v: unexpected error %v", c.f, c.err)
			}
		}
	}
	if len(accepted) == 0 || len(rejected) == 0 {
		t.Fatalf("%d accepted, %d rejected: the test did not interleave", len(accepted), len(rejected))
	}
	for res, cs := range byResource {
		owners := map[lease.Token]string{}
		for _, c := range cs {
			if o, ok := owners[c.f.Token]; ok && o != c.f.Owner {
				t.Errorf("%s: token %d accepted from two owners, %s and %s", res, c.f.Token, o, c.f.Owner)
			}
			owners[c.f.Token] = c.f.Owner
		}
		for _, x := range cs {
			for _, y := range cs {
				if x.end.Before(y.start) && y.f.Token < x.f.Token {
					t.Errorf("%s: token %d accepted after token %d had been accepted", res, y.f.Token, x.f.Token)
				}
			}
		}
	}
	for _, y := range rejected {
		explained := false
		for _, x := range byResource[y.f.Resource] {
			if x.start.Before(y.end) && (x.f.Token > y.f.Token || x.f.Token == y.f.Token && x.f.Owner != y.f.Owner) {
				explained = true
				break
			}
		}
		if !explained {
			t.Errorf("%s: token %d of %s rejected with no newer accepted write", y.f.Resource, y.f.Token, y.f.Owner)
		}
	}
	want := map[string]int64{}
	for a, v := range before {
		want[a] = v
	}
	for _, c := range accepted {
		want[c.x.From] -= c.x.Cents
		want[c.x.To] += c.x.Cents
		rec, ok, err := e.store.Applied(ctx, c.f.OperationID)
		owner := c.f.Owner
		if kind == "http" {
			owner = "" // the service's effects view names no owner
		}
		if err != nil || !ok || rec.Token != c.f.Token || rec.Owner != owner {
			t.Errorf("accepted %s: effect log %+v, %v, %v", c.f.OperationID, rec, ok, err)
		}
	}
	for _, c := range rejected {
		if _, ok, err := e.store.Applied(ctx, c.f.OperationID); err != nil || ok {
			t.Errorf("rejected %s: effect log says applied=%v (%v)", c.f.OperationID, ok, err)
		}
	}
	after := e.balances()
	for a := range want {
		if after[a] != want[a] {
			t.Errorf("%s: balance %d, want %d", a, after[a], want[a])
		}
	}
	t.Logf("%d of %d transfers accepted, %d rejected as stale", len(accepted), writers*each, len(rejected))

	// The same operation sent concurrently, then again: one effect.
	x := bank.Transfer{From: "acct-003", To: "acct-000", Cents: 7}
	f := fence.Fence{Resource: x.Resource(), Token: 1000, Owner: "dup", OperationID: "op-dup"}
	beforeDup := e.balances()
	errs := make([]error, 20)
	for i := range errs {
		wg.Go(func() { errs[i] = e.store.Transfer(ctx, f, x) })
	}
	wg.Wait()
	errs = append(errs, e.store.Transfer(ctx, f, x))
	applied := 0
	for _, err := range errs {
		switch {
		case err == nil:
			applied++
		case errors.Is(err, fence.ErrAlreadyApplied):
		default:
			t.Errorf("duplicate operation: unexpected error %v", err)
		}
	}
	if applied != 1 {
		t.Fatalf("the same operation applied %d times", applied)
	}
	e.wantOneTransfer(beforeDup, x)
}
