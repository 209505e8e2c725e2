package maintenance

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fencedq/fencedq/internal/metrics"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/lease"
)

// TestLeaderTasks: the leader runs the five core services, the periodic
// service only with schedules, and one relay per outbox, each under its
// own name and interval.
func TestLeaderTasks(t *testing.T) {
	f := newFixture(t)
	names := func(l *Leader) (out []string) {
		for _, task := range l.tasks() {
			out = append(out, task.service.name)
		}
		return out
	}
	cfg := f.config()
	cfg.PruneInterval = 2 * time.Hour
	if got, want := names(f.leader(cfg)), []string{metrics.ServiceExpirer, metrics.ServiceResolver,
		metrics.ServiceStatus, metrics.ServicePruner, metrics.ServiceHandover}; !slices.Equal(got, want) {
		t.Fatalf("tasks %v, want %v", got, want)
	}
	cfg.Periodic = []Periodic{tickSchedule("ticks", "ticks")}
	none := func(context.Context) <-chan struct{} { return nil }
	cfg.Outboxes = []Outbox{{Name: "a", Listen: none}, {Name: "b", Listen: none}}
	l := f.leader(cfg)
	if got, want := names(l), []string{metrics.ServiceExpirer, metrics.ServiceResolver, metrics.ServiceStatus,
		metrics.ServicePruner, metrics.ServiceHandover, metrics.ServicePeriodic, metrics.ServiceRelay, metrics.ServiceRelay}; !slices.Equal(got, want) {
		t.Fatalf("tasks %v, want %v", got, want)
	}
	for _, task := range l.tasks() {
		want := cfg.Interval
		if task.service.name == metrics.ServicePruner {
			want = cfg.PruneInterval
		}
		if task.interval != want {
			t.Errorf("%s runs every %v, want %v", task.service.name, task.interval, want)
		}
	}
}

// TestTaskLoopSurvivesFailedPasses: a pass that panics and a pass that
// fails are each logged and counted under the service, and the loop goes
// on to the next pass (here on a wake-up: the interval is an hour).
func TestTaskLoopSurvivesFailedPasses(t *testing.T) {
	f := newFixture(t)
	l := f.leader(f.config())
	var passes testsignal.Signal[int]
	passes.Init(t, "pass ran")
	wake := make(chan struct{})
	n := 0
	task := task{service: l.status.service, interval: time.Hour,
		runOnce: func(context.Context, lease.Token) error {
			n++
			passes.Signal(n)
			switch n {
			case 1:
				panic("boom")
			case 2:
				return errors.New("redis went away")
			}
			return nil
		},
		wake: func(context.Context) <-chan struct{} { return wake }}
	ctx, cancel := context.WithCancel(f.ctx)
	var wg sync.WaitGroup
	wg.Go(func() { task.loop(ctx, 7) })
	for want := 1; want <= 3; want++ {
		if got := passes.WaitOrTimeout(); got != want {
			t.Fatalf("pass %d ran as pass %d", want, got)
		}
		if want < 3 {
			wake <- struct{}{} // accepted once the failed pass is logged and counted
		}
	}
	cancel()
	wg.Wait()
	if v := testutil.ToFloat64(f.metrics.MaintenanceErrors.WithLabelValues(metrics.ServiceStatus)); v != 2 {
		t.Fatalf("status errors %v, want 2", v)
	}
	if !f.logged("maintenance pass failed", `"service":"status"`, "panic: boom") ||
		!f.logged("maintenance pass failed", `"service":"status"`, "redis went away") {
		t.Fatalf("the failed passes were not logged:\n%s", f.logs.String())
	}
}

// TestLeaderRun: a leader elected through Run runs its services (the
// status it publishes names it); once Run ends, its gauges are cleared.
func TestLeaderRun(t *testing.T) {
	f := newFixture(t)
	cfg := f.config()
	l := f.leader(cfg)
	f.enqueue("work") // a queue to count
	ctx, cancel := context.WithCancel(f.ctx)
	var wg sync.WaitGroup
	wg.Go(func() { l.Run(ctx) })
	redistest.Await(t, f.rdb, f.ns, "the leader's status and job counts", func() bool {
		st, err := f.ledger.LeaderStatus(f.ctx)
		return err == nil && st != nil && st.Leader == cfg.WorkerID
	})
	if testutil.ToFloat64(f.metrics.Leader) != 1 || testutil.CollectAndCount(f.metrics.Jobs) == 0 {
		t.Fatalf("leading: leader gauge %v, %d job gauges", testutil.ToFloat64(f.metrics.Leader),
			testutil.CollectAndCount(f.metrics.Jobs))
	}
	cancel()
	wg.Wait()
	if testutil.ToFloat64(f.metrics.Leader) != 0 || testutil.CollectAndCount(f.metrics.Jobs) != 0 {
		t.Fatalf("after Run: leader gauge %v, %d job gauges left", testutil.ToFloat64(f.metrics.Leader),
			testutil.CollectAndCount(f.metrics.Jobs))
	}
}
