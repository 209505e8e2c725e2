package worker_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// noLead fails, while on, every command naming the maintenance leader
// lease: its pool can neither keep nor take the leadership, and runs on
// otherwise (heartbeats, claims).
type noLead struct{ on atomic.Bool }

func (h *noLead) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *noLead) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.on.Load() && h.names(cmd) {
			cmd.SetErr(errors.New("connection reset by peer"))
			return cmd.Err()
		}
		return next(ctx, cmd)
	}
}

func (h *noLead) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if h.on.Load() {
			for _, c := range cmds {
				if h.names(c) {
					for _, c := range cmds {
						c.SetErr(errors.New("connection reset by peer"))
					}
					return cmds[0].Err()
				}
			}
		}
		return next(ctx, cmds)
	}
}

func (h *noLead) names(cmd redis.Cmder) bool {
	for _, a := range cmd.Args() {
		if strings.Contains(fmt.Sprint(a), ledger.LeaderResource) {
			return true
		}
	}
	return false
}

// TestScheduleOfStoppedNewerPoolIsTakenOver: pool a defines schedule
// "report"; pool b, started later, defines it with another job and
// records its definition while it leads. Once b stops, a (older, still
// live) leads again: no live pool defines the recorded definition any
// more, so a records its own, the conflict ends and its ticks go on
// (they stopped for ever: a cannot run b's job).
func TestScheduleOfStoppedNewerPoolIsTakenOver(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	rdbA := redis.NewClient(&redis.Options{Addr: e.rdb.(*redis.Client).Options().Addr})
	t.Cleanup(func() { _ = rdbA.Close() })
	hook := &noLead{}
	rdbA.AddHook(hook)
	pool := func(rdb redis.UniversalClient, id, report string) *worker.Pool {
		t.Helper()
		cfg := e.config()
		cfg.WorkerID = id
		p, err := worker.NewPool(rdb, cfg)
		if err == nil {
			err = p.AddPeriodic(worker.Periodic(worker.Every(time.Second), tickArgs{Report: report},
				worker.ScheduleID("report"), worker.EnqueueOptions(jobs.Queue("ticks"))))
		}
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	sched := func() *jobs.Schedule {
		s, err := e.ledger.Schedule(ctx, "report")
		if err != nil && !errors.Is(err, jobs.ErrNotFound) {
			t.Fatal(err)
		}
		return s
	}
	leader := func() string {
		st, err := e.ledger.LeaderStatus(ctx)
		if err != nil || st == nil {
			return ""
		}
		return st.Leader
	}
	const bound = 30 * time.Second

	e.start(pool(rdbA, "pool-a", "a"))
	redistest.AwaitWithin(t, e.rdb, e.ns, "pool-a's definition recorded", bound, func() bool {
		s := sched()
		return s != nil && s.Owner.Pool == "pool-a"
	})
	hook.on.Store(true) // pool-a loses the leadership and cannot take it back
	stopB := e.start(pool(e.rdb, "pool-b", "b"))
	redistest.AwaitWithin(t, e.rdb, e.ns, "pool-b leading, its definition recorded", bound, func() bool {
		s := sched()
		return leader() == "pool-b" && s.Owner.Pool == "pool-b" && s.Enqueued > 0
	})
	hook.on.Store(false)
	stopB()
	stopped := sched()
	s := stopped
	redistest.AwaitWithin(t, e.rdb, e.ns, "pool-a's definition recorded again, ticking", bound, func() bool {
		s = sched()
		return s.Owner.Pool == "pool-a" && s.Conflict == nil && s.LastTick.After(stopped.LastTick)
	})
	if s.Digest == stopped.Digest || s.JobDigest == stopped.JobDigest {
		t.Fatalf("recorded %s (job %s), still pool-b's definition", s.Digest, s.JobDigest)
	}
	r, err := e.ledger.FindByOperation(ctx, jobs.PeriodicOperationID("report", s.LastTick))
	if err != nil || !strings.Contains(string(r.Args), `"a"`) {
		t.Fatalf("the newest tick's job: %+v, %v; want pool-a's", r, err)
	}
}
