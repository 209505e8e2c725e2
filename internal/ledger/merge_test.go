package ledger_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// countScript counts the calls of one script (alone or in pipelines).
type countScript struct {
	sha string
	n   atomic.Int64
}

func (h *countScript) count(cmds ...redis.Cmder) {
	for _, c := range cmds {
		if a := c.Args(); len(a) > 1 && a[1] == h.sha {
			h.n.Add(1)
		}
	}
}
func (h *countScript) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *countScript) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h.count(cmd); return next(ctx, cmd) }
}
func (h *countScript) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { h.count(cmds...); return next(ctx, cmds) }
}

// TestConcurrentEnqueuesMergedStayDeduplicated: enqueues from many
// goroutines, queued behind held calls so that they share script calls,
// each get their own result: one job per operation id (every other
// enqueue of it deduplicated to that job), one job per unique key, and the
// counters and the due index hold exactly the jobs created.
func TestConcurrentEnqueuesMergedStayDeduplicated(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	hold := newHoldScript(t, ledger.ScriptFunction("enqueue"))
	counted := &countScript{sha: ledger.ScriptFunction("enqueue")}
	rdb.AddHook(hold)
	rdb.AddHook(counted)
	f := newFixture(t, rdb)

	const goroutines, ops, uniques = 64, 16, 16
	results := make([]*jobs.Result, goroutines+uniques)
	errs := make([]error, goroutines+uniques)
	var wg sync.WaitGroup
	for i := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = f.c.Enqueue(f.ctx, noteArgs{Text: fmt.Sprint(i)}, jobs.OperationID(fmt.Sprintf("op-%d", i%ops)))
		}()
	}
	for i := goroutines; i < goroutines+uniques; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = f.c.Enqueue(f.ctx, noteArgs{Text: "same"}, jobs.Unique(jobs.UniqueOpts{ByArgs: true}))
		}()
	}
	hold.held.WaitOrTimeout() // the first call is in flight: later ones queue behind the lane's budget
	close(hold.release)
	wg.Wait()

	byOp := map[string]string{}
	created := 0
	for i := range goroutines {
		r := results[i]
		if errs[i] != nil {
			t.Fatalf("enqueue %d: %v", i, errs[i])
		}
		op := fmt.Sprintf("op-%d", i%ops)
		if r.OperationID != op {
			t.Fatalf("enqueue %d: operation id %q, want %q", i, r.OperationID, op)
		}
		if !r.Deduplicated {
			created++
		}
		if id, ok := byOp[op]; ok && id != r.JobID {
			t.Fatalf("operation %s has jobs %s and %s", op, id, r.JobID)
		}
		byOp[op] = r.JobID
	}
	uniqueID, uniqueCreated := "", 0
	for i := goroutines; i < goroutines+uniques; i++ {
		if errs[i] != nil {
			t.Fatalf("unique enqueue %d: %v", i, errs[i])
		}
		if !results[i].Deduplicated {
			uniqueCreated++
		}
		if uniqueID != "" && results[i].JobID != uniqueID {
			t.Fatalf("unique jobs %s and %s both exist", uniqueID, results[i].JobID)
		}
		uniqueID = results[i].JobID
	}
	if created != ops || uniqueCreated != 1 {
		t.Fatalf("created %d jobs with operation ids and %d unique ones, want %d and 1", created, uniqueCreated, ops)
	}
	stats, err := f.l.Stats(f.ctx, f.q)
	if err != nil {
		t.Fatal(err)
	}
	pending, err := rdb.ZCard(f.ctx, f.l.StateKey(f.q, ledger.Pending)).Result()
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(ops + 1); stats["enqueued"] != want || pending != want {
		t.Fatalf("enqueued counter %d, pending %d; want %d", stats["enqueued"], pending, want)
	}
	if dup := stats["deduplicated_enqueue"] + stats["deduplicated_unique"]; dup != goroutines-ops+uniques-1 {
		t.Fatalf("%d deduplications counted, want %d", dup, goroutines-ops+uniques-1)
	}
	for op, id := range byOp {
		rec, err := f.l.Get(f.ctx, f.q, id)
		if err != nil || rec.State != ledger.Pending || rec.OperationID != op {
			t.Fatalf("job %s of %s: %+v, %v", id, op, rec, err)
		}
	}
	t.Logf("%d plain enqueues ran in %d enqueue script calls", goroutines, counted.n.Load())
}
