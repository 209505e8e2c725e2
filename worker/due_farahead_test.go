package worker_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

type dueFarArgs struct{ N int }

func (dueFarArgs) Kind() string { return "due_far_ahead" }

// TestDueEntryScoredFarAheadIsRepaired: a plain pending job whose due-index
// entry was edited by hand to +inf or 1e300 was never claimed (the claim
// reads entries due by now) and nothing put it back; the maintenance
// leader's prune pass puts it back at its run_at (or now), logged with its
// id, and it runs. A job legitimately scheduled two years ahead by RunAt is
// left as it is.
func TestDueEntryScoredFarAheadIsRepaired(t *testing.T) {
	for _, score := range []string{"+inf", "1e300"} {
		t.Run(score, func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			q := jobs.DefaultQueue
			now := e.enqueue(dueFarArgs{N: 0})
			soon := e.enqueue(dueFarArgs{N: 1}, jobs.RunAt(time.Now().Add(50*time.Millisecond)))
			later := e.enqueue(dueFarArgs{N: 2}, jobs.RunAt(time.Now().Add(2*365*24*time.Hour)))
			due := e.ledger.StateKey(q, jobs.Pending)
			laterScore, err := e.rdb.ZScore(ctx, due, later.JobID).Result()
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range []string{now.JobID, soon.JobID} {
				if err := e.rdb.Do(ctx, "ZADD", due, score, id).Err(); err != nil {
					t.Fatal(err)
				}
			}
			cfg := e.config()
			cfg.Maintenance.PruneInterval = 20 * time.Millisecond
			p := e.pool(cfg)
			var mu sync.Mutex
			ran := map[int]int{}
			if err := worker.Register(p, jobs.WorkFunc[dueFarArgs](func(_ context.Context, j *jobs.Job[dueFarArgs]) error {
				mu.Lock()
				ran[j.Args.N]++
				mu.Unlock()
				return nil
			})); err != nil {
				t.Fatal(err)
			}
			stop := e.start(p)
			jobstest.WaitState(t, e.ledger, q, now.JobID, jobs.Succeeded)
			jobstest.WaitState(t, e.ledger, q, soon.JobID, jobs.Succeeded)
			stop() // the leader's log is written
			mu.Lock()
			if ran[0] != 1 || ran[1] != 1 || ran[2] != 0 {
				t.Fatalf("runs %v, want the two edited jobs once each and the one two years ahead none", ran)
			}
			mu.Unlock()
			if s, err := e.rdb.ZScore(ctx, due, later.JobID).Result(); err != nil || s != laterScore {
				t.Fatalf("the job scheduled two years ahead is scored %v (%v), was %v: the repair moved it", s, err, laterScore)
			}
			warned := map[string]bool{}
			for _, line := range strings.Split(e.logs.String(), "\n") {
				if strings.Contains(line, `"level":"WARN"`) && strings.Contains(line, "put back at its due time") {
					for _, id := range []string{now.JobID, soon.JobID, later.JobID} {
						if strings.Contains(line, `"job_id":"`+id+`"`) {
							if warned[id] {
								t.Errorf("%s warned of twice", id)
							}
							warned[id] = true
						}
					}
				}
			}
			if !warned[now.JobID] || !warned[soon.JobID] || warned[later.JobID] {
				t.Fatalf("warned of %v, want %s and %s only; logs:\n%s", warned, now.JobID, soon.JobID, e.logs.String())
			}
		})
	}
}
