package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redisserver"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// putBackReason is the reason a stopping pool's put-back of its last
// claim carries (the text its call sends).
const putBackReason = "the pool stopped before the attempt started"

// faultAtClaim runs fault once the pool's claim (a script call naming its
// WorkerID) was answered, then ends the pool's Run context, and counts
// the put-back calls that follow.
type faultAtClaim struct {
	owner    string
	fault    func() error
	stop     context.CancelFunc
	once     sync.Once
	faultErr error
	putBacks atomic.Int32
}

func (h *faultAtClaim) around(cmds []redis.Cmder, next func() error) error {
	for _, cmd := range cmds {
		if isScriptCall(cmd) && slices.Contains(cmd.Args(), any(putBackReason)) {
			h.putBacks.Add(1)
		}
	}
	err := next()
	for _, cmd := range cmds {
		if isScriptCall(cmd) && slices.Contains(cmd.Args(), any(h.owner)) {
			h.once.Do(func() {
				h.faultErr = h.fault()
				h.stop()
			})
		}
	}
	return err
}

func (h *faultAtClaim) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *faultAtClaim) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		return h.around([]redis.Cmder{cmd}, func() error { return next(ctx, cmd) })
	}
}

func (h *faultAtClaim) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		return h.around(cmds, func() error { return next(ctx, cmds) })
	}
}

// demoteTo makes the primary at a a replica of b once b holds a's data
// and is promoted: a then refuses every write with READONLY. It reports
// errors instead of failing the test, for a caller off the test's
// goroutine.
func demoteTo(a, b *redistest.Server) error {
	ctx, cancel := context.WithTimeout(context.Background(), testsignal.Timeout())
	defer cancel()
	ac, bc := redis.NewClient(&redis.Options{Addr: a.Addr}), redis.NewClient(&redis.Options{Addr: b.Addr})
	defer ac.Close()
	defer bc.Close()
	ahost, aport, _ := net.SplitHostPort(a.Addr)
	bhost, bport, _ := net.SplitHostPort(b.Addr)
	if err := bc.ReplicaOf(ctx, ahost, aport).Err(); err != nil {
		return err
	}
	if err := redisserver.SyncReplicas(ctx, a.Addr, 1); err != nil {
		return err
	}
	if err := bc.ReplicaOf(ctx, "NO", "ONE").Err(); err != nil {
		return err
	}
	return ac.ReplicaOf(ctx, bhost, bport).Err()
}

// A stopping pool puts back the jobs it claimed as it stopped. When that
// put-back certainly applied nothing (Redis refused it: a primary a
// failover demoted answers READONLY; or it was never sent: Redis is gone
// and refuses dials), the pool says so (a warning naming the jobs, Run's
// error naming each as refused or not sent, not as a commit with an
// unknown result) and does not spend the unknown-outcome retry budget on
// it: a few tries, then the jobs are left to their leases' expiry, still
// running under the claim's token, never started here.
func TestStoppingPoolReportsItsPutBackRefusedOrNotSent(t *testing.T) {
	for _, tc := range []struct {
		name   string
		reason string
		result string // of fencedq_commits_failed_total
		logged string
	}{
		{"demoted primary", worker.UnsettledCommitRefused, "refused", "Redis refused the write"},
		{"redis gone", worker.UnsettledCommitNotSent, "not_sent", "never reached Redis"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Only a Redis that is killed needs its writes back from disk;
			// a demoted one keeps them on the node promoted.
			a := redistest.Start(t, redistest.Options{AOF: tc.reason == worker.UnsettledCommitNotSent})
			b := redistest.Start(t, redistest.Options{})
			ns := redistest.Namespace(t)
			e := newEnvOn(t, a.Client(), ns)
			cfg := e.config()
			cfg.WorkerID = "faults-at-claim"
			cfg.LeaseTTL = 20 * time.Second // the put-back's budget would be commitTimeout
			cfg.Maintenance.Disabled = true // its leader lease names the WorkerID too
			res := e.enqueue(plainArgs{N: 1})

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			fault := func() error { return demoteTo(a, b) }
			if tc.reason == worker.UnsettledCommitNotSent {
				fault = func() error { a.Kill(); return nil }
			}
			hook := &faultAtClaim{owner: cfg.WorkerID, fault: fault, stop: cancel}
			rdb := a.Client()
			rdb.AddHook(hook)
			p, err := worker.NewPool(rdb, cfg)
			if err != nil {
				t.Fatal(err)
			}
			ran := make(chan struct{}, 1)
			if err := worker.Register(p, jobs.WorkFunc[plainArgs](func(context.Context, *jobs.Job[plainArgs]) error {
				ran <- struct{}{}
				return nil
			})); err != nil {
				t.Fatal(err)
			}
			err = p.Run(ctx)
			if hook.faultErr != nil {
				t.Fatal(hook.faultErr)
			}
			var se *worker.ShutdownError
			if !errors.As(err, &se) {
				t.Fatalf("Run = %v, want a *ShutdownError naming the job it could not put back", err)
			}
			if len(se.Jobs) != 1 || se.Jobs[0].ID != res.JobID || se.Jobs[0].Reason != tc.reason || se.Jobs[0].Token == 0 {
				t.Errorf("ShutdownError jobs %+v, want job %s (%s) with its token", se.Jobs, res.JobID, tc.reason)
			}
			if n := hook.putBacks.Load(); n == 0 || n > worker.RefusedCommitTries {
				t.Errorf("the put-back was tried %d times, want 1 to %d", n, worker.RefusedCommitTries)
			}
			select {
			case <-ran:
				t.Error("a job claimed by a stopping pool ran")
			default:
			}

			if n := failedCommits(t, e.reg, res.Queue, tc.result); n != 1 {
				t.Errorf("fencedq_commits_failed_total{result=%q} = %v, want 1", tc.result, n)
			}

			var logged bool
			for line := range strings.SplitSeq(e.logs.String(), "\n") {
				var rec map[string]any
				if json.Unmarshal([]byte(line), &rec) != nil {
					continue
				}
				msg, _ := rec["msg"].(string)
				ids, _ := rec["job_ids"].([]any)
				if strings.HasPrefix(msg, "claimed jobs not started could not be put back") && slices.Contains(ids, any(res.JobID)) {
					if strings.Contains(msg, tc.logged) {
						logged = true
					} else {
						t.Errorf("put-back that applied nothing logged as: %s", line)
					}
				}
			}
			if !logged {
				t.Errorf("no log line names job %s's put-back as %q", res.JobID, tc.logged)
			}

			// Nothing was applied: the job still runs under the claim's
			// token (on the promoted node, or on Redis back from its
			// append-only file), left to its lease's expiry.
			read := b.Client()
			if tc.reason == worker.UnsettledCommitNotSent {
				a.Restart()
				read = a.Client()
			}
			rec, err := ledger.New(read, ledger.Config{Namespace: ns}).Get(t.Context(), res.Queue, res.JobID)
			if err != nil {
				t.Fatal(err)
			}
			if rec.State != jobs.Running || rec.Token != se.Jobs[0].Token {
				t.Errorf("job %s under token %v, want running under %v", rec.State, rec.Token, se.Jobs[0].Token)
			}
		})
	}
}
