package worker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// TestAbandonedHandlerDurationIsItsRunTime: a handler still running when
// the stopping pool abandons it is observed in
// fencedq_handler_duration_seconds (outcome uncertain) with the time it
// ran until then, at least the shutdown timeout, not with 0.
func TestAbandonedHandlerDurationIsItsRunTime(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.ShutdownTimeout = 100 * time.Millisecond
	p := e.pool(cfg)
	started, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	_ = worker.Register(p, jobs.WorkFunc[plainArgs](func(ctx context.Context, j *jobs.Job[plainArgs]) error {
		close(started)
		<-release // ignores ctx
		return nil
	}))
	e.enqueue(plainArgs{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	<-started
	cancel()
	if err := <-done; !errors.Is(err, worker.ErrUnsettled) {
		t.Fatalf("Run = %v, want the handler abandoned", err)
	}
	fams, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var count uint64
	var sum float64
	for _, f := range fams {
		if f.GetName() != "fencedq_handler_duration_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" && l.GetValue() == string(jobs.Uncertain) {
					count += m.GetHistogram().GetSampleCount()
					sum += m.GetHistogram().GetSampleSum()
				}
			}
		}
	}
	if count != 1 || sum < cfg.ShutdownTimeout.Seconds() {
		t.Fatalf("handler duration (uncertain): %d samples summing %.3fs, want 1 of at least the shutdown timeout (%v)", count, sum, cfg.ShutdownTimeout)
	}
}
