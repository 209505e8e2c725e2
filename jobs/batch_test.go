package jobs_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestBatchedTransitionsSurviveScriptFlush runs many concurrent claims and
// commits through shared pipelines while the server's script cache is
// flushed, as a restart would.
func TestBatchedTransitionsSurviveScriptFlush(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rdb := redistest.Start(t, redistest.Options{}).Client()
	c := jobs.NewClient(rdb, jobs.Config{Namespace: redistest.Namespace(t)})
	defer c.Close()
	l := c.Ledger()
	const n = 60
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := c.Enqueue(ctx, noteArgs{Text: "x"}, jobs.Delay(time.Hour))
			if err != nil {
				errs <- err
				return
			}
			if i == n/2 {
				rdb.ScriptFlush(ctx)
			}
			cl, err := l.Claim(ctx, "default", res.JobID, "w", time.Second, 0, "t")
			if err != nil {
				errs <- err
				return
			}
			if st, err := l.Commit(ctx, "default", res.JobID, res.OperationID, cl.Token, jobs.Outcome{To: jobs.Succeeded}); err != nil || st != jobs.Succeeded {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	counts, _ := l.Counts(ctx, "default")
	if counts[jobs.Succeeded] != n {
		t.Fatalf("succeeded %d of %d", counts[jobs.Succeeded], n)
	}
}
