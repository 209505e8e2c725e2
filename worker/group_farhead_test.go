package worker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// TestGroupHeadScoredFarAheadIsRepaired: a fair group's head whose
// due-index score was edited by hand to +inf or 1e300 held up every other
// job of its group (nothing of the group was due, and the repair saw a
// head in the index); the maintenance leader's repair puts it back at its
// due time, logged with its id and counted, and the group's jobs all run.
// A group whose head is legitimately scheduled two years ahead is left as
// it is.
func TestGroupHeadScoredFarAheadIsRepaired(t *testing.T) {
	for _, score := range []string{"+inf", "1e300"} {
		t.Run(score, func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			q := jobs.DefaultQueue
			var rs []*jobs.Result
			for i := range 4 {
				rs = append(rs, e.enqueue(groupArgs{G: "g", N: i}))
			}
			later := e.enqueue(groupArgs{G: "later", N: 0}, jobs.RunAt(time.Now().Add(2*365*24*time.Hour)))
			due := e.ledger.StateKey(q, jobs.Pending)
			laterScore, err := e.rdb.ZScore(ctx, due, later.JobID).Result()
			if err != nil {
				t.Fatal(err)
			}
			gs, err := e.client.Inspector().Groups(ctx, q)
			if err != nil || len(gs) != 2 {
				t.Fatalf("groups %+v, %v; want g and later", gs, err)
			}
			head := rs[0].JobID
			for _, g := range gs {
				if g.Name == "g" && g.Head != head {
					t.Fatalf("group g's head %s, want its first job %s", g.Head, head)
				}
			}
			if err := e.rdb.Do(ctx, "ZADD", due, score, head).Err(); err != nil {
				t.Fatal(err)
			}
			cfg := e.config()
			cfg.Maintenance.PruneInterval = 20 * time.Millisecond
			p := e.pool(cfg)
			w := &groupWorker{}
			if err := worker.Register(p, jobs.Worker[groupArgs](w)); err != nil {
				t.Fatal(err)
			}
			stop := e.start(p)
			for _, r := range rs {
				jobstest.WaitState(t, e.ledger, q, r.JobID, jobs.Succeeded)
			}
			stop() // the leader's log is written
			ran := map[int]int{}
			for _, s := range w.starts {
				ran[s.N]++
			}
			if len(w.starts) != len(rs) || len(ran) != len(rs) {
				t.Fatalf("starts %+v, want each of group g's %d jobs once", w.starts, len(rs))
			}
			if s, err := e.rdb.ZScore(ctx, due, later.JobID).Result(); err != nil || s != laterScore {
				t.Fatalf("the head scheduled two years ahead is scored %v (%v), was %v: the repair moved it", s, err, laterScore)
			}
			st, err := e.ledger.Stats(ctx, q)
			if err != nil || st["groups_repaired"] != 1 {
				t.Fatalf("groups_repaired %d (%v), want 1 (the head scored %s only)", st["groups_repaired"], err, score)
			}
			var warned []string
			for _, line := range strings.Split(e.logs.String(), "\n") {
				if strings.Contains(line, `"level":"WARN"`) && strings.Contains(line, "put back at its due time") {
					warned = append(warned, line)
				}
			}
			if len(warned) != 1 || !strings.Contains(warned[0], `"job_id":"`+head+`"`) {
				t.Fatalf("warnings %q, want one naming %s", warned, head)
			}
		})
	}
}
