package worker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

type giveUpArgs struct{}

func (giveUpArgs) Kind() string { return "give-up" }

// TestPermanentCancellationMidCallIsUncertain: a handler that marks the
// error of its cancelled context permanent (it gives up once its deadline
// passed) does not prove that its effect did not happen: the job ends
// uncertain, as any error after the deadline does, not dead. A permanent
// error of its own (not the context's) still ends it dead.
func TestPermanentCancellationMidCallIsUncertain(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.Maintenance.Disabled = true // nothing reconciles: the outcome stays as committed
	p := e.pool(cfg)
	if err := worker.Register(p, jobs.WorkFunc[giveUpArgs](func(ctx context.Context, j *jobs.Job[giveUpArgs]) error {
		if j.Headers["mode"] == "invalid" {
			<-ctx.Done()
			return jobs.Permanent(fmt.Errorf("account closed"))
		}
		<-ctx.Done()
		return jobs.Permanent(fmt.Errorf("charge: %w", ctx.Err()))
	})); err != nil {
		t.Fatal(err)
	}
	e.start(p)
	gaveUp := e.enqueue(giveUpArgs{}, jobs.Timeout(100*time.Millisecond))
	invalid := e.enqueue(giveUpArgs{}, jobs.Timeout(100*time.Millisecond), jobs.Header("mode", "invalid"))
	ctx := context.Background()
	for id, want := range map[string]jobs.State{gaveUp.JobID: jobs.Uncertain, invalid.JobID: jobs.Dead} {
		var rec *jobs.Record
		redistest.AwaitWithin(t, e.rdb, e.ns, "the attempt's outcome", 10*time.Second, func() bool {
			var err error
			rec, err = e.client.Inspector().Get(ctx, jobs.DefaultQueue, id)
			return err == nil && rec.State != jobs.Pending && rec.State != jobs.Running
		})
		if rec.State != want {
			t.Errorf("job %s is %s (%s), want %s", id, rec.State, rec.Reason, want)
		}
	}
}
