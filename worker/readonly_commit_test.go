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

// A stopping pool left on a primary a failover demoted has its last
// completion refused with READONLY: nothing was applied, which the pool
// says (a log line naming the job, Run's error naming it as refused, not
// as a commit with an unknown result), and it does not spend the
// unknown-outcome retry budget on a write Redis refuses: a few tries (a
// client that reconnects reaches the new primary), then the job is left
// to lease expiry, still running under the attempt's token.
func TestStoppingPoolOnADemotedPrimaryReportsItsCompletionRefused(t *testing.T) {
	a := redistest.Start(t, redistest.Options{})
	b := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	e := newEnvOn(t, a.Client(), ns)
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

	demote(t, a, b)

	stop()
	close(release)
	err := recv(t, done, "pool stopped")
	var se *worker.ShutdownError
	if !errors.As(err, &se) {
		t.Fatalf("Run = %v, want a *ShutdownError naming the job whose completion was refused", err)
	}
	if len(se.Jobs) != 1 || se.Jobs[0].ID != res.JobID || se.Jobs[0].Reason != worker.UnsettledCommitRefused || se.Jobs[0].Token == 0 {
		t.Errorf("ShutdownError jobs %+v, want job %s (%s) with its token", se.Jobs, res.JobID, worker.UnsettledCommitRefused)
	}

	tries := hooks.CommitTried.Drain()
	if len(tries) == 0 || len(tries) > worker.RefusedCommitTries {
		t.Errorf("the refused completion was tried %d times, want 1 to %d", len(tries), worker.RefusedCommitTries)
	}
	for i, errs := range tries {
		if len(errs) != 1 || !errors.Is(errs[0], jobs.ErrWriteRefused) {
			t.Errorf("try %d: errors %v, want one matching jobs.ErrWriteRefused", i+1, errs)
		}
	}

	if n := failedCommits(t, e.reg, res.Queue, "refused"); n != 1 {
		t.Errorf("fencedq_commits_failed_total{result=\"refused\"} = %v, want 1", n)
	}

	var logged bool
	for line := range strings.SplitSeq(e.logs.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		msg, _ := rec["msg"].(string)
		if strings.Contains(msg, "unknown result") && rec["job_id"] == res.JobID {
			t.Errorf("refused completion logged as unknown: %s", line)
		}
		if strings.HasPrefix(msg, "commit refused by Redis") && rec["job_id"] == res.JobID && rec["level"] == "ERROR" {
			logged = true
		}
	}
	if !logged {
		t.Errorf("no error log line says job %s's commit was refused by Redis", res.JobID)
	}

	// Nothing was applied: on the promoted node the job still runs under
	// the attempt's token, left to its lease's expiry.
	rec, err := ledger.New(b.Client(), ledger.Config{Namespace: ns}).Get(t.Context(), res.Queue, res.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != jobs.Running || rec.Token != se.Jobs[0].Token {
		t.Errorf("job on the promoted node %s under token %v, want running under %v", rec.State, rec.Token, se.Jobs[0].Token)
	}
}
