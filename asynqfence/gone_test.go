package asynqfence_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/hibiken/asynq"

	"github.com/fencedq/fencedq/asynqfence"
	"github.com/fencedq/fencedq/jobs"
)

// TestFailedAttemptOfAVanishedJobIsRetried: the ledger loses the job while
// its attempt runs (a Redis that came back with older data); the attempt
// fails. The bridge does not acknowledge the task (nothing else would
// deliver the job again): it returns ErrGone, asynq retries, and the retry
// records the job afresh and runs it.
func TestFailedAttemptOfAVanishedJobIsRetried(t *testing.T) {
	var p *inProcess
	var runs atomic.Int32
	p = startInProcess(t, func(mux *asynq.ServeMux) {
		mux.HandleFunc("pay", func(ctx context.Context, _ *asynq.Task) error {
			if runs.Add(1) > 1 {
				return nil
			}
			if err := p.rdb.Del(ctx, p.ledger.JobKey("default", "g1")).Err(); err != nil {
				return err
			}
			return errors.New("upstream 502")
		})
	})
	if _, err := p.client.Enqueue(asynq.NewTask("pay", []byte(`{}`)), asynq.TaskID("g1"), asynq.MaxRetry(3)); err != nil {
		t.Fatal(err)
	}
	if err := p.next(); !errors.Is(err, asynqfence.ErrGone) || errors.Is(err, asynq.SkipRetry) {
		t.Fatalf("failed attempt of a vanished job returned %v; want ErrGone, retried", err)
	}
	if err := p.next(); err != nil {
		t.Fatalf("the retry: %v", err)
	}
	if rec := p.record("g1"); rec.State != jobs.Succeeded || runs.Load() != 2 {
		t.Fatalf("record %s after %d runs; want succeeded after 2", rec.State, runs.Load())
	}
}
