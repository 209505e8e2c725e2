package maintenance

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/lease"
)

// term is one leadership as a test's lead function sees it: who led with
// which token, and, once it ended, why.
type term struct {
	owner string
	token lease.Token
	ended bool
	cause error
}

// newElector returns an elector for owner whose tries are signalled.
func (f *fixture) newElector(owner string, ttl time.Duration) *elector {
	e := &elector{leases: f.leases, owner: owner, ttl: ttl, retry: 20 * time.Millisecond,
		log:   slog.New(slog.NewJSONHandler(f.logs, nil)).With("pool", owner),
		gauge: prometheus.NewGauge(prometheus.GaugeOpts{Name: "leader_" + owner})}
	e.tried.Init(f.t, owner+"'s election try")
	return e
}

// runElector runs e until the returned stop is called (stop waits for it).
func runElector(e *elector, terms *testsignal.Signal[term]) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		e.run(ctx, func(ctx context.Context, leader lease.Token) {
			terms.Signal(term{owner: e.owner, token: leader})
			<-ctx.Done()
			terms.Signal(term{owner: e.owner, token: leader, ended: true, cause: context.Cause(ctx)})
		})
	})
	return func() { cancel(); wg.Wait() }
}

// TestElectorOneLeaderAtATime: of two pools, the first leads; the second's
// tries are refused while it does, and it leads, with a higher token, only
// once the first stopped and released the lease.
func TestElectorOneLeaderAtATime(t *testing.T) {
	f := newFixture(t)
	var terms testsignal.Signal[term]
	terms.Init(t, "leadership began or ended")
	a, b := f.newElector("pool-a", time.Minute), f.newElector("pool-b", time.Minute)

	stopA := runElector(a, &terms)
	first := terms.WaitOrTimeout()
	if first.owner != "pool-a" || first.ended || testutil.ToFloat64(a.gauge) != 1 {
		t.Fatalf("first term %+v, pool-a's gauge %v", first, testutil.ToFloat64(a.gauge))
	}
	stopB := runElector(b, &terms)
	defer stopB()
	// pool-b competes: its tries are refused while pool-a holds the lease.
	for range 3 {
		if err := b.tried.WaitOrTimeout(); !errors.Is(err, lease.ErrHeld) {
			t.Fatalf("pool-b's try while pool-a leads: %v, want lease.ErrHeld", err)
		}
	}
	if testutil.ToFloat64(b.gauge) != 0 {
		t.Fatal("pool-b's gauge says it leads while pool-a does")
	}

	stopA()
	if end := terms.WaitOrTimeout(); end.owner != "pool-a" || !end.ended {
		t.Fatalf("after pool-a stopped: %+v, want the end of pool-a's term", end)
	}
	if testutil.ToFloat64(a.gauge) != 0 {
		t.Fatal("pool-a's gauge still says it leads after it stopped")
	}
	second := terms.WaitOrTimeout()
	if second.owner != "pool-b" || second.ended || second.token <= first.token {
		t.Fatalf("second term %+v after pool-a's token %d: want pool-b with a higher token", second, first.token)
	}
	if testutil.ToFloat64(b.gauge) != 1 {
		t.Fatal("pool-b leads but its gauge is 0")
	}
}

// TestElectorLostLeadershipEndsItsTerm: when another owner takes the lease
// (here: the lease record is deleted and a thief acquires it), the
// keep-alive's next renewal fails, the leader's context ends with
// lease.ErrLost, the gauge drops, the loss is logged, and the elector
// competes again (refused while the thief holds the lease).
func TestElectorLostLeadershipEndsItsTerm(t *testing.T) {
	f := newFixture(t)
	var terms testsignal.Signal[term]
	terms.Init(t, "leadership began or ended")
	a := f.newElector("pool-a", 300*time.Millisecond) // renewed every 100 ms
	stop := runElector(a, &terms)
	defer stop()
	began := terms.WaitOrTimeout()
	if err := a.tried.WaitOrTimeout(); err != nil {
		t.Fatalf("pool-a's winning try: %v", err)
	}

	if err := f.rdb.Del(f.ctx, f.leases.Key(ledger.LeaderResource)).Err(); err != nil {
		t.Fatal(err)
	}
	thief, err := f.leases.Acquire(f.ctx, ledger.LeaderResource, "thief", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	end := terms.WaitOrTimeout()
	if !end.ended || end.token != began.token || !errors.Is(end.cause, lease.ErrLost) {
		t.Fatalf("after the lease was taken: %+v, want pool-a's term ended by lease.ErrLost", end)
	}
	// The next try comes after the term was wound up.
	if err := a.tried.WaitOrTimeout(); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("pool-a's try after losing the lease: %v, want lease.ErrHeld (the thief, token %d)", err, thief.Token)
	}
	if testutil.ToFloat64(a.gauge) != 0 {
		t.Fatal("the gauge still says pool-a leads after it lost the lease")
	}
	if !f.logged(`"msg":"maintenance leadership lost"`, `"pool":"pool-a"`) {
		t.Fatalf("the loss was not logged:\n%s", f.logs.String())
	}
}
