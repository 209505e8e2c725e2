package worker_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// TestRemoveScheduleLivePoolsDefine: removing a schedule that a live pool
// still defines is refused with ErrScheduleConflict naming the pool (its
// leader would record it again at once, its history lost); the record is
// kept. Once the pool has left, the removal goes through. A pool with
// periodic jobs disabled never ticks them, so it does not hold a removal.
func TestRemoveScheduleLivePoolsDefine(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	const id = "report"
	cfg := e.config()
	cfg.WorkerID = "pool-reports"
	p := e.pool(cfg)
	if err := p.AddPeriodic(worker.Periodic(worker.Every(time.Hour), tickArgs{Report: "r"}, worker.ScheduleID(id))); err != nil {
		t.Fatal(err)
	}
	idle := e.config()
	idle.WorkerID = "pool-idle"
	idle.Maintenance.PeriodicDisabled = true
	q := e.pool(idle)
	if err := q.AddPeriodic(worker.Periodic(worker.Every(time.Hour), tickArgs{Report: "r"}, worker.ScheduleID(id))); err != nil {
		t.Fatal(err)
	}
	stop := e.start(p)
	redistest.Await(t, e.rdb, e.ns, "the schedule registered", func() bool {
		_, err := e.ledger.Schedule(ctx, id)
		return err == nil
	})
	stopIdle := e.start(q) // not the leader: pool-reports leads
	redistest.Await(t, e.rdb, e.ns, "both pools listed", func() bool {
		pools, err := e.client.Inspector().Pools(ctx)
		return err == nil && len(pools) == 2
	})

	found, err := e.client.RemoveSchedule(ctx, id, "test", "")
	if !errors.Is(err, jobs.ErrScheduleConflict) || found || !strings.Contains(err.Error(), "pool-reports") ||
		strings.Contains(err.Error(), "pool-idle") {
		t.Fatalf("removing a schedule a live pool defines: %v, %v; want jobs.ErrScheduleConflict naming pool-reports only", found, err)
	}
	if _, err := e.ledger.Schedule(ctx, id); err != nil {
		t.Fatalf("the refused removal deleted the record: %v", err)
	}

	stop()
	if found, err := e.client.RemoveSchedule(ctx, id, "test", ""); err != nil || !found {
		t.Fatalf("removing it once no live pool ticks it: %v, %v", found, err)
	}
	stopIdle()
}
