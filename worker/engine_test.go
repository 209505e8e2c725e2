package worker_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
	"github.com/fencedq/fencedq/worker"
)

type blockArgs struct {
	N int `json:"n"`
}

func (blockArgs) Kind() string { return "block" }

// TestEnqueueWakesIdlePool: with polling effectively off (one hour), a job
// enqueued into an idle queue still runs: the enqueue wakes the pool.
func TestEnqueueWakesIdlePool(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.FetchPollInterval = time.Hour
	p := e.pool(cfg)
	ran := make(chan struct{}, 1)
	_ = worker.Register(p, jobs.WorkFunc[echoArgs](func(ctx context.Context, j *jobs.Job[echoArgs]) error {
		ran <- struct{}{}
		return nil
	}))
	e.start(p)
	// The pool has looked, found nothing and gone to sleep when the idle flag is set.
	idle := e.ns + ":{" + jobs.DefaultQueue + "}:idle"
	redistest.Await(t, e.rdb, idle, "the idle pool's flag", func() bool {
		return e.rdb.Exists(context.Background(), idle).Val() == 1
	})
	res := e.enqueue(echoArgs{N: 1})
	select {
	case <-ran:
	case <-time.After(30 * time.Second): // polling would take an hour
		t.Fatal("the enqueue did not wake the idle pool")
	}
	jobstest.WaitState(t, e.ledger, "default", res.JobID, jobs.Succeeded)
}

// TestCancelRunningJob: an operator's cancel reaches the running handler
// through its context, and the job ends cancelled by its own fenced commit.
func TestCancelRunningJob(t *testing.T) {
	e := newEnv(t)
	p := e.pool(e.config()) // LeaseTTL 1s: renewals (which carry the request) every ~333ms
	started := make(chan struct{}, 1)
	var sawCancel atomic.Bool
	_ = worker.Register(p, jobs.WorkFunc[blockArgs](func(ctx context.Context, j *jobs.Job[blockArgs]) error {
		started <- struct{}{}
		<-ctx.Done()
		sawCancel.Store(true)
		return ctx.Err()
	}))
	e.start(p)
	res := e.enqueue(blockArgs{})
	<-started
	ctx := context.Background()
	rec, err := e.client.Cancel(ctx, "default", res.JobID, "ada", "customer withdrew")
	if err != nil || rec.State != jobs.Running || rec.CancelledBy != "operator:ada" {
		t.Fatal(rec, err)
	}
	rec = jobstest.WaitState(t, e.ledger, "default", res.JobID, jobs.Cancelled)
	if !sawCancel.Load() || rec.Attempts != 1 || !strings.Contains(rec.Reason, "operator:ada") {
		t.Fatalf("cancelled job %+v (handler saw the cancel: %v)", rec, sawCancel.Load())
	}
	h, _ := e.ledger.History(ctx, "default", res.JobID)
	var cancelEntry, end bool
	for _, en := range h {
		cancelEntry = cancelEntry || en.Event == "cancel" && en.Actor == "operator:ada" && en.Note == "customer withdrew"
		end = end || en.Event == "end" && en.Outcome == "cancelled"
	}
	if !cancelEntry || !end {
		t.Fatalf("history %+v", h)
	}
	if _, err := e.client.Cancel(ctx, "default", res.JobID, "ada", ""); !errors.Is(err, jobs.ErrWrongState) {
		t.Fatalf("cancelling a cancelled job: %v", err)
	}
}

// TestPausedQueueIsNotClaimed pauses a queue: its due jobs wait, a pending
// one can be cancelled, and resuming runs the rest.
func TestPausedQueueIsNotClaimed(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.FetchPollInterval = 20 * time.Millisecond
	p := e.pool(cfg)
	hooks := worker.InitHooks(p, t)
	var runs atomic.Int32
	_ = worker.Register(p, jobs.WorkFunc[echoArgs](func(ctx context.Context, j *jobs.Job[echoArgs]) error {
		runs.Add(1)
		return nil
	}))
	ctx := context.Background()
	if changed, err := e.client.Pause(ctx, "default", "ada", "deploy"); !changed || err != nil {
		t.Fatal(changed, err)
	}
	e.start(p)
	a := e.enqueue(echoArgs{N: 1})
	b := e.enqueue(echoArgs{N: 2})
	// Claims the pool sends from now on find both jobs due. The first claim
	// handled after the drain may have been sent before the enqueues; the
	// second was sent after the first came back, so after them.
	hooks.Claimed.Drain()
	for _, ev := range hooks.Claimed.WaitOrTimeoutN(2) {
		if !ev.Result.Paused || len(ev.Result.Jobs) != 0 {
			t.Fatalf("claim on the paused queue: %+v", ev.Result)
		}
	}
	if runs.Load() != 0 {
		t.Fatalf("%d jobs ran on a paused queue", runs.Load())
	}
	if _, err := e.client.Cancel(ctx, "default", a.JobID, "ada", "not needed"); err != nil {
		t.Fatal(err)
	}
	if changed, err := e.client.Resume(ctx, "default", "ada", ""); !changed || err != nil {
		t.Fatal(changed, err)
	}
	jobstest.WaitState(t, e.ledger, "default", b.JobID, jobs.Succeeded)
	if rec, _ := e.ledger.Get(ctx, "default", a.JobID); rec.State != jobs.Cancelled || runs.Load() != 1 {
		t.Fatalf("cancelled job is %s, %d runs", rec.State, runs.Load())
	}
}

// TestLongHandlerKeepsItsLease runs a handler for several lease TTLs: the
// batched renewals keep its one attempt alive.
func TestLongHandlerKeepsItsLease(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.LeaseTTL = 300 * time.Millisecond
	p := e.pool(cfg)
	var calls atomic.Int32
	_ = worker.Register(p, jobs.WorkFunc[blockArgs](func(ctx context.Context, j *jobs.Job[blockArgs]) error {
		calls.Add(1)
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(1500 * time.Millisecond): // five lease TTLs
			return nil
		}
	}))
	e.start(p)
	ids := []string{e.enqueue(blockArgs{N: 1}).JobID, e.enqueue(blockArgs{N: 2}).JobID, e.enqueue(blockArgs{N: 3}).JobID}
	for _, id := range ids {
		rec := jobstest.WaitState(t, e.ledger, "default", id, jobs.Succeeded)
		if rec.Attempts != 1 {
			t.Fatalf("job %s took %d attempts: its lease lapsed while the handler ran", id, rec.Attempts)
		}
	}
	if calls.Load() != 3 {
		t.Fatalf("%d handler calls for 3 jobs", calls.Load())
	}
}

type flakyArgs struct{}

func (flakyArgs) Kind() string { return "flaky-reconcile" }

type panickyWorker struct{}

func (panickyWorker) Work(context.Context, *jobs.Job[flakyArgs]) error {
	return jobs.Unknown(errors.New("no idea"))
}

func (panickyWorker) Reconcile(context.Context, *jobs.Job[flakyArgs]) (jobs.Verdict, error) {
	panic("reconcile exploded")
}

// TestMaintenanceSurvivesBadRecordsAndPanics: a panicking Reconcile, a
// corrupt record and index entries without a record neither crash the
// pool nor stop the maintenance leader from resolving the other jobs.
func TestMaintenanceSurvivesBadRecordsAndPanics(t *testing.T) {
	e := newEnv(t)
	p := e.pool(e.config())
	_ = worker.Register(p, jobs.Worker[flakyArgs](panickyWorker{}))
	_ = worker.Register(p, jobs.WorkFunc[opaqueArgs](func(ctx context.Context, j *jobs.Job[opaqueArgs]) error {
		return jobs.Unknown(errors.New("no idea"))
	}))
	ctx := context.Background()
	// Index entries whose records are gone, and a corrupt record.
	for _, s := range []jobs.State{jobs.Pending, jobs.Running, jobs.Uncertain} {
		e.rdb.ZAdd(ctx, e.ledger.StateKey("default", s), redis.Z{Score: 1, Member: "ghost-" + string(s)})
	}
	corrupt := e.enqueue(opaqueArgs{}, jobs.Delay(time.Hour)).JobID
	e.rdb.HSet(ctx, e.ledger.JobKey("default", corrupt), "state", "uncertain", "reconcile_tries", "garbage", "token", "x")
	e.rdb.ZAdd(ctx, e.ledger.StateKey("default", jobs.Uncertain), redis.Z{Score: 1, Member: corrupt})
	e.start(p)

	panics := e.enqueue(flakyArgs{})
	opaque := e.enqueue(opaqueArgs{})
	// MaxTries is 3: a Reconcile that panics counts as "cannot tell".
	rec := jobstest.WaitState(t, e.ledger, "default", panics.JobID, jobs.Review)
	if rec.ReconcileTries < 2 {
		t.Fatalf("review after %d tries", rec.ReconcileTries)
	}
	jobstest.WaitState(t, e.ledger, "default", opaque.JobID, jobs.Review)
	jobstest.WaitState(t, e.ledger, "default", corrupt, jobs.Review)
	if !strings.Contains(e.logs.String(), "reconcile exploded") {
		t.Fatal("the panic was not logged")
	}
	if v := testutil.ToFloat64(e.metric("fencedq_reconcile_errors_total")); v < 2 {
		t.Fatalf("reconcile failures counted %v, want at least 2", v)
	}
	redistest.Await(t, e.rdb, e.ns, "the index entries without records to be dropped", func() bool {
		for _, s := range []jobs.State{jobs.Pending, jobs.Running, jobs.Uncertain} {
			if e.rdb.ZScore(ctx, e.ledger.StateKey("default", s), "ghost-"+string(s)).Err() != redis.Nil {
				return false
			}
		}
		return true
	})
}

type hangArgs struct{}

func (hangArgs) Kind() string { return "hang-once" }

// hangOnce ignores its context on its first call, past its lease; its
// Reconcile says the effect did not happen, so the job is re-run.
type hangOnce struct {
	calls atomic.Int32
	wake  chan struct{}
}

func (w *hangOnce) Work(ctx context.Context, j *jobs.Job[hangArgs]) error {
	if w.calls.Add(1) == 1 {
		<-w.wake
	}
	return nil
}

func (w *hangOnce) Reconcile(context.Context, *jobs.Job[hangArgs]) (jobs.Verdict, error) {
	return jobs.NotApplied, nil
}

// TestRecoveryAfterRedisLostEveryKey restarts Redis without persistence
// under a running pool: the queue registry heals and crash recovery (an
// attempt whose lease lapses is expired, reconciled and re-run) goes on
// without restarting any process.
func TestRecoveryAfterRedisLostEveryKey(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	rdb := srv.Client()
	e := newEnvOn(t, rdb, redistest.Namespace(t))
	cfg := e.config()
	cfg.LeaseTTL = 300 * time.Millisecond
	p := e.pool(cfg)
	w := &hangOnce{wake: make(chan struct{})}
	defer close(w.wake)
	_ = worker.Register(p, jobs.Worker[hangArgs](w))
	_ = worker.Register(p, jobs.WorkFunc[echoArgs](func(context.Context, *jobs.Job[echoArgs]) error { return nil }))
	e.start(p)
	first := e.enqueue(echoArgs{N: 1})
	jobstest.WaitState(t, e.ledger, "default", first.JobID, jobs.Succeeded)

	srv.Restart() // no persistence: every key is gone; it answers PING again
	ctx := context.Background()
	res, err := e.client.Enqueue(ctx, hangArgs{}, jobs.Timeout(200*time.Millisecond))
	if err != nil {
		t.Fatalf("enqueue after the restart: %v", err)
	}
	rec := jobstest.WaitState(t, e.ledger, "default", res.JobID, jobs.Succeeded)
	// found not applied, the first attempt failed: a retry on the same run
	if rec.Attempts != 2 || rec.Runs != 0 || w.calls.Load() < 2 {
		t.Fatalf("after the restart: %+v, %d calls", rec, w.calls.Load())
	}
	if qs, _ := e.ledger.Queues(ctx); len(qs) != 1 || qs[0] != "default" {
		t.Fatalf("queue registry %v", qs)
	}
}

// TestFormerLeaderExportsNoJobCounts: a pool that stops being the
// maintenance leader drops its job gauges, so alerts never read stale counts.
func TestFormerLeaderExportsNoJobCounts(t *testing.T) {
	e := newEnv(t)
	p := e.pool(e.config())
	stop := e.start(p)
	series := func() int {
		fams, _ := e.reg.Gather()
		for _, f := range fams {
			if f.GetName() == "fencedq_jobs" {
				return len(f.GetMetric())
			}
		}
		return 0
	}
	// The status service sets the gauges, then publishes its status.
	redistest.Await(t, e.rdb, e.ns, "the leader's job-count gauges", func() bool { return series() > 0 })
	stop()
	if n := series(); n != 0 {
		t.Fatalf("%d job-count series left after leadership ended", n)
	}
}

type orderArgs struct {
	Q string `json:"q"`
}

func (orderArgs) Kind() string { return "order" }

// TestStrictPriorityDrainsHigherQueuesFirst: with one slot and strict
// priority, every due job of the higher queue runs before the lower's.
func TestStrictPriorityDrainsHigherQueuesFirst(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.Concurrency = 1
	cfg.StrictPriority = true
	cfg.Queues = map[string]int{"high": 10, "low": 1}
	p := e.pool(cfg)
	order := make(chan string, 10)
	_ = worker.Register(p, jobs.WorkFunc[orderArgs](func(ctx context.Context, j *jobs.Job[orderArgs]) error {
		order <- j.Queue
		return nil
	}))
	for range 3 {
		e.enqueue(orderArgs{Q: "low"}, jobs.Queue("low"))
	}
	for range 3 {
		e.enqueue(orderArgs{Q: "high"}, jobs.Queue("high"))
	}
	e.start(p)
	var got []string
	for range 6 {
		select {
		case q := <-order:
			got = append(got, q)
		case <-time.After(30 * time.Second):
			t.Fatalf("only %v ran", got)
		}
	}
	if strings.Join(got, ",") != "high,high,high,low,low,low" {
		t.Fatalf("order %v", got)
	}
}

// TestPoolsPublishHeartbeats: a running pool is listed with its queues,
// concurrency and the kinds it reconciles; a stopped one is gone.
func TestPoolsPublishHeartbeats(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.WorkerID = "pool-hb"
	p := e.pool(cfg)
	if err := worker.Register[callArgs](p, &callWorker{}); err != nil {
		t.Fatal(err)
	}
	stop := e.start(p)
	ctx := context.Background()
	redistest.Await(t, e.rdb, e.ns, "the pool's heartbeat", func() bool {
		ps, _ := e.ledger.Pools(ctx)
		return len(ps) == 1
	})
	ps, _ := e.ledger.Pools(ctx)
	if ps[0].ID != "pool-hb" || ps[0].Concurrency != cfg.Concurrency || ps[0].Queues["default"] != 1 || ps[0].Host == "" ||
		strings.Join(ps[0].Reconcilers, ",") != "call" {
		t.Fatalf("heartbeat %+v", ps[0])
	}
	stop()
	if ps, _ := e.ledger.Pools(ctx); len(ps) != 0 {
		t.Fatalf("a stopped pool is still listed: %+v", ps)
	}
}

// prunableLog is an effect log that records the pruner's calls.
type prunableLog struct{ olderThan chan time.Duration }

func (prunableLog) Applied(context.Context, string) (fence.Effect, bool, error) {
	return fence.Effect{}, false, nil
}

func (l prunableLog) PruneEffects(_ context.Context, olderThan time.Duration) (int64, error) {
	select {
	case l.olderThan <- olderThan:
	default:
	}
	return 0, nil
}

// TestLeaderPrunesTheEffectLog: with an effect retention set, the leader's
// pruner asks the effect log to drop older records; a retention shorter
// than the jobs' is refused.
func TestLeaderPrunesTheEffectLog(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	log := prunableLog{olderThan: make(chan time.Duration, 1)}
	cfg.Jobs.Retention = time.Hour
	cfg.Maintenance.EffectLog = log
	cfg.Maintenance.EffectRetention = 30 * time.Minute
	if _, err := worker.NewPool(e.rdb, cfg); err == nil {
		t.Fatal("an effect retention shorter than the job retention was accepted")
	}
	cfg.Maintenance.EffectRetention = 2 * time.Hour
	cfg.Maintenance.PruneInterval = 50 * time.Millisecond
	e.start(e.pool(cfg))
	select {
	case d := <-log.olderThan:
		if d != 2*time.Hour {
			t.Fatalf("pruned records older than %v, want 2h", d)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the leader never pruned the effect log")
	}
}

type namedResourceArgs struct {
	Name string `json:"name"`
}

func (namedResourceArgs) Kind() string { return "named-resource" }

func (a namedResourceArgs) Resource() string { return a.Name }

// TestUserResourcesCannotReachInternalLeases: a job may name the resource
// "reconciler" (the leader's lease before it moved under the reserved
// prefix) and runs while a maintenance leader holds its lease; a job naming
// the leader's lease, or another job's, is refused before anything is
// written.
func TestUserResourcesCannotReachInternalLeases(t *testing.T) {
	e := newEnv(t)
	p := e.pool(e.config())
	_ = worker.Register(p, jobs.WorkFunc[namedResourceArgs](func(ctx context.Context, j *jobs.Job[namedResourceArgs]) error { return nil }))
	e.start(p)
	leader := lease.NewManager(e.rdb, lease.Config{Namespace: e.ns}).Key(ledger.LeaderResource)
	redistest.Await(t, e.rdb, leader, "the maintenance leader's lease", func() bool {
		l, err := e.client.Inspector().Leader(context.Background())
		return err == nil && l != nil
	})
	res := e.enqueue(namedResourceArgs{Name: "reconciler"})
	jobstest.WaitState(t, e.ledger, jobs.DefaultQueue, res.JobID, jobs.Succeeded)
	for _, name := range []string{ledger.LeaderResource, "fencedq:outbox:x", jobs.LeaseResource(res.JobID, "")} {
		if _, err := e.client.Enqueue(context.Background(), namedResourceArgs{Name: name}); !errors.Is(err, jobs.ErrInvalid) {
			t.Errorf("resource %q: %v, want ErrInvalid", name, err)
		}
	}
}

type creditArgs struct {
	Account string `json:"account"`
	Note    string `json:"note" fencedq:"sensitive"`
}

func (creditArgs) Kind() string { return "credit" }

func (a creditArgs) Resource() string { return "account:" + a.Account }

type plainArgs struct {
	N int `json:"n"`
}

func (plainArgs) Kind() string { return "plain" }

// exportArgs' Go type limits, groups and partitions its jobs by customer.
type exportArgs struct {
	Customer string `json:"customer"`
}

func (exportArgs) Kind() string           { return "export" }
func (a exportArgs) Limit() (string, int) { return "export:" + a.Customer, 2 }
func (a exportArgs) Group() string        { return a.Customer }
func (a exportArgs) PartitionKey() string { return a.Customer }

// TestRawEnqueueHonoursTheKindsRules: a kind whose Go type has rules raw
// JSON cannot run (a Resource, sensitive fields, a Limit, a Group, a
// PartitionKey) is refused by EnqueueRaw, Unchecked or not,
// as is a kind no live pool runs; a plain kind is enqueued and runs.
func TestRawEnqueueHonoursTheKindsRules(t *testing.T) {
	e := newEnv(t)
	p := e.pool(e.config())
	_ = worker.Register(p, jobs.WorkFunc[creditArgs](func(ctx context.Context, j *jobs.Job[creditArgs]) error { return nil }))
	_ = worker.Register(p, jobs.WorkFunc[plainArgs](func(ctx context.Context, j *jobs.Job[plainArgs]) error { return nil }))
	_ = worker.Register(p, jobs.WorkFunc[exportArgs](func(ctx context.Context, j *jobs.Job[exportArgs]) error { return nil }))
	e.start(p)
	ctx := context.Background()
	redistest.Await(t, e.rdb, e.ns+":pools", "the pool's heartbeat", func() bool {
		ps, err := e.client.Inspector().Pools(ctx)
		return err == nil && len(ps) == 1
	})
	_, err := e.client.EnqueueRaw(ctx, "credit", []byte(`{"account":"a","note":"SECRET"}`))
	if !errors.Is(err, jobs.ErrInvalid) || !strings.Contains(err.Error(), "Resource, sensitive fields") {
		t.Fatalf("raw credit: %v", err)
	}
	// Unchecked vouches only for a kind no live pool runs
	_, err = e.client.EnqueueRaw(ctx, "credit", []byte(`{"account":"a","note":"SECRET"}`), jobs.Unchecked())
	if !errors.Is(err, jobs.ErrInvalid) || !strings.Contains(err.Error(), "Resource, sensitive fields") {
		t.Fatalf("unchecked raw credit: %v", err)
	}
	// a limit, a fair group and a partition key raw JSON would bypass
	_, err = e.client.EnqueueRaw(ctx, "export", []byte(`{"customer":"acme"}`))
	if !errors.Is(err, jobs.ErrInvalid) || !strings.Contains(err.Error(), "(Limit, Group, PartitionKey)") {
		t.Fatalf("raw export: %v", err)
	}
	// options stand in for the methods they override
	_, err = e.client.EnqueueRaw(ctx, "export", []byte(`{"customer":"acme"}`), jobs.Limit("export:acme", 2), jobs.Group("acme"))
	if !errors.Is(err, jobs.ErrInvalid) || !strings.Contains(err.Error(), "(PartitionKey)") {
		t.Fatalf("raw export with a limit and a group: %v", err)
	}
	res, err := e.client.EnqueueRaw(ctx, "export", []byte(`{"customer":"acme"}`), jobs.Limit("export:acme", 2), jobs.Group("acme"), jobs.PartitionKey("acme"))
	if err != nil {
		t.Fatalf("raw export with every rule as an option: %v", err)
	}
	jobstest.WaitState(t, e.ledger, jobs.DefaultQueue, res.JobID, jobs.Succeeded)
	if _, err := e.client.EnqueueRaw(ctx, "nobody-runs-this", []byte(`{}`)); !errors.Is(err, jobs.ErrInvalid) || !strings.Contains(err.Error(), "no live pool runs kind") {
		t.Fatalf("raw unknown kind: %v", err)
	}
	counts, err := e.client.Inspector().Counts(ctx, jobs.DefaultQueue)
	if err != nil || counts[jobs.Pending]+counts[jobs.Running]+counts[jobs.Succeeded] != 1 {
		t.Fatalf("refused raw enqueues wrote jobs: %v %v (want only the export with its rules given)", counts, err)
	}
	res, err = e.client.EnqueueRaw(ctx, plainArgs{}.Kind(), []byte(`{"n":3}`))
	if err != nil {
		t.Fatal(err)
	}
	jobstest.WaitState(t, e.ledger, jobs.DefaultQueue, res.JobID, jobs.Succeeded)
	if _, err := e.client.EnqueueRaw(ctx, "nobody-runs-this", []byte(`{}`), jobs.Unchecked()); err != nil {
		t.Fatalf("unchecked: %v", err)
	}
}

// TestJobResourceLeaseKeysExpire: a job's resource lease, released when
// the job ends, leaves a key that expires within minutes, so resources
// named after user data (one per customer) do not accumulate.
func TestJobResourceLeaseKeysExpire(t *testing.T) {
	e := newEnv(t)
	p := e.pool(e.config())
	_ = worker.Register(p, jobs.WorkFunc[namedResourceArgs](func(ctx context.Context, j *jobs.Job[namedResourceArgs]) error { return nil }))
	e.start(p)
	leases := lease.NewManager(e.rdb, lease.Config{Namespace: e.ns})
	for i := range 5 {
		name := fmt.Sprintf("customer:%d", i)
		res := e.enqueue(namedResourceArgs{Name: name})
		jobstest.WaitState(t, e.ledger, jobs.DefaultQueue, res.JobID, jobs.Succeeded)
		key := leases.Key(name)
		var ttl time.Duration
		redistest.Await(t, e.rdb, key, "the released lease key's expiry", func() bool {
			ttl = e.rdb.PTTL(context.Background(), key).Val()
			return ttl > 0
		})
		if ttl > 3*time.Minute {
			t.Fatalf("%s: the released key expires in %v, want about 2 minutes", name, ttl)
		}
	}
}

// TestStrictPriorityEqualPrioritiesShare: under strict priority, queues of
// one priority share the slots (each fetch visits them in a random order),
// so neither waits for the other's whole backlog, and a lower priority
// still waits for both. (Visited in name order, "beta" ran only once
// "alpha" was drained.)
func TestStrictPriorityEqualPrioritiesShare(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.Concurrency = 1
	cfg.StrictPriority = true
	cfg.Queues = map[string]int{"alpha": 5, "beta": 5, "low": 1}
	p := e.pool(cfg)
	const alphas, betas = 40, 5
	order := make(chan string, alphas+betas+1)
	_ = worker.Register(p, jobs.WorkFunc[orderArgs](func(ctx context.Context, j *jobs.Job[orderArgs]) error {
		order <- j.Queue
		return nil
	}))
	e.enqueue(orderArgs{Q: "low"}, jobs.Queue("low"))
	for range alphas {
		e.enqueue(orderArgs{Q: "alpha"}, jobs.Queue("alpha"))
	}
	for range betas {
		e.enqueue(orderArgs{Q: "beta"}, jobs.Queue("beta"))
	}
	e.start(p)
	var got []string
	for range alphas + betas + 1 {
		select {
		case q := <-order:
			got = append(got, q)
		case <-time.After(30 * time.Second):
			t.Fatalf("only %v ran", got)
		}
	}
	if got[len(got)-1] != "low" {
		t.Fatalf("order %v: low ran before both queues of a higher priority were drained", got)
	}
	// each fetch draws alpha or beta first with even odds: beta's 5 jobs
	// all waiting for alpha's 40 has odds of 2^-40
	if first := slices.Index(got, "beta"); first >= alphas {
		t.Fatalf("order %v: beta waited for alpha's whole backlog", got)
	}
}
