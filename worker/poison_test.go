package worker_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
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

// A record whose attempt count or unknown-kind put-back count was edited
// to a negative or absurd number runs as if the count were unset (a count
// is never negative): no panic computing its delay takes the pool down,
// and the jobs around it run as usual.
func TestRecordWithCorruptCountsRuns(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.RetryDelay = nil // the default, exponential in the attempt
	p := e.pool(cfg)
	_ = worker.Register(p, jobs.WorkFunc[echoArgs](func(ctx context.Context, j *jobs.Job[echoArgs]) error {
		if j.Args.N == 4 {
			return errors.New("try again")
		}
		return nil
	}))
	ctx := context.Background()
	// the attempt count each edited value gives the first attempt: a
	// count reads as a whole number from 0 to 2^31 - 1
	failing := map[string]int{}
	for bad, want := range map[string]int{"-3": 1, "-1e300": 1, "nan": 1, "abc": 1, "2.5": 3} {
		id := e.enqueue(echoArgs{N: 4}).JobID
		e.rdb.HSet(ctx, e.ledger.JobKey("default", id), "attempts", bad)
		failing[id] = want
	}
	exhausted := e.enqueue(echoArgs{N: 4}).JobID
	e.rdb.HSet(ctx, e.ledger.JobKey("default", exhausted), "attempts", "1e300")
	unknown, err := e.client.EnqueueRaw(ctx, "nobody", []byte(`{}`), jobs.Unchecked())
	if err != nil {
		t.Fatal(err)
	}
	e.rdb.HSet(ctx, e.ledger.JobKey("default", unknown.JobID), "kind_defers", "-4")
	var good []string
	for range 3 {
		good = append(good, e.enqueue(echoArgs{N: 2}).JobID)
	}
	e.start(p)
	for _, id := range good {
		jobstest.WaitState(t, e.ledger, "default", id, jobs.Succeeded)
	}
	for id, want := range failing {
		r := waitRecord(t, e.rdb, e.ledger, id, func(r *jobs.Record) bool { return r.State == jobs.Pending && r.Attempts != 0 })
		if r.Attempts != want {
			t.Errorf("job %s: %d attempts after its first, want %d", id, r.Attempts, want)
		}
	}
	if r := jobstest.WaitState(t, e.ledger, "default", exhausted, jobs.Dead); r.Reason != "retries exhausted" {
		t.Errorf("job with its attempts used up: reason %q", r.Reason)
	}
	r := waitRecord(t, e.rdb, e.ledger, unknown.JobID, func(r *jobs.Record) bool { return r.KindDefers != -4 })
	if r.KindDefers != 1 || r.State != jobs.Pending {
		t.Errorf("unknown kind: %d put-backs, state %s; want 1, pending", r.KindDefers, r.State)
	}
}

// waitRecord waits for ok to hold for the record of job id of queue
// default, reading it again at each change of its key.
func waitRecord(t *testing.T, rdb redis.UniversalClient, l *ledger.Ledger, id string, ok func(*jobs.Record) bool) *jobs.Record {
	t.Helper()
	var r *jobs.Record
	redistest.Await(t, rdb, l.JobKey("default", id), "job "+id+"'s record", func() bool {
		var err error
		r, err = l.Get(context.Background(), "default", id)
		if err != nil {
			t.Fatal(err)
		}
		return ok(r)
	})
	return r
}

// A record whose limit or rate fields were edited by hand into something
// no limit or rate has goes to review (logged with its id, counted as
// malformed) instead of failing the claim it came in, which had already
// taken the claim's other jobs off the due index: they run as usual.
func TestRecordWithCorruptFlowFieldsGoesToReview(t *testing.T) {
	e := newEnv(t)
	p := e.pool(e.config())
	_ = worker.Register(p, jobs.WorkFunc[echoArgs](func(ctx context.Context, j *jobs.Job[echoArgs]) error { return nil }))
	ctx := context.Background()
	var good []string
	for range 3 {
		good = append(good, e.enqueue(echoArgs{N: 1}).JobID)
	}
	corrupt := map[string][]string{ // the id of each edited record, and the fields edited out
		e.enqueue(echoArgs{N: 2}, jobs.Limit("export", 2), jobs.Rate("api", 5, time.Second)).JobID: {"lmax"},
		e.enqueue(echoArgs{N: 3}, jobs.Limit("export", 2), jobs.Rate("api", 5, time.Second)).JobID: {"rper"},
	}
	for id, fields := range corrupt {
		e.rdb.HDel(ctx, e.ledger.JobKey("default", id), fields...)
	}
	for range 3 {
		good = append(good, e.enqueue(echoArgs{N: 4}).JobID)
	}
	e.start(p)
	for _, id := range good {
		jobstest.WaitState(t, e.ledger, "default", id, jobs.Succeeded)
	}
	for id := range corrupt {
		r := jobstest.WaitState(t, e.ledger, "default", id, jobs.Review)
		if r.Reason != "corrupt record: flow control fields" {
			t.Errorf("job %s: reason %q", id, r.Reason)
		}
		if !strings.Contains(e.logs.String(), `"job_id":"`+id+`"`) {
			t.Errorf("job %s was not logged", id)
		}
	}
	if v := testutil.ToFloat64(e.metric("fencedq_jobs_rejected_total")); v != 2 {
		t.Fatalf("rejected metric %v, want 2", v)
	}
}

// A handler that panics with a huge value (a response body quoted whole)
// is logged with the value cut as a returned error's text is
// (ledger.MaxErrorLen), not the whole of it.
func TestHugePanicValueIsCutInTheLog(t *testing.T) {
	e := newEnv(t)
	p := e.pool(e.config())
	_ = worker.Register(p, jobs.WorkFunc[echoArgs](func(ctx context.Context, j *jobs.Job[echoArgs]) error {
		panic(strings.Repeat("body ", 1<<18))
	}))
	id := e.enqueue(echoArgs{}, jobs.MaxRetries(0)).JobID
	e.start(p)
	jobstest.WaitState(t, e.ledger, "default", id, jobs.Dead)
	logged := false
	for _, line := range strings.Split(e.logs.String(), "\n") {
		if strings.Contains(line, `"msg":"handler panicked"`) {
			logged = strings.Contains(line, `"job_id":"`+id+`"`) && strings.Contains(line, "bytes cut")
			if len(line) > 4*ledger.MaxErrorLen+64<<10 {
				t.Fatalf("the panic was logged in %d bytes", len(line))
			}
		}
	}
	if !logged {
		t.Fatal("the panic was not logged, cut, with the job id")
	}
}

// A handler's huge error (a response body quoted whole) is cut in the log
// line of a commit the ledger rejects too, as in every other line that
// quotes it.
func TestHugeErrorOfARejectedCommitIsCutInTheLog(t *testing.T) {
	e := newEnv(t)
	p := e.pool(e.config())
	started := make(chan string, 1)
	release := make(chan struct{})
	_ = worker.Register(p, jobs.WorkFunc[echoArgs](func(ctx context.Context, j *jobs.Job[echoArgs]) error {
		started <- j.ID
		<-release
		return errors.New(strings.Repeat("body ", 1<<18))
	}))
	id := e.enqueue(echoArgs{}).JobID
	e.start(p)
	<-started
	// The record changes under the attempt: its commit is rejected.
	e.rdb.HSet(context.Background(), e.ledger.JobKey("default", id), "state", "bogus")
	close(release)
	jobstest.WaitState(t, e.ledger, "default", id, jobs.Review)
	redistest.Await(t, e.rdb, e.ns, "the rejected commit's log line", func() bool {
		return strings.Contains(e.logs.String(), `"msg":"commit rejected`)
	})
	for _, line := range strings.Split(e.logs.String(), "\n") {
		if !strings.Contains(line, `"msg":"commit rejected`) {
			continue
		}
		if len(line) > 2*ledger.MaxErrorLen || !strings.Contains(line, "bytes cut") || !strings.Contains(line, `"job_id":"`+id+`"`) {
			t.Fatalf("the rejected commit was logged in %d bytes, want the job id and its error cut: %.300s", len(line), line)
		}
	}
}
