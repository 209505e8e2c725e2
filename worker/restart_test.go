package worker_test

import (
	"context"
	"fmt"
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

func TestJobsOnOneResourceExcludeEachOther(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.Concurrency = 6
	cfg.LeaseWait = 5 * time.Millisecond // most contended attempts are deferred
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
	e.start(p)
	var ids []string
	for i := range 12 {
		ids = append(ids, e.enqueue(accountArgs{Account: fmt.Sprint(i % 2)}).JobID)
	}
	for _, id := range ids {
		rec := jobstest.WaitState(t, e.ledger, "default", id, jobs.Succeeded)
		if rec.Resource == "" || rec.Fence == 0 {
			t.Fatalf("resource or fence token not recorded: %+v", rec)
		}
		if rec.Attempts != 1 {
			t.Fatalf("job %s: %d attempts; a deferral must not consume one", id, rec.Attempts)
		}
	}
	if st, _ := e.ledger.Stats(context.Background(), "default"); st["deferred"] == 0 {
		t.Fatalf("no attempt was deferred (stats %v): the test did not exercise contention", st)
	}
	if overlaps.Load() != 0 {
		t.Fatalf("%d overlapping attempts on one account", overlaps.Load())
	}
}
