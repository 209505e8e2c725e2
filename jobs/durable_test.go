package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
)

// durableConfig is a client configuration in durable mode: one replica
// must hold each enqueue.
func durableConfig(t *testing.T, f *redistest.Failover) jobs.Config {
	return jobs.Config{Namespace: redistest.Namespace(t), Sentinel: f.ClientOptions(),
		Durability: jobs.Durability{Replicas: 1, Timeout: time.Second}} // ample on a loaded machine; the cut cases wait it out
}

// pending counts q's pending jobs as seen through rdb's server.
func pendingOn(t *testing.T, insp *jobs.Inspector, q string) int64 {
	t.Helper()
	c, err := insp.Counts(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	return c[jobs.Pending]
}

// In durable mode an acknowledged enqueue is on the replica; with
// replication cut, an enqueue fails with ErrEnqueueUnknown (its job is on
// the primary only), and enqueuing again with the same operation id ends
// in exactly one job: after replication heals (the retry finds the job and
// waits for the replica), and after a failover that lost it (the retry on
// the promoted replica creates it).
func TestDurableEnqueueRetriedWithTheSameOperationIDMakesOneJob(t *testing.T) {
	if testing.Short() {
		t.Skip("failover tests skipped in -short mode")
	}
	ctx := context.Background()
	f := redistest.StartFailover(t, redistest.FailoverOptions{})
	rdb := f.Client()
	cfg := durableConfig(t, f)
	client := jobs.NewClient(rdb, cfg)
	onReplica := jobs.NewInspector(f.Replica.Client(), jobs.Config{Namespace: cfg.Namespace})
	q := jobs.DefaultQueue

	a, err := client.Enqueue(ctx, countArgs{N: 1}, jobs.OperationID("a"))
	if err != nil {
		t.Fatalf("durable enqueue with a healthy replica: %v", err)
	}
	// Acknowledged means the replica holds it, now (no waiting).
	if r, err := onReplica.FindByOperation(ctx, "a"); err != nil || r.ID != a.JobID {
		t.Fatalf("acknowledged job not on the replica: %+v, %v", r, err)
	}

	f.CutReplication()
	for range 2 {
		if _, err := client.Enqueue(ctx, countArgs{N: 2}, jobs.OperationID("b")); !errors.Is(err, jobs.ErrEnqueueUnknown) {
			t.Fatalf("enqueue with replication cut: %v, want ErrEnqueueUnknown", err)
		}
	}
	onPrimary := client.Inspector()
	if n := pendingOn(t, onPrimary, q); n != 2 {
		t.Fatalf("%d pending jobs on the primary after two unacknowledged tries of one operation, want 2 (a, b)", n)
	}
	f.HealReplication()
	f.Sync()
	b, err := client.Enqueue(ctx, countArgs{N: 2}, jobs.OperationID("b"))
	if err != nil || !b.Deduplicated {
		t.Fatalf("retry after replication healed: %+v, %v; want the existing job, acknowledged", b, err)
	}
	if r, err := onReplica.FindByOperation(ctx, "b"); err != nil || r.ID != b.JobID {
		t.Fatalf("retried job not on the replica: %+v, %v", r, err)
	}

	f.CutReplication()
	if _, err := client.Enqueue(ctx, countArgs{N: 3}, jobs.OperationID("c")); !errors.Is(err, jobs.ErrEnqueueUnknown) {
		t.Fatalf("enqueue with replication cut: %v, want ErrEnqueueUnknown", err)
	}
	f.KillPrimary()
	f.Rejoin() // durable mode needs a replica on the new primary too
	// The promoted replica never had c: replication was cut before it.
	for i := 0; ; i++ { // the first reads may still meet the old primary's connections
		_, err := onPrimary.FindByOperation(ctx, "c")
		if errors.Is(err, jobs.ErrNotFound) {
			break
		}
		if err == nil {
			t.Fatal("the promoted replica has c, enqueued while replication was cut")
		}
		if i == 10 {
			t.Fatalf("looking for c after the failover: %v", err)
		}
	}
	var c *jobs.Result
	unknown := false // a try ended unknown: it may have written c on the new primary
	for range 10 {   // the first tries may still meet the old primary's connections
		if c, err = client.Enqueue(ctx, countArgs{N: 3}, jobs.OperationID("c")); err == nil {
			break
		}
		unknown = unknown || errors.Is(err, jobs.ErrEnqueueUnknown)
	}
	if err != nil {
		t.Fatalf("retry after the failover: %v", err)
	}
	if c.Deduplicated && !unknown {
		t.Fatalf("retry after the failover found %s, which no try had written", c.JobID)
	}
	for _, op := range []string{"a", "b", "c"} {
		if _, err := onPrimary.FindByOperation(ctx, op); err != nil {
			t.Fatalf("operation %s after the failover: %v", op, err)
		}
	}
	if n := pendingOn(t, onPrimary, q); n != 3 {
		t.Fatalf("%d pending jobs after the failover, want 3 (a, b, c: one each)", n)
	}
}

// Enqueuers run in durable mode while replication is cut and the primary
// killed: every enqueue acknowledged before the failover exists after it
// (without durability, those acknowledged during the cut are lost), and
// those not acknowledged said so (ErrEnqueueUnknown).
func TestDurableEnqueuesSurviveAFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("failover tests skipped in -short mode")
	}
	ctx := context.Background()
	f := redistest.StartFailover(t, redistest.FailoverOptions{})
	rdb := f.Client()
	cfg := durableConfig(t, f)
	client := jobs.NewClient(rdb, cfg)

	var mu sync.Mutex
	var acked []string
	unknown := 0
	ackedN := make(chan int, 1000)
	failed := make(chan struct{}, 1)
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; wctx.Err() == nil; i++ {
				op := fmt.Sprintf("op-%d-%d", g, i)
				_, err := client.Enqueue(wctx, countArgs{N: i}, jobs.OperationID(op))
				mu.Lock()
				switch {
				case err == nil:
					acked = append(acked, op)
					select {
					case ackedN <- len(acked):
					default:
					}
				case errors.Is(err, jobs.ErrEnqueueUnknown):
					unknown++
					select {
					case failed <- struct{}{}:
					default:
					}
				}
				mu.Unlock()
			}
		}()
	}
	for n := 0; n < 50; {
		select {
		case n = <-ackedN:
		case <-time.After(testsignal.Timeout()):
			t.Fatalf("fewer than 50 durable enqueues acknowledged in %v", testsignal.Timeout())
		}
	}
	f.CutReplication()
	select {
	case <-failed:
	case <-time.After(testsignal.Timeout()):
		t.Fatal("no enqueue failed with replication cut")
	}
	f.KillPrimary()
	stop()
	wg.Wait()

	insp := client.Inspector()
	mu.Lock()
	defer mu.Unlock()
	for _, op := range acked {
		var err error
		for range 10 { // the first reads may still meet the old primary's connections
			if _, err = insp.FindByOperation(ctx, op); err == nil || errors.Is(err, jobs.ErrNotFound) {
				break
			}
		}
		if err != nil {
			t.Fatalf("acknowledged enqueue %s lost in the failover (%d acknowledged, %d unknown): %v", op, len(acked), unknown, err)
		}
	}
	t.Logf("%d enqueues acknowledged, none lost; %d reported unknown", len(acked), unknown)
}

// On Redis Cluster durability applies per node: with one master's replica
// cut off, enqueues to that master's slots fail with ErrEnqueueUnknown
// while those to the other masters are acknowledged, in one EnqueueMany
// too (its results name the jobs written).
func TestDurableOnClusterFailsOnlyTheCutNodesEnqueues(t *testing.T) {
	ctx := context.Background()
	cl := redistest.StartClusterWith(t, redistest.ClusterOptions{Masters: 3, Replicas: true})
	rdb := cl.Client()
	ns := redistest.Namespace(t)
	client := jobs.NewClient(rdb, jobs.Config{Namespace: ns,
		Durability: jobs.Durability{Replicas: 1, Timeout: time.Second}}) // ample on a loaded machine
	queues := make([]string, len(cl.Nodes)) // one queue on each master
	for n := 0; slices.Contains(queues, ""); n++ {
		q := fmt.Sprintf("q%d", n)
		m, err := rdb.MasterForKey(ctx, ns+":{"+q+"}:stats")
		if err != nil {
			t.Fatal(err)
		}
		for i, node := range cl.Nodes {
			if m.Options().Addr == node.Addr && queues[i] == "" {
				queues[i] = q
			}
		}
	}
	for _, q := range queues {
		if _, err := client.Enqueue(ctx, countArgs{N: 1}, jobs.Queue(q)); err != nil {
			t.Fatalf("durable enqueue to %s with every replica up: %v", q, err)
		}
	}
	cl.CutReplication(1)
	var ps []jobs.Params
	for i, q := range queues {
		_, err := client.Enqueue(ctx, countArgs{N: 2}, jobs.Queue(q), jobs.OperationID("one-"+q))
		if i == 1 && !errors.Is(err, jobs.ErrEnqueueUnknown) {
			t.Errorf("enqueue to %s on the cut master: %v, want ErrEnqueueUnknown", q, err)
		}
		if i != 1 && err != nil {
			t.Errorf("enqueue to %s on a master with its replica: %v", q, err)
		}
		ps = append(ps, jobs.Params{Args: countArgs{N: 3}, Options: []jobs.Option{jobs.Queue(q), jobs.OperationID("many-" + q)}})
	}
	res, err := client.EnqueueMany(ctx, ps)
	if !errors.Is(err, jobs.ErrEnqueueUnknown) {
		t.Errorf("EnqueueMany over the three masters: %v, want ErrEnqueueUnknown", err)
	}
	for i, r := range res {
		if (r == nil) != (i == 1) {
			t.Errorf("EnqueueMany result %d (queue %s): %+v", i, queues[i], r)
		}
	}
}

// In durable mode too, an EnqueueMany call longer than one script call's
// chunk writes a queue's jobs in their order: of two jobs sharing an
// operation id, in different chunks, the first is created.
func TestDurableEnqueueManyKeepsAQueuesOrder(t *testing.T) {
	if testing.Short() {
		t.Skip("failover tests skipped in -short mode")
	}
	ctx := context.Background()
	f := redistest.StartFailover(t, redistest.FailoverOptions{})
	cfg := durableConfig(t, f)
	cfg.Durability.Timeout = 10 * time.Second // a replica catching up with a long batch on a busy machine
	fo := f.ClientOptions()
	fo.ReadTimeout = 15 * time.Second // the wait's reply is read under it
	rdb := redis.NewFailoverClient(fo)
	t.Cleanup(func() { _ = rdb.Close() })
	client := jobs.NewClient(rdb, cfg)
	const n, rounds = 1600, 3 // four chunks per call
	for round := range rounds {
		ps := make([]jobs.Params, n)
		for i := range ps {
			op := fmt.Sprintf("r%d-%d", round, i%(n/4)) // each operation four times, once per chunk
			ps[i] = jobs.Params{Args: countArgs{N: i}, Options: []jobs.Option{jobs.OperationID(op)}}
		}
		res, err := client.EnqueueMany(ctx, ps)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if r.Deduplicated != (i >= n/4) {
				t.Fatalf("round %d: job %d (operation %s) deduplicated %v: the first of an operation must be created",
					round, i, r.OperationID, r.Deduplicated)
			}
		}
	}
}

// An enqueue whose outcome was unknown (too few replicas acknowledged it)
// and whose retry with the same operation id found its job is acknowledged
// by that retry: the client records it for re-submission like any enqueue
// it saw acknowledged, so a later loss of the job's record brings it back.
func TestDurableRetriedEnqueueIsResubmittedAfterALoss(t *testing.T) {
	if testing.Short() {
		t.Skip("failover tests skipped in -short mode")
	}
	ctx := context.Background()
	f := redistest.StartFailover(t, redistest.FailoverOptions{})
	rdb := f.Client()
	client := jobs.NewClient(rdb, durableConfig(t, f))

	kept, err := client.Enqueue(ctx, countArgs{N: 1}, jobs.OperationID("kept"))
	if err != nil {
		t.Fatal(err)
	}
	f.CutReplication()
	if _, err := client.Enqueue(ctx, countArgs{N: 2}, jobs.OperationID("retried")); !errors.Is(err, jobs.ErrEnqueueUnknown) {
		t.Fatalf("enqueue with replication cut: %v, want ErrEnqueueUnknown", err)
	}
	f.HealReplication()
	f.Sync()
	retried, err := client.Enqueue(ctx, countArgs{N: 2}, jobs.OperationID("retried"))
	if err != nil || !retried.Deduplicated {
		t.Fatalf("retry after replication healed: %+v, %v; want the existing job, acknowledged", retried, err)
	}

	// Redis loses the namespace's record (an operator's flush, a restart
	// without persistence): both acknowledged jobs are gone.
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	f.Sync()
	if _, err := client.Resubmit(ctx); err != nil {
		t.Fatal(err)
	}
	insp := client.Inspector()
	for _, r := range []*jobs.Result{kept, retried} {
		if _, err := insp.Get(ctx, r.Queue, r.JobID); err != nil {
			t.Errorf("acknowledged job %s (operation %s) not re-submitted after the loss: %v", r.JobID, r.OperationID, err)
		}
	}
	if n := pendingOn(t, insp, jobs.DefaultQueue); n != 2 {
		t.Fatalf("%d pending jobs after the re-submission, want 2", n)
	}
}

// A wait for replicas longer than the Redis client's read timeout allows
// (its reply is read under it) is refused with a clear error before
// anything is written: it would otherwise fail every slow wait as a
// network error, after go-redis sent the pipeline again for each retry.
func TestDurableTimeoutBeyondTheReadTimeoutRefused(t *testing.T) {
	ctx := context.Background()
	rdb, ns := redistest.New(t)
	slow := redis.NewClient(&redis.Options{Addr: rdb.Options().Addr, ReadTimeout: time.Second})
	t.Cleanup(func() { _ = slow.Close() })
	for _, tc := range []struct {
		rdb *redis.Client
		d   jobs.Durability
	}{
		{rdb, jobs.Durability{Replicas: 1, Timeout: 5 * time.Second}}, // go-redis's default read timeout: 5 s
		{slow, jobs.Durability{Replicas: 1}},                          // the default 1 s wait, a 1 s read timeout
	} {
		c := jobs.NewClient(tc.rdb, jobs.Config{Namespace: ns, Durability: tc.d})
		if _, err := c.Enqueue(ctx, countArgs{N: 1}); !errors.Is(err, jobs.ErrInvalid) || !strings.Contains(err.Error(), "durability: timeout") {
			t.Errorf("%+v with read timeout %v: enqueue %v, want ErrInvalid naming the durability timeout", tc.d, tc.rdb.Options().ReadTimeout, err)
		}
	}
	if keys, err := rdb.Keys(ctx, "*"+ns+"*").Result(); err != nil || len(keys) != 0 {
		t.Fatalf("keys %v, %v after refused enqueues, want none", keys, err)
	}
	ok := jobs.Config{Namespace: ns, Durability: jobs.Durability{Replicas: 1, Timeout: 800 * time.Millisecond}}
	if err := ok.ValidateClient(slow); err != nil {
		t.Fatalf("a wait within the read timeout: %v", err)
	}
}
