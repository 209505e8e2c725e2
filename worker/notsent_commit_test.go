package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// A stopping pool whose Redis went away (its connections closed, every
// dial refused) never sends its last completion: nothing was applied,
// which the pool says (an error log naming the job, Run's error naming it
// as not sent, not as a commit with an unknown result), and it does not
// spend the unknown-outcome retry budget on a call that never left: a few
// tries, then the job is left to its lease's expiry, still running under
// the attempt's token.
func TestStoppingPoolReportsItsCompletionNotSent(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{AOF: true})
	ns := redistest.Namespace(t)
	e := newEnvOn(t, srv.Client(), ns)
	cfg := e.config()
	cfg.LeaseTTL = 20 * time.Second // no renewal is due while the test runs
	p := e.pool(cfg)
	hooks := worker.InitHooks(p, t)
	started := make(chan struct{}, 1)
	release := make(chan struct{})
	_ = worker.Register(p, jobs.WorkFunc[echoArgs](func(ctx context.Context, j *jobs.Job[echoArgs]) error {
		started <- struct{}{}
		<-release
		return nil
	}))
	runCtx, stop := context.WithCancel(context.Background())
	defer stop()
	done := make(chan error, 1)
	go func() { done <- p.Run(runCtx) }()
	res := e.enqueue(echoArgs{N: 1})
	recv(t, started, "attempt started")

	srv.Kill() // its connections close; a new one is refused
	stop()
	close(release)
	err := recv(t, done, "pool stopped")
	var se *worker.ShutdownError
	if !errors.As(err, &se) {
		t.Fatalf("Run = %v, want a *ShutdownError naming the job whose completion was never sent", err)
	}
	if len(se.Jobs) != 1 || se.Jobs[0].ID != res.JobID || se.Jobs[0].Reason != worker.UnsettledCommitNotSent || se.Jobs[0].Token == 0 {
		t.Errorf("ShutdownError jobs %+v, want job %s (%s) with its token", se.Jobs, res.JobID, worker.UnsettledCommitNotSent)
	}

	tries := hooks.CommitTried.Drain()
	if len(tries) == 0 || len(tries) > worker.RefusedCommitTries {
		t.Errorf("the completion never sent was tried %d times, want 1 to %d", len(tries), worker.RefusedCommitTries)
	}
	for i, errs := range tries {
		if len(errs) != 1 || !ledger.NotSent(errs[0]) {
			t.Errorf("try %d: errors %v, want one that never reached Redis", i+1, errs)
		}
	}

	if n := failedCommits(t, e.reg, res.Queue, "not_sent"); n != 1 {
		t.Errorf("fencedq_commits_failed_total{result=\"not_sent\"} = %v, want 1", n)
	}

	var logged bool
	for line := range strings.SplitSeq(e.logs.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		msg, _ := rec["msg"].(string)
		if strings.Contains(msg, "unknown result") && rec["job_id"] == res.JobID {
			t.Errorf("completion never sent logged as unknown: %s", line)
		}
		if strings.HasPrefix(msg, "commit not sent") && rec["job_id"] == res.JobID && rec["level"] == "ERROR" {
			logged = true
		}
	}
	if !logged {
		t.Errorf("no error log line says job %s's commit was not sent", res.JobID)
	}

	// Nothing was applied: once Redis is back (its append-only file kept
	// every write it acknowledged), the job still runs under the
	// attempt's token, left to its lease's expiry.
	srv.Restart()
	rec, err := ledger.New(srv.Client(), ledger.Config{Namespace: ns}).Get(t.Context(), res.Queue, res.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != jobs.Running || rec.Token != se.Jobs[0].Token {
		t.Errorf("job after Redis came back %s under token %v, want running under %v", rec.State, rec.Token, se.Jobs[0].Token)
	}
}
