package worker_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// TestCommitNotSentLeavesTheCauseToTheError: a completion that never left
// the process because the pool's Redis client was closed (Redis itself up
// all along) is logged as not sent, without claiming that Redis could not
// be reached: the cause is the error's own text ("client is closed"), as
// jobs.ErrNotSent leaves it to the error.
func TestCommitNotSentLeavesTheCauseToTheError(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	ns := redistest.Namespace(t)
	e := newEnvOn(t, rdb, ns)
	cfg := e.config()
	cfg.LeaseTTL = 20 * time.Second // no renewal is due while the test runs
	p := e.pool(cfg)
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

	_ = rdb.Close() // Redis stays up; the client can send nothing
	stop()
	close(release)
	recv(t, done, "pool stopped")

	var logged bool
	for line := range strings.SplitSeq(e.logs.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		msg, _ := rec["msg"].(string)
		if !strings.HasPrefix(msg, "commit not sent") || rec["job_id"] != res.JobID {
			continue
		}
		logged = true
		if strings.Contains(msg, "could not be reached") {
			t.Errorf("a commit not sent by a closed client is said to be one Redis could not be reached for: %s", line)
		}
		if errText, _ := rec["error"].(string); !strings.Contains(errText, "closed") {
			t.Errorf("the log line does not carry the cause (the closed client): %s", line)
		}
	}
	if !logged {
		t.Errorf("no log line says job %s's commit was not sent", res.JobID)
	}
}
