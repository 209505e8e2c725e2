package worker_test

import (
	"context"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// TestRunNamesAForeignQueueKey: a pool whose queue has a queue-level key
// of another type (written by hand, or by another application sharing the
// Redis) logs it at error level when it starts, naming the key, instead of
// leaving it to the first call writing that key to fail with WRONGTYPE; it
// starts all the same (a failing queue does not stop the others:
// TestFailingQueueDoesNotStopTheOthers), and serves the queue's jobs whose
// calls never write that key.
func TestRunNamesAForeignQueueKey(t *testing.T) {
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
	if err := rdb.Set(context.Background(), part, "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	e.start(p)
	if got := <-ran; got != id {
		t.Fatalf("ran %s, want %s", got, id)
	}
	var named bool
	for _, line := range strings.Split(e.logs.String(), "\n") {
		if strings.Contains(line, `"level":"ERROR"`) && strings.Contains(line, part) &&
			strings.Contains(line, "a queue key holds another type") {
			named = true
		}
	}
	if !named {
		t.Fatalf("no error line names the foreign key %s:\n%s", part, e.logs.String())
	}
}
