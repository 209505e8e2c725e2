package worker_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// TestRunRefusesAForeignQueueKey: a pool whose queue has a queue-level key
// of another type (written by hand, or by another application sharing the
// Redis) fails to start with an error matching ErrForeignKey naming the
// key, instead of running until a call writing that key fails with
// WRONGTYPE, possibly after writing part of its batch. Fixed, it runs.
func TestRunRefusesAForeignQueueKey(t *testing.T) {
	rdb, ns := redistest.New(t)
	e := newEnvOn(t, rdb, ns)
	p := e.pool(e.config())
	ran := make(chan string, 1)
	if err := worker.Register(p, jobs.WorkFunc[effectArgs](func(_ context.Context, j *jobs.Job[effectArgs]) error {
		ran <- j.ID
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	id := e.enqueue(effectArgs{Name: "foreign"}).JobID
	part := ns + ":{default}:wf_part"
	rdb.Set(context.Background(), part, "x", 0)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	select {
	case err := <-done:
		if !errors.Is(err, jobs.ErrForeignKey) || !strings.Contains(err.Error(), part) {
			t.Fatalf("Run: %v, want ErrForeignKey naming %s", err, part)
		}
	case <-ran:
		cancel()
		<-done
		t.Fatal("the pool started and ran a job with a queue key of another type")
	}
	cancel()
	rdb.Del(context.Background(), part)
	e.start(p)
	if got := <-ran; got != id {
		t.Fatalf("ran %s, want %s", got, id)
	}
}
