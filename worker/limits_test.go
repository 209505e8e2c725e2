package worker_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// limitArgs is a job under a concurrency limit (Key, Max) and, when RateMax
// is set, a rate limit; its handler holds the permit for HoldMS.
type limitArgs struct {
	Key       string `json:"key"`
	Max       int    `json:"max"`
	HoldMS    int    `json:"hold_ms"`
	RateKey   string `json:"rate_key,omitempty"`
	RateMax   int    `json:"rate_max,omitempty"`
	RatePerMS int    `json:"rate_per_ms,omitempty"`
}

func (limitArgs) Kind() string { return "limited" }

func (a limitArgs) Limit() (string, int) { return a.Key, a.Max }

func (a limitArgs) RateLimit() (string, int, time.Duration) {
	return a.RateKey, a.RateMax, time.Duration(a.RatePerMS) * time.Millisecond
}

// limitWorker writes what each attempt does to one Redis list, whose order
// is the order the events happened in across every process: "start",
// then "act ok" or "act stale" (a fenced write: the attempt's progress,
// refused once another attempt took the job), then "end".
type limitWorker struct {
	rdb  redis.UniversalClient
	ns   string
	proc string
}

func (w *limitWorker) logKey() string { return w.ns + ":test:limitlog" }

func (w *limitWorker) log(ctx context.Context, j *jobs.Job[limitArgs], what string) {
	w.rdb.RPush(context.WithoutCancel(ctx), w.logKey(), fmt.Sprintf("%s %s %s %d %s", what, j.Args.Key, j.ID, j.Token, w.proc))
}

func (w *limitWorker) Work(ctx context.Context, j *jobs.Job[limitArgs]) error {
	w.log(ctx, j, "start")
	// The hold is a sleep on purpose: a paused process must find its
	// permit reclaimed when it resumes (not cut short by the context).
	time.Sleep(time.Duration(j.Args.HoldMS) * time.Millisecond)
	if err := jobs.Progress(context.WithoutCancel(ctx), 1, 1, "act"); err != nil {
		w.log(ctx, j, "act-stale")
	} else {
		w.log(ctx, j, "act-ok")
	}
	w.log(ctx, j, "end")
	return nil
}

// Reconcile says a reclaimed attempt's effect did not happen, so the job
// runs again under a new token.
func (w *limitWorker) Reconcile(context.Context, *jobs.Job[limitArgs]) (jobs.Verdict, error) {
	return jobs.NotApplied, nil
}

// limitEvent is one line of the handlers' log.
type limitEvent struct{ what, key, job, token, proc string }

func readLimitLog(t *testing.T, rdb redis.UniversalClient, ns string) []limitEvent {
	t.Helper()
	lines, err := rdb.LRange(context.Background(), ns+":test:limitlog", 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]limitEvent, len(lines))
	for i, l := range lines {
		f := strings.Fields(l)
		out[i] = limitEvent{f[0], f[1], f[2], f[3], f[4]}
	}
	return out
}

// maxHolders replays the log and returns, per key, the most attempts that
// were between "start" and "end" at once, counting only attempts whose
// fenced write was accepted (a fenced-out attempt holds nothing).
func maxHolders(events []limitEvent) map[string]int {
	stale := map[string]bool{}
	for _, e := range events {
		if e.what == "act-stale" {
			stale[e.job+"/"+e.token] = true
		}
	}
	cur, most := map[string]int{}, map[string]int{}
	for _, e := range events {
		if stale[e.job+"/"+e.token] {
			continue
		}
		switch e.what {
		case "start":
			cur[e.key]++
			most[e.key] = max(most[e.key], cur[e.key])
		case "end":
			cur[e.key]--
		}
	}
	return most
}

func limitCount(events []limitEvent, what string) int {
	n := 0
	for _, e := range events {
		if e.what == what {
			n++
		}
	}
	return n
}

// TestLimitAcrossProcesses runs three pools in separate processes and one
// here on jobs of four keys limited to 2 each: the handlers' log never shows
// more than 2 holders of a key, every job ran once, and held-back jobs were
// parked, never claimed (each job has exactly one attempt).
func TestLimitAcrossProcesses(t *testing.T) {
	e := newEnv(t)
	addr := e.rdb.(*redis.Client).Options().Addr
	for i := range 3 {
		startHelper(t, fmt.Sprintf("limit-%d", i), addr, e.ns)
	}
	cfg := e.config()
	cfg.Concurrency = 8
	p := e.pool(cfg)
	if err := worker.Register(p, jobs.Worker[limitArgs](&limitWorker{rdb: e.rdb, ns: e.ns, proc: "here"})); err != nil {
		t.Fatal(err)
	}
	const perKey, keys = 12, 4
	var ids []string
	for i := range perKey * keys {
		r := e.enqueue(limitArgs{Key: fmt.Sprintf("acct:%d", i%keys), Max: 2, HoldMS: 20})
		ids = append(ids, r.JobID)
	}
	e.start(p)
	for _, id := range ids {
		rec := jobstest.WaitState(t, e.ledger, jobs.DefaultQueue, id, jobs.Succeeded)
		if rec.Attempts != 1 {
			t.Errorf("job %s: %d attempts, want 1 (a held-back job consumes none)", id, rec.Attempts)
		}
	}
	events := readLimitLog(t, e.rdb, e.ns)
	if n := limitCount(events, "act-ok"); n != perKey*keys {
		t.Fatalf("%d accepted acts, want %d", n, perKey*keys)
	}
	procs := map[string]bool{}
	for _, ev := range events {
		procs[ev.proc] = true
	}
	for key, n := range maxHolders(events) {
		if n > 2 {
			t.Errorf("key %s: %d holders at once, limit 2", key, n)
		}
		if n < 2 {
			t.Logf("key %s: at most %d holders at once (the limit never bound)", key, n)
		}
	}
	t.Logf("%d events from %d processes", len(events), len(procs))
	// Nothing is left holding or waiting.
	st, err := e.client.Inspector().Limits(context.Background(), jobs.DefaultQueue)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Limits) != 0 {
		t.Errorf("limits left after the drain: %+v", st)
	}
}

// TestLimitPermitOfStoppedAndKilledHolderReclaimed: a holder of a key
// limited to 1 is paused with SIGSTOP past its lease; the maintenance leader
// reclaims its permit, the next job of the key runs in another process, and
// when the paused holder resumes its fenced write is refused. Then the
// holder of the next job is killed with SIGKILL: its permit is reclaimed the
// same way and the job after it runs.
func TestLimitPermitOfStoppedAndKilledHolderReclaimed(t *testing.T) {
	e := newEnv(t)
	addr := e.rdb.(*redis.Client).Options().Addr
	ctx := context.Background()
	stopped := startHelper(t, "limit-stopped", addr, e.ns)
	first := e.enqueue(limitArgs{Key: "acct:x", Max: 1, HoldMS: 4000})
	awaitLog(t, e, "the first holder's start", func(ev []limitEvent) bool { return limitCount(ev, "start") == 1 })
	if err := stopped.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			_ = stopped.Process.Signal(syscall.SIGCONT)
		}
	}()
	second := e.enqueue(limitArgs{Key: "acct:x", Max: 1, HoldMS: 10})
	// The second job waits for the permit: parked, not running.
	rec, err := e.client.Inspector().Get(ctx, jobs.DefaultQueue, second.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != jobs.Pending || !strings.HasPrefix(rec.WaitingFor, "limit acct:x, 1 of 1 held") {
		t.Fatalf("second job: state %s, waiting for %q", rec.State, rec.WaitingFor)
	}
	// A pool here with the maintenance leader: it expires the stopped
	// holder's attempt, which reclaims its permit, and runs the second job.
	cfg := e.config()
	p := e.pool(cfg)
	if err := worker.Register(p, jobs.Worker[limitArgs](&limitWorker{rdb: e.rdb, ns: e.ns, proc: "here"})); err != nil {
		t.Fatal(err)
	}
	stopHere := e.start(p)
	jobstest.WaitState(t, e.ledger, jobs.DefaultQueue, second.JobID, jobs.Succeeded)
	if err := stopped.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed = true
	awaitLog(t, e, "the resumed holder's act", func(ev []limitEvent) bool {
		for _, x := range ev {
			if x.proc == "limit-stopped" && strings.HasPrefix(x.what, "act") {
				return true
			}
		}
		return false
	})
	events := readLimitLog(t, e.rdb, e.ns)
	for _, x := range events {
		if x.proc == "limit-stopped" && strings.HasPrefix(x.what, "act") && x.what != "act-stale" {
			t.Fatalf("the paused holder acted after its permit was reclaimed: %v", x)
		}
	}
	if n := maxHolders(events)["acct:x"]; n > 1 {
		t.Fatalf("%d holders of acct:x at once, limit 1", n)
	}
	// The first job runs again (its reconcile said not applied) under a
	// newer token, here.
	jobstest.WaitState(t, e.ledger, jobs.DefaultQueue, first.JobID, jobs.Succeeded)

	// SIGKILL: a holder in another process dies holding the permit.
	_ = stopped.Process.Kill()
	_, _ = stopped.Process.Wait()
	stopHere() // the local pool steps aside, so the helper below claims
	killed := startHelper(t, "limit-killed", addr, e.ns)
	third := e.enqueue(limitArgs{Key: "acct:x", Max: 1, HoldMS: 3000})
	awaitLog(t, e, "the third job's start in the helper", func(ev []limitEvent) bool {
		for _, x := range ev {
			if x.proc == "limit-killed" && x.job == third.JobID && x.what == "start" {
				return true
			}
		}
		return false
	})
	fourth := e.enqueue(limitArgs{Key: "acct:x", Max: 1, HoldMS: 10})
	_ = killed.Process.Kill()
	_, _ = killed.Process.Wait()
	// The dead process can do nothing more: its attempt ends here in the
	// log (any later start of the key must wait for the reclaimed permit).
	for _, x := range readLimitLog(t, e.rdb, e.ns) {
		if x.proc == "limit-killed" && x.what == "start" {
			e.rdb.RPush(ctx, e.ns+":test:limitlog", fmt.Sprintf("end %s %s %s killed", x.key, x.job, x.token))
		}
	}
	p2 := e.pool(cfg)
	if err := worker.Register(p2, jobs.Worker[limitArgs](&limitWorker{rdb: e.rdb, ns: e.ns, proc: "here2"})); err != nil {
		t.Fatal(err)
	}
	e.start(p2)
	jobstest.WaitState(t, e.ledger, jobs.DefaultQueue, fourth.JobID, jobs.Succeeded)
	if n := maxHolders(readLimitLog(t, e.rdb, e.ns))["acct:x"]; n > 1 {
		t.Fatalf("%d holders of acct:x at once, limit 1", n)
	}
}

// awaitLog waits until the handlers' log satisfies cond.
func awaitLog(t *testing.T, e *env, what string, cond func([]limitEvent) bool) {
	t.Helper()
	redistest.Await(t, e.rdb, e.ns+":test:limitlog", what, func() bool { return cond(readLimitLog(t, e.rdb, e.ns)) })
}

// TestRateAcrossProcesses runs three pools in separate processes and one
// here on jobs sharing a rate of 5 starts per 400 ms: by the ledger's start
// times (Redis's clock) no window of 400 ms holds more than 5 starts, and
// every job started once (held-back jobs consumed no attempt, counted no
// retry).
func TestRateAcrossProcesses(t *testing.T) {
	e := newEnv(t)
	addr := e.rdb.(*redis.Client).Options().Addr
	ctx := context.Background()
	for i := range 3 {
		startHelper(t, fmt.Sprintf("rate-%d", i), addr, e.ns)
	}
	cfg := e.config()
	p := e.pool(cfg)
	if err := worker.Register(p, jobs.Worker[limitArgs](&limitWorker{rdb: e.rdb, ns: e.ns, proc: "here"})); err != nil {
		t.Fatal(err)
	}
	const n, rate, per = 30, 5, 400 * time.Millisecond
	var ids []string
	for range n {
		r := e.enqueue(limitArgs{RateKey: "provider", RateMax: rate, RatePerMS: int(per.Milliseconds())})
		ids = append(ids, r.JobID)
	}
	e.start(p)
	var starts []time.Time
	for _, id := range ids {
		rec := jobstest.WaitState(t, e.ledger, jobs.DefaultQueue, id, jobs.Succeeded)
		if rec.Attempts != 1 {
			t.Errorf("job %s: %d attempts, want 1", id, rec.Attempts)
		}
		starts = append(starts, rec.Started)
	}
	sort.Slice(starts, func(i, j int) bool { return starts[i].Before(starts[j]) })
	for i := 0; i+rate < len(starts); i++ {
		if d := starts[i+rate].Sub(starts[i]); d < per {
			t.Fatalf("%d starts within %v (from %v), rate %d per %v", rate+1, d, starts[i], rate, per)
		}
	}
	if span, least := starts[len(starts)-1].Sub(starts[0]), per*(n/rate-1); span < least {
		t.Fatalf("%d starts in %v, the rate allows no less than %v", n, span, least)
	}
	st, err := e.client.Inspector().Stats(ctx, jobs.DefaultQueue)
	if err != nil {
		t.Fatal(err)
	}
	if st["rate_deferrals"] == 0 || st["retried"] != 0 {
		t.Fatalf("rate_deferrals %d (want > 0), retried %d (want 0)", st["rate_deferrals"], st["retried"])
	}
	t.Logf("%d starts over %v, %d deferrals", n, starts[len(starts)-1].Sub(starts[0]), st["rate_deferrals"])
	// An idle rate key leaves nothing behind: its starts and deferrals
	// expire a period and a minute after the last (on the namespace's time,
	// here Redis's), and the rates hash drops it.
	prefix := e.ns + ":{" + jobs.DefaultQueue + "}:"
	now, err := e.rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{prefix + "rate:provider", prefix + "rate-held:provider", prefix + "rate-per:provider"} {
		at, err := e.rdb.PExpireTime(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if at == -2 && strings.Contains(k, "rate-held:") { // gone with its last deferral
			continue
		}
		if at < 0 || time.UnixMilli(int64(at/time.Millisecond)).After(now.Add(per+time.Minute)) {
			t.Fatalf("%s expires at %v (%v from now), want within a period and a minute", k, at, time.UnixMilli(int64(at/time.Millisecond)).Sub(now))
		}
	}
	if n, err := e.rdb.HLen(ctx, prefix+"rates").Result(); err != nil || n != 0 {
		t.Fatalf("the rates hash keeps %d idle key(s) (%v)", n, err)
	}
}

// TestLimitCancelParkedAndWaitingFor: a parked job says what it waits for,
// a cancelled parked job leaves the limit, and the jobs behind it still run.
func TestLimitCancelParkedAndWaitingFor(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	p := e.pool(e.config())
	if err := worker.Register(p, jobs.Worker[limitArgs](&limitWorker{rdb: e.rdb, ns: e.ns, proc: "here"})); err != nil {
		t.Fatal(err)
	}
	e.start(p)
	a := e.enqueue(limitArgs{Key: "export:cust-42", Max: 1, HoldMS: 1500})
	awaitLog(t, e, "the first job's start", func(ev []limitEvent) bool { return limitCount(ev, "start") == 1 })
	// The permit is held: the next jobs of the key are parked at enqueue.
	b := e.enqueue(limitArgs{Key: "export:cust-42", Max: 1, HoldMS: 10})
	c := e.enqueue(limitArgs{Key: "export:cust-42", Max: 1, HoldMS: 10})
	other := e.enqueue(limitArgs{Key: "export:cust-7", Max: 1, HoldMS: 10})
	rec, err := e.client.Inspector().Get(ctx, jobs.DefaultQueue, b.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if want := "limit export:cust-42, 1 of 1 held"; rec.State != jobs.Pending || rec.WaitingFor != want {
		t.Fatalf("state %s, waiting for %q, want pending, %q", rec.State, rec.WaitingFor, want)
	}
	// Another key's job is not blocked behind them.
	jobstest.WaitState(t, e.ledger, jobs.DefaultQueue, other.JobID, jobs.Succeeded)
	if rec, err := e.client.Inspector().Get(ctx, jobs.DefaultQueue, a.JobID); err != nil || rec.State != jobs.Running {
		t.Fatalf("first job: %v, %v; want it still running", rec, err)
	}
	// Parked jobs are pending in the counts, though out of the due index.
	if counts, err := e.client.Inspector().Counts(ctx, jobs.DefaultQueue); err != nil || counts[jobs.Pending] != 2 {
		t.Fatalf("pending count %d (%v), want the 2 parked jobs", counts[jobs.Pending], err)
	}
	if _, err := e.client.Cancel(ctx, jobs.DefaultQueue, b.JobID, "test", ""); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{a.JobID, c.JobID, other.JobID} {
		jobstest.WaitState(t, e.ledger, jobs.DefaultQueue, id, jobs.Succeeded)
	}
	jobstest.WaitState(t, e.ledger, jobs.DefaultQueue, b.JobID, jobs.Cancelled)
	fs, err := e.client.Inspector().Limits(ctx, jobs.DefaultQueue)
	if err != nil {
		t.Fatal(err)
	}
	if len(fs.Limits) != 0 {
		t.Fatalf("limits left: %+v", fs.Limits)
	}
}

// TestLimitOfJobBehindItsGroupBlocksNoOtherGroup: a job under a limit
// enqueued behind 300 jobs of its group (A) holds no permit until it leads
// its group, so a job of the same key in group B runs at once: it ends
// before the first one starts.
func TestLimitOfJobBehindItsGroupBlocksNoOtherGroup(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ps := make([]jobs.Params, 300)
	for i := range ps {
		// (a key that never binds: the handlers' log needs one)
		ps[i] = jobs.Params{Args: limitArgs{Key: "free", Max: 1000, HoldMS: 10}, Options: []jobs.Option{jobs.Group("A")}}
	}
	if _, err := e.client.EnqueueMany(ctx, ps); err != nil {
		t.Fatal(err)
	}
	x := e.enqueue(limitArgs{Key: "exp", Max: 1, HoldMS: 10}, jobs.Group("A"))
	y := e.enqueue(limitArgs{Key: "exp", Max: 1}, jobs.Group("B"))
	p := e.pool(e.config())
	if err := worker.Register(p, jobs.Worker[limitArgs](&limitWorker{rdb: e.rdb, ns: e.ns, proc: "here"})); err != nil {
		t.Fatal(err)
	}
	e.start(p)
	jobstest.WaitState(t, e.ledger, jobs.DefaultQueue, x.JobID, jobs.Succeeded)
	jobstest.WaitState(t, e.ledger, jobs.DefaultQueue, y.JobID, jobs.Succeeded)
	yEnd, xStart := -1, -1
	for i, ev := range readLimitLog(t, e.rdb, e.ns) {
		switch {
		case ev.job == y.JobID && ev.what == "end":
			yEnd = i
		case ev.job == x.JobID && ev.what == "start":
			xStart = i
		}
	}
	if yEnd < 0 || xStart < 0 || yEnd > xStart {
		t.Fatalf("group B's job ended at event %d, group A's job behind 300 others started at event %d: "+
			"want B's first (the key was free)", yEnd, xStart)
	}
}
