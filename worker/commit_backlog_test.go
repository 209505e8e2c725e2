package worker_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

type backlogArgs struct{ Hang bool }

func (backlogArgs) Kind() string { return "backlog" }

// With commits stalled (every completion's reply held), outcomes pile up
// beyond the completer's buffer: the executor handing the next one over
// blocked on the full buffer while holding the completer's lock, and a
// shutdown that then abandoned a handler still running blocked on that
// lock too, so Run never returned, whatever ShutdownTimeout and
// ShutdownGrace said. An outcome beyond the buffer now waits in the
// completer with its slot (no new claim takes the slot's place), the
// executor goes on, and Run returns within its bounds naming what it left
// unsettled; no outcome is lost: each is committed or named.
func TestStalledCommitsDoNotHoldExecutorsOrShutdown(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	px := redistest.StartProxy(t, srv.Addr)
	e := newEnvOn(t, srv.Client(), redistest.Namespace(t))
	cfg := e.config()
	cfg.Concurrency = 2
	cfg.ShutdownTimeout = 100 * time.Millisecond
	cfg.LeaseTTL = time.Minute
	p, err := worker.NewPool(px.Client(nil), cfg)
	if err != nil {
		t.Fatal(err)
	}
	hung, ran := make(chan string, 1), make(chan string, 100)
	free := make(chan struct{})
	var freeOnce sync.Once
	unblock := func() { freeOnce.Do(func() { close(free) }) }
	t.Cleanup(unblock)
	if err := worker.Register(p, jobs.WorkFunc[backlogArgs](func(_ context.Context, j *jobs.Job[backlogArgs]) error {
		if j.Args.Hang {
			hung <- j.ID
			<-free // ignores its context: abandoned at shutdown
			return nil
		}
		ran <- j.ID
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	held := px.DelayReply(release, "_complete\r\n")
	for range 200 {
		px.DelayReply(release, "_complete\r\n")
	}
	hang := e.enqueue(backlogArgs{Hang: true}).JobID
	cancel, done := runPool(p)
	defer cancel()
	<-hung
	for range 10 {
		e.enqueue(backlogArgs{})
	}
	select {
	case <-held:
	case <-time.After(testsignal.Timeout()):
		t.Fatal("no completion was sent")
	}
	// The first outcome in flight, the buffer (2 × Concurrency) full and
	// one more handed over.
	var fast []string
	for len(fast) < 6 {
		select {
		case id := <-ran:
			fast = append(fast, id)
		case <-time.After(testsignal.Timeout()):
			t.Fatalf("%d handlers ran, want 6", len(fast))
		}
	}
	cancel()
	err = waitRun(t, done)
	var se *worker.ShutdownError
	if !errors.As(err, &se) {
		t.Fatalf("Run: %v; want a ShutdownError", err)
	}
	named := map[string]bool{}
	for _, u := range se.Jobs {
		named[u.ID] = true
	}
	if !named[hang] {
		t.Fatalf("the abandoned job is not named: %+v", se.Jobs)
	}
	releaseOnce.Do(func() { close(release) })
	unblock()
	for _, id := range fast {
		if named[id] {
			continue
		}
		if r, err := e.client.Inspector().Get(context.Background(), jobs.DefaultQueue, id); err != nil || r.State != jobs.Succeeded {
			t.Fatalf("job %s neither committed nor named unsettled: %+v, %v", id, r, err)
		}
	}
}
