package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// TestPeriodicTickEnqueuedOnceAcrossAPartitionChange: a leader that
// enqueued a tick into a partitioned queue and stopped before recording it
// leaves the tick to the next leader, which enqueues it again after the
// queue's partition count changed, so its operation id routes to another
// partition: the tick is still one job (the one enqueued first).
func TestPeriodicTickEnqueuedOnceAcrossAPartitionChange(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const q, id = "laid", "laid-every-second"
	if _, err := e.client.SetPartitions(ctx, q, 3, "test", ""); err != nil {
		t.Fatal(err)
	}
	ran := make(chan string, 1000)
	pool := func() *worker.Pool {
		cfg := e.config()
		cfg.Queues = map[string]int{q: 1}
		p := e.pool(cfg)
		if err := worker.Register(p, jobs.WorkFunc[effectArgs](func(_ context.Context, j *jobs.Job[effectArgs]) error {
			ran <- j.OperationID
			return nil
		})); err != nil {
			t.Fatal(err)
		}
		if err := p.AddPeriodic(worker.Periodic(worker.Every(time.Second), effectArgs{Name: "tick"}, worker.ScheduleID(id),
			worker.WithCatchUp(worker.CatchUpAll), worker.EnqueueOptions(jobs.Queue(q)))); err != nil {
			t.Fatal(err)
		}
		return p
	}
	stop := e.start(pool())
	select {
	case <-ran:
	case <-time.After(testsignal.Timeout()):
		t.Fatalf("no tick ran; pool logs:\n%s", tail(e.logs.String(), 30))
	}
	stop()

	// The stopped leader's tick: enqueued, not recorded. It is one whose
	// operation id routes to another partition once the queue has 6.
	now, err := e.ledger.ServerTime(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var tick time.Time
	var op string
	for k := 2; op == ""; k++ {
		tick = now.Truncate(time.Second).Add(time.Duration(k) * time.Second)
		o := jobs.PeriodicOperationID(id, tick)
		if ledger.PartitionNames(q, 3)[ledger.RoutePartition(3, "", o, 0)] != ledger.PartitionNames(q, 6)[ledger.RoutePartition(6, "", o, 0)] {
			op = o
		}
	}
	first := e.enqueue(effectArgs{Name: "tick"}, jobs.Queue(q), jobs.OperationID(op))
	if _, err := e.client.SetPartitions(ctx, q, 6, "test", ""); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(testsignal.Timeout())
	for now, err = e.ledger.ServerTime(ctx); err == nil && !now.After(tick); now, err = e.ledger.ServerTime(ctx) {
		if time.Now().After(deadline) {
			t.Fatalf("the namespace's time did not pass the tick %v", tick)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}

	e.start(pool())
	insp := e.client.Inspector()
	for {
		s, err := insp.Schedule(ctx, id)
		if err == nil && !s.Cursor.Before(tick) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the new leader did not handle tick %v: %+v, %v; pool logs:\n%s", tick, s, err, tail(e.logs.String(), 30))
		}
		time.Sleep(20 * time.Millisecond)
	}
	names := append(ledger.PartitionNames(q, 3), ledger.PartitionNames(q, 6)...)
	has, err := e.ledger.MayHoldOperation(ctx, names, op)
	if err != nil {
		t.Fatal(err)
	}
	var holders []string
	for i, h := range has {
		if h {
			holders = append(holders, names[i])
		}
	}
	if len(holders) != 1 || holders[0] != first.Partition {
		t.Fatalf("tick %v's operation is held by %v, want %s alone (the job enqueued first)", tick, holders, first.Partition)
	}
}
