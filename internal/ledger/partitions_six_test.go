package ledger_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// On a six-master cluster, a queue of six partitions (one per master)
// keeps a queue's guarantees in each partition: an enqueue routed by its
// partition key lands there; a claim mints a token and a stale token's
// commit is refused; a retry comes back with a higher token; an attempt
// whose lease passed is made uncertain by the expirer, re-run by the
// resolver with a higher token, and its old attempt stays fenced out; an
// operator cancels a pending job by the queue's name; pausing the queue
// pauses every partition.
func TestPartitionGuaranteesOnSixMasters(t *testing.T) {
	if testing.Short() {
		t.Skip("six masters skipped in -short mode")
	}
	cl := redistest.StartClusterN(t, 6)
	rdb := cl.Client()
	ctx := context.Background()
	ns := redistest.Namespace(t)
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns, Retention: time.Hour})
	t.Cleanup(func() { _ = c.Close() })
	l := ledger.New(rdb, ledger.Config{Namespace: ns, Retention: time.Hour})
	const p = 6
	if _, err := c.SetPartitions(ctx, jobs.DefaultQueue, p, "test", ""); err != nil {
		t.Fatal(err)
	}
	names := ledger.PartitionNames(jobs.DefaultQueue, p)
	masters := map[string]bool{}
	for k, name := range names {
		key := ""
		for n := 0; key == ""; n++ {
			if s := fmt.Sprintf("key-%d", n); ledger.RoutePartition(p, s, "", 0) == k {
				key = s
			}
		}
		node, err := rdb.MasterForKey(ctx, l.StateKey(name, jobs.Pending))
		if err != nil {
			t.Fatal(err)
		}
		masters[node.Options().Addr] = true
		f := &fixture{t: t, ctx: ctx, rdb: rdb, c: c, l: l, q: name}
		route := jobs.PartitionKey(key)
		want := func(id string, st jobs.State) {
			t.Helper()
			rec, err := l.Get(ctx, name, id)
			if err != nil || rec.State != st || rec.Queue != name {
				t.Fatalf("%s: job %s: %+v, %v; want %s there", name, id, rec, err, st)
			}
		}

		// Claim, a stale commit refused, a retry above it.
		id := f.enqueue(route, jobs.MaxRetries(1))
		c1 := f.claimOne(id)
		if c1.Token == 0 {
			t.Fatalf("%s: claim without a token", name)
		}
		if got := f.complete(ledger.Claimed{ID: id, Token: c1.Token - 1}, ledger.Outcome{To: jobs.Succeeded}); got.Applied {
			t.Fatalf("%s: a stale token's commit applied", name)
		}
		f.complete(c1, ledger.Outcome{To: jobs.Pending, Error: "boom", RetryIn: 0})
		c2 := f.claimOne(id)
		if c2.Attempt != 2 || c2.Token <= c1.Token {
			t.Fatalf("%s: retry %+v after token %d", name, c2, c1.Token)
		}
		f.complete(c2, ledger.Outcome{To: jobs.Succeeded})
		want(id, jobs.Succeeded)

		// Expiry, reconciliation, a re-run above the expired attempt.
		id = f.enqueue(route)
		res, err := l.Claim(ctx, name, "w1", time.Millisecond, 1)
		if err != nil || len(res.Jobs) != 1 || res.Jobs[0].ID != id {
			t.Fatalf("%s: short claim %+v, %v", name, res, err)
		}
		old := res.Jobs[0]
		var moved bool
		for deadline := time.Now().Add(10 * time.Second); !moved && time.Now().Before(deadline); {
			exp, err := l.Expire(ctx, name, 7, 100)
			if err != nil {
				t.Fatal(err)
			}
			moved = len(exp.Moved) == 1 && exp.Moved[0] == id
			if !moved {
				time.Sleep(5 * time.Millisecond) // the 1 ms lease passes by the namespace's time
			}
		}
		if !moved {
			t.Fatalf("%s: the passed lease was not expired", name)
		}
		want(id, jobs.Uncertain)
		if _, err := l.Decide(ctx, name, id, ledger.Resolution{Decision: jobs.DecideRerun, Actor: "reconciler:x", Note: "not applied"}); err != nil {
			t.Fatal(err)
		}
		rerun := f.claimOne(id)
		if rerun.Token <= old.Token {
			t.Fatalf("%s: re-run token %d not above %d", name, rerun.Token, old.Token)
		}
		if got := f.complete(old, ledger.Outcome{To: jobs.Succeeded}); got.Applied {
			t.Fatalf("%s: the expired attempt's commit applied after the re-run", name)
		}
		f.complete(rerun, ledger.Outcome{To: jobs.Succeeded})
		want(id, jobs.Succeeded)

		// An operator cancels by the queue's name.
		id = f.enqueue(route)
		if rec, err := c.Cancel(ctx, jobs.DefaultQueue, id, "ada", "withdrawn"); err != nil || rec.State != jobs.Cancelled || rec.Queue != name {
			t.Fatalf("%s: cancel %+v, %v", name, rec, err)
		}
	}
	if len(masters) != p {
		t.Fatalf("%d partitions on %d masters", p, len(masters))
	}

	// Pausing the queue pauses every partition.
	if changed, err := c.Pause(ctx, jobs.DefaultQueue, "ada", "maintenance"); !changed || err != nil {
		t.Fatalf("pause: %v, %v", changed, err)
	}
	for _, name := range names {
		res, err := l.Claim(ctx, name, "w1", time.Minute, 10)
		if err != nil || !res.Paused || len(res.Jobs) != 0 {
			t.Fatalf("%s while the queue is paused: %+v, %v", name, res, err)
		}
	}
}
