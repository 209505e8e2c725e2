package worker_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fence/redisfence"
	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
	"github.com/fencedq/fencedq/worker"
)

type storeArgs struct {
	Account string `json:"account,omitempty"`
}

func (storeArgs) Kind() string { return "store-write" }

type storeResourceArgs struct {
	Account string `json:"account"`
}

func (storeResourceArgs) Kind() string { return "store-write-resource" }

// Resource names the lease the worker takes before the handler runs.
func (a storeResourceArgs) Resource() string { return "account:" + a.Account }

// fencedWrite is a handler body: one write to storage with the attempt's fence.
func fencedWrite(store *redisfence.Store) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		f, ok := fence.FromContext(ctx)
		if !ok {
			return fmt.Errorf("no fence in the handler's context")
		}
		return store.Apply(ctx, f, redisfence.RPush(store.DataKey(f.Resource, "log"), f.Token.String()))
	}
}

// Storage feedback: storage holds a token for a job's resource that the
// ledger and the lease counter never minted (one a Redis failover lost).
// The first attempt is refused; the pool raises the counter of the refused
// fence above storage's mark, so the retry is accepted and the job
// succeeds. Without the feedback every retry would be refused until the
// clock caught up with the mark, and the job would end dead.
func TestStorageRefusalRaisesTheNextToken(t *testing.T) {
	e := newEnv(t)
	store, err := redisfence.New(e.rdb, redisfence.Config{Namespace: e.ns + "-store"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := e.config()
	cfg.LeaseTTL = 5 * time.Second // a lease expiring on a loaded machine would add an attempt
	p := e.pool(cfg)
	write := fencedWrite(store)
	_ = worker.Register(p, jobs.WorkFunc[storeArgs](func(ctx context.Context, _ *jobs.Job[storeArgs]) error { return write(ctx) }))
	_ = worker.Register(p, jobs.WorkFunc[storeResourceArgs](func(ctx context.Context, _ *jobs.Job[storeResourceArgs]) error { return write(ctx) }))

	ctx := context.Background()
	lost := lease.Token(3) << 52 // three fencing epochs above any clock-based token of epoch 0
	seed := func(resource string) {
		t.Helper()
		f := fence.Fence{Resource: resource, Token: lost, Owner: "lost-with-the-old-primary", OperationID: "lost-op:" + resource}
		if err := store.Apply(ctx, f, redisfence.RPush(store.DataKey(resource, "log"), "lost")); err != nil {
			t.Fatal(err)
		}
	}
	// The job's own token (resource "job:<id>") and a named resource's lease token.
	// (The pool starts once storage is seeded.)
	own := e.enqueue(storeArgs{}, jobs.MaxRetries(3))
	seed(jobs.LeaseResource(own.JobID, ""))
	named := e.enqueue(storeResourceArgs{Account: "7"}, jobs.MaxRetries(3))
	seed("account:7")
	e.start(p)

	rec := jobstest.WaitState(t, e.ledger, jobs.DefaultQueue, own.JobID, jobs.Succeeded)
	if rec.Attempts != 2 || rec.Token != lost+1 {
		t.Fatalf("job token: %d attempts, token %d; want 2 attempts, the second with token %d", rec.Attempts, rec.Token, lost+1)
	}
	h, _ := e.ledger.History(ctx, jobs.DefaultQueue, own.JobID)
	if !strings.Contains(jobstest.History(h), `"event":"raised"`) {
		t.Fatalf("no raised entry in the history:%s", jobstest.History(h))
	}
	rec = jobstest.WaitState(t, e.ledger, jobs.DefaultQueue, named.JobID, jobs.Succeeded)
	if rec.Attempts != 2 || rec.Fence != lost+1 {
		t.Fatalf("resource lease: %d attempts, fence %d; want 2 attempts, the second with the lease token %d", rec.Attempts, rec.Fence, lost+1)
	}
	if !strings.Contains(e.logs.String(), "the next attempt mints above it") {
		t.Fatalf("the raise is not logged")
	}
	// Both refusals are on the ledger's record, where the dashboard and
	// inspect read the queue's fenced rejections.
	st, err := e.ledger.Stats(ctx, jobs.DefaultQueue)
	if err != nil || st["fenced_storage"] != 2 {
		t.Fatalf("fenced_storage %d (%v), want 2 (one per job)", st["fenced_storage"], err)
	}
	if h, _ := e.ledger.History(ctx, jobs.DefaultQueue, named.JobID); !strings.Contains(jobstest.History(h), `"stage":"storage"`) {
		t.Fatalf("the resource job's history has no storage refusal:%s", jobstest.History(h))
	}
}

type hostileArgs struct{}

func (hostileArgs) Kind() string { return "hostile-storage" }

type hostileResourceArgs struct {
	Account string `json:"account"`
}

func (hostileResourceArgs) Kind() string { return "hostile-storage-resource" }

// Resource names the lease the worker takes before the handler runs.
func (a hostileResourceArgs) Resource() string { return "account:" + a.Account }

// A storage (an httpfence service, say) that refuses every write with a
// mark near 2^64 must not make the pool raise the token counters to it: a
// counter there can mint no more, and every later Acquire of the resource
// would fail with "token space exhausted". The mark is logged and not fed
// back, and the resource stays usable.
func TestImplausibleStorageMarkNotRaised(t *testing.T) {
	e := newEnv(t)
	p := e.pool(e.config())
	huge := lease.Token(math.MaxUint64 - 1)
	refuse := func(ctx context.Context) error {
		f, _ := fence.FromContext(ctx)
		return &fence.StaleError{Fence: f, StoredToken: huge, StoredOwner: "hostile"}
	}
	_ = worker.Register(p, jobs.WorkFunc[hostileArgs](func(ctx context.Context, _ *jobs.Job[hostileArgs]) error { return refuse(ctx) }))
	_ = worker.Register(p, jobs.WorkFunc[hostileResourceArgs](func(ctx context.Context, _ *jobs.Job[hostileResourceArgs]) error { return refuse(ctx) }))
	own := e.enqueue(hostileArgs{}, jobs.MaxRetries(1))
	named := e.enqueue(hostileResourceArgs{Account: "9"}, jobs.MaxRetries(1))
	e.start(p)

	for _, id := range []string{own.JobID, named.JobID} {
		rec := jobstest.WaitState(t, e.ledger, jobs.DefaultQueue, id, jobs.Dead)
		if rec.Attempts != 2 || rec.Token >= 1<<56 || rec.Fence >= 1<<56 {
			t.Fatalf("job %s: %d attempts, token %d, fence %d; want 2 attempts with clock-based tokens", id, rec.Attempts, rec.Token, rec.Fence)
		}
	}
	// The pool releases the job's resource lease after committing its
	// outcome: the acquire waits for that release.
	m := lease.NewManager(e.rdb, lease.Config{Namespace: e.ns})
	var l *lease.Lease
	var err error
	redistest.Await(t, e.rdb, e.ns, "account:9 released by the pool", func() bool {
		l, err = m.Acquire(context.Background(), "account:9", "after", time.Minute)
		return !errors.Is(err, lease.ErrHeld)
	})
	if err != nil || l.Token >= 1<<56 {
		t.Fatalf("acquire after the hostile marks: %v (%v), want a clock-based token", l, err)
	}
	if n := strings.Count(e.logs.String(), "a mark no fencedq counter mints"); n != 4 {
		t.Fatalf("%d log lines about the implausible mark, want 4 (one per attempt)", n)
	}
	if strings.Contains(e.logs.String(), "the next attempt mints above it") {
		t.Fatalf("a raise to the implausible mark is logged")
	}
}
