package worker_test

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

func TestRedisRestartWithAOFLosesNothing(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{AOF: true})
	rdb := srv.Client()
	ns := redistest.Namespace(t)
	e := newEnvOn(t, rdb, ns)
	p := e.pool(e.config())
	_ = worker.Register(p, jobs.Worker[effectArgs](&effectWorker{rdb: rdb, ns: ns, mode: "slow"}))
	e.start(p)
	const n = 40
	ids := make([]string, n)
	for i := range n {
		ids[i] = e.enqueue(effectArgs{Name: fmt.Sprint(i)}, jobs.OperationID(fmt.Sprintf("op-%d", i))).JobID
	}
	ctx := context.Background()
	effects := ns + ":test:{fx}:effects"
	redistest.Await(t, rdb, effects, "five effects before the restart", func() bool { return rdb.HLen(ctx, effects).Val() >= 5 })
	srv.Restart()
	for _, id := range ids {
		jobstest.WaitState(t, e.ledger, "default", id, jobs.Succeeded)
	}
	applies := rdb.HGetAll(ctx, ns+":test:{fx}:applies").Val()
	if len(applies) != n {
		t.Fatalf("%d effects for %d jobs", len(applies), n)
	}
	for op, c := range applies {
		if c != "1" {
			t.Fatalf("%s applied %s times", op, c)
		}
	}
}

type accountArgs struct {
	Account string `json:"account"`
}

func (accountArgs) Kind() string { return "account-op" }

func (a accountArgs) Resource() string { return "account:" + a.Account }

// Jobs naming one resource never overlap, and their tokens rise. Jobs of
// a queue on one resource wait parked on its implicit limit (no claim and
// put-back); a job that opts out (jobs.Limit("", 0)), like one contending
// with another queue, waits by put-back: both ways hold the exclusion.
func TestJobsOnOneResourceExcludeEachOther(t *testing.T) {
	t.Run("parked", func(t *testing.T) { resourceExclusion(t, false) })
	t.Run("put back", func(t *testing.T) { resourceExclusion(t, true) })
}

func resourceExclusion(t *testing.T, optOut bool) {
	e := newEnv(t)
	cfg := e.config()
	cfg.Concurrency = 6
	var opts []jobs.Option
	if optOut {
		opts = []jobs.Option{jobs.Limit("", 0)}
		cfg.LeaseWait = 5 * time.Millisecond // most contended attempts are deferred
	} else {
		// Parked jobs are claimed one at a time per account; the next one
		// waits for the lease only between its predecessor's commit and
		// lease release (a round trip): a generous wait keeps it at that.
		cfg.LeaseWait = 10 * time.Second
	}
	p := e.pool(cfg)
	var mu sync.Mutex
	inside := map[string]int{}
	var overlaps, done atomic.Int32
	var lastToken sync.Map
	_ = worker.Register(p, jobs.WorkFunc[accountArgs](func(ctx context.Context, j *jobs.Job[accountArgs]) error {
		mu.Lock()
		inside[j.Resource]++
		if inside[j.Resource] > 1 {
			overlaps.Add(1)
		}
		mu.Unlock()
		if prev, ok := lastToken.Load(j.Resource); ok && prev.(uint64) >= uint64(j.Token) {
			t.Errorf("%s: token %d not above previous %d", j.Resource, j.Token, prev)
		}
		lastToken.Store(j.Resource, uint64(j.Token))
		time.Sleep(20 * time.Millisecond) // the work, under the account's lease: contention, not a wait
		mu.Lock()
		inside[j.Resource]--
		mu.Unlock()
		done.Add(1)
		return nil
	}))
	var ids []string
	for i := range 12 {
		ids = append(ids, e.enqueue(accountArgs{Account: fmt.Sprint(i % 2)}, opts...).JobID)
	}
	// Before any pool runs: without opting out, each account's jobs after
	// its first wait parked on the resource's implicit limit.
	fs, err := e.client.Inspector().Limits(context.Background(), "default")
	if err != nil {
		t.Fatal(err)
	}
	waiting := map[string]int{}
	for _, l := range fs.Limits {
		waiting[l.Key] = l.Waiting
	}
	if want := map[string]int{"resource:account:0": 5, "resource:account:1": 5}; !optOut && !maps.Equal(waiting, want) {
		t.Fatalf("parked jobs per resource limit: %v, want %v", waiting, want)
	} else if optOut && len(waiting) != 0 {
		t.Fatalf("jobs that opted out are parked: %v", waiting)
	}
	e.start(p)
	for _, id := range ids {
		rec := jobstest.WaitState(t, e.ledger, "default", id, jobs.Succeeded)
		if rec.Resource == "" || rec.Fence == 0 {
			t.Fatalf("resource or fence token not recorded: %+v", rec)
		}
		if rec.Attempts != 1 {
			t.Fatalf("job %s: %d attempts; a wait must not consume one", id, rec.Attempts)
		}
	}
	st, _ := e.ledger.Stats(context.Background(), "default")
	switch {
	case optOut && st["deferred"] == 0:
		t.Fatalf("no attempt was deferred (stats %v): the test did not exercise contention", st)
	case !optOut && (st["deferred"] != 0 || st["attempted"] != int64(len(ids))):
		t.Fatalf("jobs waiting on their resource were claimed and put back (stats %v): want them parked, %d attempts for %d jobs", st, len(ids), len(ids))
	}
	if overlaps.Load() != 0 {
		t.Fatalf("%d overlapping attempts on one account", overlaps.Load())
	}
}
