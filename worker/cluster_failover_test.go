package worker_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fence/redisfence"
	"github.com/fencedq/fencedq/internal/epoch"
	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
	"github.com/fencedq/fencedq/worker"
)

// drainRun records what a partitioned drain's handlers did.
type drainRun struct {
	mu       sync.Mutex
	started  int                      // attempts started on the failing partition
	tokens   map[string][]lease.Token // queue (partition) -> tokens of attempts started
	refused  []error
	gate     chan struct{} // its attempts past the first open wait for it
	open     int
	inflight chan string // job ids waiting at the gate
}

// masterIndex returns the index in cl.Nodes of the master serving key.
func masterIndex(t *testing.T, cc *redis.ClusterClient, cl *redistest.Cluster, key string) int {
	t.Helper()
	m, err := cc.MasterForKey(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range cl.Nodes {
		if n.Addr == m.Options().Addr {
			return i
		}
	}
	t.Fatalf("%s is served by %s, not a master", key, m.Options().Addr)
	return -1
}

// A master of a cluster fails over in the middle of a partitioned queue's
// drain (three partitions, one per master), to a replica whose clock is
// 10 minutes behind. Durable: the replica holds every acknowledged write,
// the master is SIGKILLed, and every acknowledged job succeeds. Not
// durable: the replica was cut off first, so jobs enqueued after the cut
// and a claim made after it (the zombie) are lost with the master; the
// loss is detected and recorded on that partition, the zombie's job runs
// again with a token above the zombie's and storage refuses the zombie
// after it. Either way no effect is applied twice, every attempt started
// on the failed-over partition after the failover has a token above every
// token minted there before (in a higher epoch), and work resumes: jobs
// enqueued after the failover succeed.
func TestPartitionedDrainThroughMasterFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("failover tests skipped in -short mode")
	}
	for _, durable := range []bool{true, false} {
		name := "lossy"
		if durable {
			name = "durable"
		}
		t.Run(name, func(t *testing.T) { testPartitionedFailover(t, durable) })
	}
}

func testPartitionedFailover(t *testing.T, durable bool) {
	ctx := context.Background()
	cl := redistest.StartClusterWith(t, redistest.ClusterOptions{Masters: 3, Replicas: true, ClockShim: true})
	cc := cl.Client()
	ns := redistest.Namespace(t)
	jc := jobs.Config{Namespace: ns}
	if durable {
		jc.Durability = jobs.Durability{Replicas: 1, Timeout: time.Second}
	}
	e := newEnvOn(t, cc, ns)
	client := jobs.NewClient(cc, jc)
	t.Cleanup(func() { _ = client.Close() })
	sc := redistest.Start(t, redistest.Options{}).Client()
	store, err := redisfence.New(sc, redisfence.Config{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.SetPartitions(ctx, jobs.DefaultQueue, 3, "test", ""); err != nil {
		t.Fatal(err)
	}
	parts := ledger.PartitionNames(jobs.DefaultQueue, 3)
	lg := ledger.New(cc, ledger.Config{Namespace: ns})
	victim, fi := "", 1 // the partition on master 1 fails over
	for _, p := range parts {
		if masterIndex(t, cc, cl, lg.StateKey(p, jobs.Pending)) == fi {
			victim = p
		}
	}
	if victim == "" {
		t.Fatalf("no partition of %v on master %d", parts, fi)
	}
	cl.Replicas[fi].SetClockOffset(-10 * time.Minute)

	enqueue := func(from, to int) []*jobs.Result {
		t.Helper()
		var out []*jobs.Result
		for i := from; i < to; i++ {
			// Right after a failover an enqueue may still go to the dead
			// master: its dial refused (not sent), or its outcome unknown;
			// enqueuing again with the same operation id is safe either
			// way (the documented contract).
			deadline := time.Now().Add(testsignal.Timeout())
			for {
				r, err := client.Enqueue(ctx, storeArgs{}, jobs.OperationID(fmt.Sprintf("op-%d", i)))
				if err == nil {
					out = append(out, r)
					break
				}
				if !errors.Is(err, jobs.ErrEnqueueUnknown) && !errors.Is(err, jobs.ErrNotSent) || time.Now().After(deadline) {
					t.Fatalf("enqueue op-%d: %v", i, err)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
		return out
	}
	acked := enqueue(0, 40)

	run := &drainRun{tokens: map[string][]lease.Token{}, gate: make(chan struct{}), open: 3, inflight: make(chan string, 100)}
	cfg := e.config()
	cfg.Jobs = jc
	cfg.LeaseTTL = 3 * time.Second
	// Attempts held across the failover may expire (it takes longer than
	// their TTL): the effect log tells the resolver whether they applied.
	cfg.Maintenance.EffectLog = store
	p := e.pool(cfg)
	if err := worker.Register(p, jobs.WorkFunc[storeArgs](func(ctx context.Context, j *jobs.Job[storeArgs]) error {
		run.mu.Lock()
		if j.Queue == victim {
			run.started++
		}
		run.tokens[j.Queue] = append(run.tokens[j.Queue], j.Token)
		wait := j.Queue == victim && run.started > run.open
		run.mu.Unlock()
		if wait {
			run.inflight <- j.ID
			select {
			case <-run.gate:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		f, _ := fence.FromContext(ctx)
		err := store.Apply(ctx, f, redisfence.RPush(store.DataKey(f.Resource, "log"), fmt.Sprint(j.Token)))
		if err != nil && !errors.Is(err, fence.ErrStale) {
			return err
		}
		if err != nil {
			run.mu.Lock()
			run.refused = append(run.refused, fmt.Errorf("job %s token %d: %w", j.ID, j.Token, err))
			run.mu.Unlock()
		}
		return err
	})); err != nil {
		t.Fatal(err)
	}
	e.start(p)
	// The drain is under way: the failing partition's first jobs passed,
	// the next ones are held at the gate (the other partitions go on).
	select {
	case <-run.inflight:
	case <-time.After(testsignal.Timeout()):
		t.Fatal("the drain did not reach the gate")
	}
	pre := ledger.New(cc, ledger.Config{Namespace: ns})
	var zombie ledger.Claimed
	var lost []*jobs.Result
	if durable {
		cl.KillMaster(fi)
	} else {
		cl.Sync(fi)
		cl.CutReplication(fi)
		lost = enqueue(40, 52) // acknowledged by the master alone
		res, err := pre.Claim(ctx, victim, "zombie", time.Minute, 1)
		if err != nil || len(res.Jobs) != 1 {
			t.Fatalf("the zombie's claim: %+v, %v", res, err)
		}
		zombie = res.Jobs[0]
		fc := fence.Fence{Resource: jobs.LeaseResource(zombie.ID, ""), Token: zombie.Token, Owner: "zombie", OperationID: zombie.ID + "/zombie-1"}
		if err := store.Apply(ctx, fc, redisfence.RPush(store.DataKey(fc.Resource, "zombie"), "1")); err != nil {
			t.Fatalf("the zombie's write before the failover: %v", err)
		}
		cl.KillMaster(fi)
	}
	run.mu.Lock()
	var before lease.Token
	for _, tok := range run.tokens[victim] {
		before = max(before, tok)
	}
	before = max(before, zombie.Token)
	nbefore := len(run.tokens[victim])
	run.mu.Unlock()
	if before == 0 {
		t.Fatalf("no attempt started on %s before the failover", victim)
	}
	now, err := cl.Nodes[fi].Client().Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if uint64(now.UnixMicro()) >= uint64(before) {
		t.Fatalf("the promoted clock (%d µs) already passed the tokens minted before (%d): the test shows nothing", now.UnixMicro(), before)
	}
	if durable {
		cl.Rejoin(fi) // durable writes on the partition need a replica again
	}
	close(run.gate)

	// Work resumes: jobs enqueued after the failover succeed, with the rest.
	after := enqueue(100, 112)
	survivors := append(append([]*jobs.Result{}, acked...), after...)
	for _, r := range survivors {
		jobstest.WaitState(t, e.ledger, r.Partition, r.JobID, jobs.Succeeded)
	}
	for _, r := range survivors {
		if n := sc.LLen(ctx, store.DataKey(jobs.LeaseResource(r.JobID, ""), "log")).Val(); n != 1 {
			t.Fatalf("%s (%s): effect applied %d times", r.OperationID, r.Partition, n)
		}
	}
	run.mu.Lock()
	for _, tok := range run.tokens[victim][nbefore:] {
		if tok <= before || epoch.Of(uint64(tok)) <= epoch.Of(uint64(before)) {
			t.Fatalf("fencing inverted on %s: token %d after the failover, %d before", victim, tok, before)
		}
	}
	if len(run.tokens[victim]) == nbefore {
		t.Fatalf("no attempt started on %s after the failover", victim)
	}
	refused := append([]error{}, run.refused...)
	run.mu.Unlock()
	if len(refused) > 0 {
		t.Fatalf("storage refused live attempts: %v", refused)
	}
	if durable {
		return
	}

	// Not durable: what the master alone acknowledged is gone, and seen.
	missing := 0
	for _, r := range lost {
		_, err := e.ledger.Get(ctx, r.Partition, r.JobID)
		switch {
		case errors.Is(err, jobs.ErrNotFound) && r.Partition == victim:
			missing++
		case err != nil:
			t.Fatalf("%s on %s: %v", r.OperationID, r.Partition, err)
		default:
			jobstest.WaitState(t, e.ledger, r.Partition, r.JobID, jobs.Succeeded)
		}
	}
	if missing == 0 {
		t.Fatalf("no enqueue was lost on %s: the failover lost nothing, the test shows nothing", victim)
	}
	rws, err := client.Inspector().Rewinds(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var found *jobs.Rewind
	for i := range rws {
		if rws[i].Queue == victim {
			found = &rws[i]
		}
	}
	if found == nil || found.LostEnqueues < 1 {
		t.Fatalf("the loss of %d enqueues on %s is not recorded: %+v", missing, victim, rws)
	}
	t.Logf("lost %d acknowledged enqueues on %s; recorded rewind: %+v", missing, victim, *found)
	// The zombie's job ran again above it; the zombie is refused after.
	rec := jobstest.WaitState(t, e.ledger, victim, zombie.ID, jobs.Succeeded)
	if rec.Token <= zombie.Token {
		t.Fatalf("the zombie's job ran again with token %d, not above the zombie's %d", rec.Token, zombie.Token)
	}
	fc := fence.Fence{Resource: jobs.LeaseResource(zombie.ID, ""), Token: zombie.Token, Owner: "zombie", OperationID: zombie.ID + "/zombie-2"}
	if err := store.Apply(ctx, fc, redisfence.RPush(store.DataKey(fc.Resource, "zombie"), "2")); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("the zombie's write after the live attempt's: want fence.ErrStale, got %v", err)
	}
}
