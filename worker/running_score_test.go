package worker_test

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// A running job whose entry in the running index was edited to a score no
// lease deadline has (+inf, far beyond a year ahead) is still expired once
// its pool is gone: the expiry pass looked only at entries scored up to
// now, so it never reached such an entry and the job stayed running for
// ever. The pass now takes such entries too, follows the record's own
// deadline when that is a sane one, and expires the attempt when it
// passed, logged with the job's id and counted, as any lapsed lease.
func TestRunningIndexScoreBeyondAnyDeadlineIsExpired(t *testing.T) {
	e := newEnv(t)
	p := e.pool(e.config())
	hooks := worker.InitHooks(p, t)
	_ = worker.Register(p, jobs.WorkFunc[echoArgs](func(context.Context, *jobs.Job[echoArgs]) error { return nil }))
	ctx := context.Background()
	scores := []float64{math.Inf(1), 1e300, float64(time.Now().Add(400 * 24 * time.Hour).UnixMilli())}
	var ids []string
	for range scores {
		ids = append(ids, e.enqueue(echoArgs{N: 1}).JobID)
	}
	// A pool that claimed them and died.
	cl, err := e.ledger.Claim(ctx, jobs.DefaultQueue, "gone", time.Second, len(ids))
	if err != nil || len(cl.Jobs) != len(ids) {
		t.Fatalf("claim: %+v, %v", cl, err)
	}
	// And a live one, whose lease holds a minute: the earliest deadline
	// of the index is then a sane one, ahead.
	e.enqueue(echoArgs{N: 1})
	if cl, err := e.ledger.Claim(ctx, jobs.DefaultQueue, "alive", time.Minute, 1); err != nil || len(cl.Jobs) != 1 {
		t.Fatalf("claim: %+v, %v", cl, err)
	}
	running := e.ledger.StateKey(jobs.DefaultQueue, ledger.Running)
	for i, id := range ids {
		if err := e.rdb.ZAdd(ctx, running, redis.Z{Score: scores[i], Member: id}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	e.start(p)
	left := map[string]bool{}
	for _, id := range ids {
		left[id] = true
	}
	for len(left) > 0 {
		d := hooks.Decided.WaitFor("an edited job's expiry", func(d worker.Decision) bool { return left[d.JobID] && d.Result == "expired" })
		delete(left, d.JobID)
	}
	for _, id := range ids {
		if r, err := e.client.Inspector().Get(ctx, jobs.DefaultQueue, id); err != nil || r.State == jobs.Running {
			t.Fatalf("job %s: %+v, %v; want it out of running", id, r, err)
		}
	}
	logs := e.logs.String()
	for _, id := range ids {
		if !strings.Contains(logs, `"job_id":"`+id+`"`) {
			t.Fatalf("job %s's expiry was not logged with its id", id)
		}
	}
	if v := testutil.ToFloat64(e.metric("fencedq_attempts_expired_total")); v != float64(len(ids)) {
		t.Fatalf("expired metric %v, want %d", v, len(ids))
	}
}

type appliedArgs struct{}

func (appliedArgs) Kind() string { return "applied-always" }

type appliedWorker struct{}

func (appliedWorker) Work(context.Context, *jobs.Job[appliedArgs]) error { return nil }

func (appliedWorker) Reconcile(context.Context, *jobs.Job[appliedArgs]) (jobs.Verdict, error) {
	return jobs.Applied, nil
}

// An uncertain job whose entry in the uncertain index (its next reconcile
// look) was edited beyond any sane time (+inf, 1e300) is still looked at:
// the resolver read only entries due by now and the earliest entry, so it
// never reached such an entry and the job stayed uncertain for ever.
func TestUncertainIndexScoreBeyondAnyTimeIsReconciled(t *testing.T) {
	e := newEnv(t)
	p := e.pool(e.config())
	_ = worker.Register(p, jobs.Worker[appliedArgs](appliedWorker{}))
	ctx := context.Background()
	var ids []string
	for range 2 {
		ids = append(ids, e.enqueue(appliedArgs{}).JobID)
	}
	// And one more, uncertain with a sane next look a day ahead: the
	// earliest entry of the index is then a sane one, ahead.
	later := e.enqueue(appliedArgs{}).JobID
	cl, err := e.ledger.Claim(ctx, jobs.DefaultQueue, "gone", time.Millisecond, 3)
	if err != nil || len(cl.Jobs) != 3 {
		t.Fatalf("claim: %+v, %v", cl, err)
	}
	for _, id := range append([]string{later}, ids...) {
		e.rdb.ZAdd(ctx, e.ledger.StateKey(jobs.DefaultQueue, ledger.Running), redis.Z{Score: 1, Member: id})
		e.rdb.HSet(ctx, e.ledger.JobKey(jobs.DefaultQueue, id), "deadline", "1") // its lease lapsed
	}
	if ex, err := e.ledger.Expire(ctx, jobs.DefaultQueue, 0, 10); err != nil || len(ex.Moved) != 3 {
		t.Fatalf("expire: %+v, %v", ex, err)
	}
	uncertain := e.ledger.StateKey(jobs.DefaultQueue, ledger.Uncertain)
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(e.rdb.ZAdd(ctx, uncertain, redis.Z{Score: float64(time.Now().Add(24 * time.Hour).UnixMilli()), Member: later}).Err())
	must(e.rdb.ZAdd(ctx, uncertain, redis.Z{Score: math.Inf(1), Member: ids[0]}).Err())
	must(e.rdb.ZAdd(ctx, uncertain, redis.Z{Score: 1e300, Member: ids[1]}).Err())
	e.start(p)
	for _, id := range ids {
		jobstest.WaitState(t, e.ledger, jobs.DefaultQueue, id, jobs.Succeeded)
	}
}
