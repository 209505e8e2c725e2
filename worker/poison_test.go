package worker_test

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// A record whose state was overwritten with a value no job has, due or
// running, is moved to review (logged with its id, counted as malformed)
// for an operator, instead of being dropped from every index; the jobs
// around it run as usual.
func TestRecordWithUnknownStateGoesToReview(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.Concurrency = 8
	p := e.pool(cfg)
	started := make(chan string, 16)
	release := make(chan struct{})
	_ = worker.Register(p, jobs.WorkFunc[echoArgs](func(ctx context.Context, j *jobs.Job[echoArgs]) error {
		if j.Args.N == 1 {
			started <- j.ID
			<-release
		}
		return nil
	}))
	ctx := context.Background()
	due := e.enqueue(echoArgs{N: 0}).JobID
	e.rdb.HSet(ctx, e.ledger.JobKey("default", due), "state", "bogus")
	running := e.enqueue(echoArgs{N: 1}).JobID
	var good []string
	for range 5 {
		good = append(good, e.enqueue(echoArgs{N: 2}).JobID)
	}
	e.start(p)
	<-started
	e.rdb.HSet(ctx, e.ledger.JobKey("default", running), "state", strings.Repeat("\x00bogus", 1000))
	close(release)
	for _, id := range good {
		jobstest.WaitState(t, e.ledger, "default", id, jobs.Succeeded)
	}
	for _, id := range []string{due, running} {
		r := jobstest.WaitState(t, e.ledger, "default", id, jobs.Review)
		if r.Reason != "corrupt record: unknown state" {
			t.Fatalf("job %s: reason %q", id, r.Reason)
		}
	}
	after := e.enqueue(echoArgs{N: 2}).JobID
	jobstest.WaitState(t, e.ledger, "default", after, jobs.Succeeded)
	if n, _ := e.client.Inspector().Counts(ctx, "default"); n[jobs.Review] != 2 {
		t.Fatalf("counts %v, want 2 in review", n)
	}
	logs := e.logs.String()
	logged := 0
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, `"msg":"job record holds an unknown state (edited or corrupt): moved to review"`) &&
			(strings.Contains(line, `"job_id":"`+due+`"`) || strings.Contains(line, `"job_id":"`+running+`"`)) {
			logged++
		}
	}
	if logged != 2 {
		t.Fatalf("%d jobs logged as moved to review, want 2", logged)
	}
	if !strings.Contains(logs, `"msg":"commit rejected: the job's record is gone or corrupt; this attempt's outcome is discarded"`) {
		t.Fatal("the running job's rejected commit was not logged as a corrupt record")
	}
	if strings.Contains(logs, "bogus") {
		t.Fatal("the corrupt state's value was logged")
	}
	if v := testutil.ToFloat64(e.metric("fencedq_jobs_rejected_total")); v != 2 {
		t.Fatalf("rejected metric %v, want 2", v)
	}
}

// A due record without a kind, or with one no Kind method can return
// (edited by hand), is dead at once as malformed, not put back again and
// again for a pool that cannot exist; its kind is not echoed.
func TestRecordWithoutValidKindIsDeadAtOnce(t *testing.T) {
	e := newEnv(t)
	p := e.pool(e.config())
	_ = worker.Register(p, jobs.WorkFunc[echoArgs](func(ctx context.Context, j *jobs.Job[echoArgs]) error { return nil }))
	ctx := context.Background()
	garbage := strings.Repeat("\x01junk kind", 10000)
	records := map[string][]any{
		"bare":    {"state", "pending"},
		"garbage": {"state", "pending", "kind", garbage, "payload", `{}`},
	}
	for id, fields := range records {
		e.rdb.HSet(ctx, e.ledger.JobKey("default", id), fields...)
		e.rdb.ZAdd(ctx, e.ledger.StateKey("default", jobs.Pending), redis.Z{Score: 1, Member: id})
	}
	good := e.enqueue(echoArgs{N: 3}).JobID
	e.start(p)
	jobstest.WaitState(t, e.ledger, "default", good, jobs.Succeeded)
	for id := range records {
		r := jobstest.WaitState(t, e.ledger, "default", id, jobs.Dead)
		if r.Reason != "malformed payload" || r.Attempts != 1 || strings.Contains(r.Error, "junk") {
			t.Fatalf("%s: reason %q, %d attempts, error %.100q", id, r.Reason, r.Attempts, r.Error)
		}
	}
	if strings.Contains(e.logs.String(), "junk") {
		t.Fatal("the record's kind was logged")
	}
	if v := testutil.ToFloat64(e.metric("fencedq_jobs_rejected_total")); v != 2 {
		t.Fatalf("rejected metric %v, want 2", v)
	}
}
