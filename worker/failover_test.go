package worker_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fence/redisfence"
	"github.com/fencedq/fencedq/internal/epoch"
	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
	"github.com/fencedq/fencedq/worker"
)

// A job claimed on the primary after replication was cut is a zombie: its
// attempt (and token) is lost with the primary, and the job is pending
// again on the promoted replica, whose clock is 10 minutes behind. The
// pools' claims after the failover mint tokens in a higher fencing epoch,
// above every token minted before it, so storage takes the live attempts'
// writes and refuses the zombie's after them; and work goes on: every job
// enqueued after the failover completes, none refused by storage.
func TestFailoverJobTokensOutrankZombies(t *testing.T) {
	if testing.Short() {
		t.Skip("failover tests skipped in -short mode")
	}
	for _, sentinel := range []bool{true, false} {
		name := "counted"
		if sentinel {
			name = "sentinel"
		}
		t.Run(name, func(t *testing.T) { testJobFailover(t, sentinel) })
	}
}

// writes records what the pool's handlers wrote to storage.
type writes struct {
	mu      sync.Mutex
	tokens  map[string]lease.Token // job id -> the accepted token
	refused []error
	done    chan string // job ids whose write was accepted
}

func testJobFailover(t *testing.T, sentinel bool) {
	ctx := context.Background()
	f := redistest.StartFailover(t, redistest.FailoverOptions{ClockShim: true})
	f.Replica.SetClockOffset(-10 * time.Minute)
	c := f.Client()
	ns := redistest.Namespace(t)
	jc := jobs.Config{Namespace: ns}
	if sentinel {
		jc.Sentinel = f.ClientOptions()
	}
	e := newEnvOn(t, c, ns)
	store, err := redisfence.New(redistest.Start(t, redistest.Options{}).Client(), redisfence.Config{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	// write is one effect of an attempt claimed outside the pool: op names it.
	write := func(cl ledger.Claimed, owner, op string) error {
		fc := fence.Fence{Resource: jobs.LeaseResource(cl.ID, ""), Token: cl.Token, Owner: owner, OperationID: op}
		return store.Apply(ctx, fc, redisfence.RPush(store.DataKey(fc.Resource, "log"), op))
	}
	client := jobs.NewClient(c, jc)
	// Due an hour ago: a due time stays the old primary's clock reading,
	// which the promoted node reads with its own clock, 10 minutes behind.
	var ps []jobs.Params
	for range 3 {
		ps = append(ps, jobs.Params{Args: storeArgs{}, Options: []jobs.Option{jobs.RunAt(time.Now().Add(-time.Hour))}})
	}
	if _, err := client.EnqueueMany(ctx, ps); err != nil {
		t.Fatal(err)
	}

	// Before the failover: a worker (the ledger, claiming as a pool does)
	// claims one job and writes with its token t1; it reaches the replica.
	pre := ledger.New(c, ledger.Config{Namespace: ns, Sentinel: jc.Sentinel})
	claim := func(n int) []ledger.Claimed {
		t.Helper()
		res, err := pre.Claim(ctx, jobs.DefaultQueue, "pre-failover", time.Minute, n)
		if err != nil || len(res.Jobs) != n {
			t.Fatalf("claim %d: %+v, %v", n, res, err)
		}
		return res.Jobs
	}
	first := claim(1)[0]
	if err := write(first, "pre-failover/"+first.ID, first.ID+"/step-1"); err != nil {
		t.Fatal(err)
	}
	f.Sync()
	// Replication cut: two more claims are acknowledged by the primary
	// alone. One zombie writes a first step before the failover (storage
	// cannot know it is one).
	f.CutReplication()
	zombies := claim(2)
	highest := max(first.Token, zombies[0].Token, zombies[1].Token)
	zombie := zombies[0]
	if err := write(zombie, "zombie/"+zombie.ID, zombie.ID+"/step-1"); err != nil {
		t.Fatalf("the zombie's write before the failover: %v", err)
	}
	f.KillPrimary()

	// The scenario must be one the clock alone gets wrong: the promoted
	// node's time in µs (a clock-only token) is below the zombies' tokens.
	now, err := f.Replica.Client().Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if uint64(now.UnixMicro()) >= uint64(highest) {
		t.Fatalf("the promoted clock (%d µs) already passed the zombie's token %d: the test shows nothing", now.UnixMicro(), highest)
	}

	// After the failover: a pool works the queue.
	w := &writes{tokens: map[string]lease.Token{}, done: make(chan string, 100)}
	cfg := e.config()
	cfg.Jobs = jc
	p := e.pool(cfg)
	if err := worker.Register(p, jobs.WorkFunc[storeArgs](func(ctx context.Context, j *jobs.Job[storeArgs]) error {
		f, _ := fence.FromContext(ctx)
		err := store.Apply(ctx, f, redisfence.RPush(store.DataKey(f.Resource, "log"), f.Owner))
		w.mu.Lock()
		defer w.mu.Unlock()
		if err != nil {
			w.refused = append(w.refused, fmt.Errorf("job %s token %d: %w", j.ID, j.Token, err))
			return err
		}
		w.tokens[j.ID] = j.Token
		w.done <- j.ID
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	e.start(p)

	// The zombies' jobs run again, each with a token above every token
	// minted before the failover.
	for _, z := range zombies {
		rec := jobstest.WaitState(t, pre, jobs.DefaultQueue, z.ID, jobs.Succeeded)
		if rec.Token <= highest {
			t.Fatalf("fencing inverted: job %s's live token %d is not above the pre-failover token %d", z.ID, rec.Token, highest)
		}
		if epoch.Of(uint64(rec.Token)) <= epoch.Of(uint64(highest)) {
			t.Fatalf("job %s's token %d is in epoch %d, as before the failover", z.ID, rec.Token, epoch.Of(uint64(rec.Token)))
		}
	}
	// The zombie writes its next step, after the live attempt: refused.
	if err := write(zombie, "zombie/"+zombie.ID, zombie.ID+"/step-2"); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("the zombie's write after the live attempt's: want fence.ErrStale, got %v", err)
	}
	// The attempt claimed before the cut survived the failover: its
	// outcome commits with its token.
	out, err := pre.Complete(ctx, jobs.DefaultQueue, []ledger.Completion{{ID: first.ID, Token: first.Token, Outcome: ledger.Outcome{To: jobs.Succeeded}}})
	if err != nil || !out[0].Applied {
		t.Fatalf("the pre-failover attempt's commit: %+v, %v", out, err)
	}

	// Work goes on: every job enqueued after the failover completes, and
	// storage refuses no live attempt.
	const more = 20
	ps = ps[:0]
	for range more {
		ps = append(ps, jobs.Params{Args: storeArgs{}})
	}
	res, err := client.EnqueueMany(ctx, ps)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		jobstest.WaitState(t, pre, r.Queue, r.JobID, jobs.Succeeded)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.refused) > 0 {
		t.Fatalf("storage refused live attempts after the failover: %v", w.refused)
	}
	if len(w.tokens) != more+len(zombies) {
		t.Fatalf("%d jobs wrote, want %d", len(w.tokens), more+len(zombies))
	}
	for id, tok := range w.tokens {
		if tok <= highest {
			t.Fatalf("job %s ran after the failover with token %d, not above %d", id, tok, highest)
		}
	}
}
