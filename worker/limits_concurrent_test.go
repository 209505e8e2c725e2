package worker_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
	"github.com/fencedq/fencedq/worker"
)

// probeArgs is a job under a concurrency limit (Key, Max). Its first
// attempt, when Overrun is set, ignores its context past its timeout and
// acts only once its permit was reclaimed (a paused holder); when Gate is
// set, the handler ends only once the Redis key Gate exists; else it holds
// its permit for HoldMS (a workload, so that holders overlap).
type probeArgs struct {
	Key     string `json:"key"`
	Max     int    `json:"max"`
	Overrun bool   `json:"overrun,omitempty"`
	Gate    string `json:"gate,omitempty"`
	HoldMS  int    `json:"hold_ms,omitempty"`
}

func (probeArgs) Kind() string { return "limit_probe" }

func (a probeArgs) Limit() (string, int) { return a.Key, a.Max }

// probeWorker logs to one Redis list, in the order things happened across
// pools: "start", "act-ok" or "act-stale" (a write fenced by the attempt's
// token, refused once its permit was reclaimed), "end"; each line with the
// key, the max the job was admitted under, the job id and the token read
// from the handler's context.
type probeWorker struct {
	e    *env
	pool string
}

func (w *probeWorker) logKey() string { return w.e.ns + ":test:probelog" }

func (w *probeWorker) log(ctx context.Context, j *jobs.Job[probeArgs], tok lease.Token, what string) {
	w.e.rdb.RPush(context.WithoutCancel(ctx), w.logKey(),
		fmt.Sprintf("%s %s %d %s %d %s", what, j.Args.Key, j.Args.Max, j.ID, uint64(tok), w.pool))
}

func (w *probeWorker) Work(ctx context.Context, j *jobs.Job[probeArgs]) error {
	l, ok := lease.FromContext(ctx)
	if !ok || l.Token != j.Token {
		return fmt.Errorf("the handler's context carries lease %v, want token %v", l, j.Token)
	}
	w.log(ctx, j, l.Token, "start")
	bg := context.WithoutCancel(ctx)
	switch {
	case j.Args.Overrun && j.Attempt == 1:
		// Ignore the context: wait for the expirer to take the job (and
		// its permit) from this attempt, then act as a paused holder would.
		_ = redistest.Wait(w.e.rdb, w.e.ledger.JobKey(jobs.DefaultQueue, j.ID), 60*time.Second, func() bool {
			rec, err := w.e.ledger.Get(bg, jobs.DefaultQueue, j.ID)
			return err == nil && (rec.State != jobs.Running || rec.Token != j.Token)
		})
	case j.Args.Gate != "":
		_ = redistest.Wait(w.e.rdb, j.Args.Gate, 60*time.Second, func() bool {
			return w.e.rdb.Exists(bg, j.Args.Gate).Val() == 1
		})
	default:
		time.Sleep(time.Duration(j.Args.HoldMS) * time.Millisecond)
	}
	if err := jobs.Progress(bg, 1, 1, "act"); err != nil {
		w.log(ctx, j, l.Token, "act-stale")
	} else {
		w.log(ctx, j, l.Token, "act-ok")
	}
	w.log(ctx, j, l.Token, "end")
	return nil
}

// Reconcile says a reclaimed attempt's effect did not happen: the job runs
// again under a new token.
func (w *probeWorker) Reconcile(context.Context, *jobs.Job[probeArgs]) (jobs.Verdict, error) {
	return jobs.NotApplied, nil
}

type probeEvent struct {
	what, key string
	max       int
	job       string
	token     uint64
	pool      string
}

func readProbeLog(t *testing.T, e *env) []probeEvent {
	t.Helper()
	lines, err := e.rdb.LRange(context.Background(), e.ns+":test:probelog", 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]probeEvent, len(lines))
	for i, l := range lines {
		f := strings.Fields(l)
		m, _ := strconv.Atoi(f[2])
		tok, _ := strconv.ParseUint(f[4], 10, 64)
		out[i] = probeEvent{f[0], f[1], m, f[3], tok, f[5]}
	}
	return out
}

// checkAdmissions replays the log and fails the test when a job was
// admitted over its own max or more than most holders acted at once, per
// key, counting only holders whose fenced write was accepted (a holder
// whose permit was reclaimed acts fenced out, it holds nothing):
//   - at a start of job J, the holders claimed before J (a lower token: a
//     token is minted from Redis's clock at the claim) whose end comes
//     after J's start held their permits when J was admitted: with J, at
//     most J's max;
//   - between its start and its accepted act a holder's permit was valid:
//     no more than most such spans overlap (most 0: no bound).
func checkAdmissions(t *testing.T, events []probeEvent, most int) (peak int) {
	t.Helper()
	stale := map[string]bool{}
	for _, ev := range events {
		if ev.what == "act-stale" {
			stale[ev.job+"/"+strconv.FormatUint(ev.token, 10)] = true
		}
	}
	valid := func(ev probeEvent) bool { return !stale[ev.job+"/"+strconv.FormatUint(ev.token, 10)] }
	for i, j := range events {
		if j.what != "start" || !valid(j) {
			continue
		}
		held := 1
		for _, h := range events[:i] {
			if h.what != "start" || h.key != j.key || h.token >= j.token || !valid(h) {
				continue
			}
			for _, x := range events[i+1:] {
				if x.what == "end" && x.job == h.job && x.token == h.token {
					held++
					break
				}
			}
		}
		if held > j.max {
			t.Errorf("job %s (token %d) admitted under max %d of %s while %d held permits", j.job, j.token, j.max, j.key, held)
		}
	}
	acting := map[string]int{}
	for _, ev := range events {
		if !valid(ev) {
			continue
		}
		switch ev.what {
		case "start":
			acting[ev.key]++
			peak = max(peak, acting[ev.key])
			if most > 0 && acting[ev.key] > most {
				t.Errorf("%d holders of %s with valid permits acting at once, limit %d (at %s's start)", acting[ev.key], ev.key, most, ev.job)
			}
		case "act-ok":
			acting[ev.key]--
		}
	}
	return peak
}

// probePools starts n pools, each on its own Redis client, with leases of
// ttl, running probeWorker.
func probePools(t *testing.T, e *env, n int, ttl time.Duration) {
	t.Helper()
	limitPools(t, e, n, ttl, func(p *worker.Pool, i int) error {
		return worker.Register(p, jobs.Worker[probeArgs](&probeWorker{e: e, pool: fmt.Sprintf("pool-%d", i)}))
	})
}

// limitPools starts n pools, each on its own Redis client, with leases of
// ttl, each registering its workers with reg.
func limitPools(t *testing.T, e *env, n int, ttl time.Duration, reg func(p *worker.Pool, i int) error) {
	t.Helper()
	addr := e.rdb.(*redis.Client).Options().Addr
	for i := range n {
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { _ = rdb.Close() })
		cfg := e.config()
		cfg.LeaseTTL = ttl
		cfg.Registerer = prometheus.NewRegistry()
		p, err := worker.NewPool(rdb, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := reg(p, i); err != nil {
			t.Fatal(err)
		}
		e.start(p)
	}
}

// TestLimitPausedHoldersFencedAcrossPools: three pools, each on its own
// client, with 400 ms leases run jobs of two keys limited to 2; every third
// job's first attempt overruns its timeout ignoring its context until the
// expirer reclaims its permit. No more than 2 holders of a key with valid
// permits act at once, no job is admitted over its max, every overrunning
// attempt is fenced (its write and completion refused: the job succeeds by
// a later attempt under a higher token), and every job succeeds.
func TestLimitPausedHoldersFencedAcrossPools(t *testing.T) {
	e := newEnv(t)
	probePools(t, e, 3, 400*time.Millisecond)
	const perKey, keys = 9, 2
	type job struct {
		id      string
		overrun bool
	}
	var js []job
	for i := range perKey * keys {
		overrun := i%3 == 0
		var opts []jobs.Option
		if overrun {
			opts = append(opts, jobs.Timeout(100*time.Millisecond))
		}
		r := e.enqueue(probeArgs{Key: fmt.Sprintf("acct:%d", i%keys), Max: 2, Overrun: overrun, HoldMS: 60}, opts...)
		js = append(js, job{r.JobID, overrun})
	}
	final := map[string]*jobs.Record{}
	for _, j := range js {
		// an overrunning job waits for its lease to lapse, the expirer and
		// its reconcile before it runs again
		final[j.id] = jobstest.WaitStateWithin(t, e.ledger, jobs.DefaultQueue, j.id, jobs.Succeeded, 2*testsignal.DefaultTimeout)
	}
	events := readProbeLog(t, e)
	for _, j := range js {
		var toks []uint64
		for _, ev := range events {
			if ev.job != j.id {
				continue
			}
			switch {
			case ev.what == "start":
				toks = append(toks, ev.token)
			case ev.what == "act-stale" && !j.overrun:
				t.Errorf("job %s: attempt of token %d fenced out, it never overran", j.id, ev.token)
			case ev.what == "act-ok" && j.overrun && ev.token == toks[0]:
				t.Errorf("job %s: the overrunning attempt (token %d) acted after its permit was reclaimed", j.id, ev.token)
			}
		}
		rec := final[j.id]
		want := 1
		if j.overrun {
			want = 2
		}
		if len(toks) != want || rec.Attempts != want {
			t.Errorf("job %s: %d starts, %d attempts, want %d", j.id, len(toks), rec.Attempts, want)
			continue
		}
		if j.overrun && (toks[1] <= toks[0] || uint64(rec.Token) != toks[1]) {
			t.Errorf("job %s: overrun under token %d, next attempt %d, succeeded under %d: want a higher token to succeed", j.id, toks[0], toks[1], uint64(rec.Token))
		}
	}
	peak := checkAdmissions(t, events, 2)
	pools := map[string]bool{}
	for _, ev := range events {
		pools[ev.pool] = true
	}
	t.Logf("%d events from %d pools, at most %d valid holders of a key acting at once", len(events), len(pools), peak)
}

// TestLimitChangedWhileHoldersRun: three holders of a key admitted under
// max 3 run while jobs of the same key are enqueued with max 1, then 5,
// then 2. Nothing deadlocks: once the holders end, every job runs; and no
// job is admitted while more permits are held than the max it carries.
func TestLimitChangedWhileHoldersRun(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	probePools(t, e, 3, 500*time.Millisecond)
	gate := e.ns + ":test:gate"
	var ids []string
	for range 3 {
		ids = append(ids, e.enqueue(probeArgs{Key: "tenant:a", Max: 3, Gate: gate}).JobID)
	}
	redistest.Await(t, e.rdb, e.ns+":test:probelog", "the three first holders' starts", func() bool {
		n := 0
		for _, ev := range readProbeLog(t, e) {
			if ev.what == "start" {
				n++
			}
		}
		return n == 3
	})
	for _, m := range []int{1, 1, 5, 5, 5, 2, 2, 1, 5} {
		ids = append(ids, e.enqueue(probeArgs{Key: "tenant:a", Max: m, HoldMS: 30}).JobID)
	}
	// The max-1 job enqueued first parks behind the three holders, and
	// every later job behind it.
	rec, err := e.client.Inspector().Get(ctx, jobs.DefaultQueue, ids[3])
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != jobs.Pending || !strings.HasPrefix(rec.WaitingFor, "limit tenant:a") {
		t.Fatalf("the first max-1 job: state %s, waiting for %q; want parked", rec.State, rec.WaitingFor)
	}
	if err := e.rdb.Set(ctx, gate, 1, 0).Err(); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		rec := jobstest.WaitState(t, e.ledger, jobs.DefaultQueue, id, jobs.Succeeded)
		if rec.Attempts != 1 {
			t.Errorf("job %s: %d attempts, want 1 (a held-back job consumes none)", id, rec.Attempts)
		}
	}
	checkAdmissions(t, readProbeLog(t, e), 0)
	fs, err := e.client.Inspector().Limits(ctx, jobs.DefaultQueue)
	if err != nil {
		t.Fatal(err)
	}
	if len(fs.Limits) != 0 {
		t.Fatalf("limits left after the drain: %+v", fs.Limits)
	}
}

// TestRateAndLimitAcrossPools: three pools, each on its own client, run
// jobs under both a limit of 2 per account and one rate of 4 starts per
// 400 ms: by the ledger's start times (Redis's clock) no window of 400 ms
// holds more than 4 starts, the handlers' log never shows more than 2
// holders of an account at once, and every job started once.
func TestRateAndLimitAcrossPools(t *testing.T) {
	e := newEnv(t)
	limitPools(t, e, 3, 500*time.Millisecond, func(p *worker.Pool, i int) error {
		return worker.Register(p, jobs.Worker[limitArgs](&limitWorker{rdb: e.rdb, ns: e.ns, proc: fmt.Sprintf("pool-%d", i)}))
	})
	const n, rate, per, accounts = 24, 4, 400 * time.Millisecond, 3
	var ids []string
	for i := range n {
		r := e.enqueue(limitArgs{Key: fmt.Sprintf("acct:%d", i%accounts), Max: 2, HoldMS: 20,
			RateKey: "provider", RateMax: rate, RatePerMS: int(per.Milliseconds())})
		ids = append(ids, r.JobID)
	}
	var starts []time.Time
	for _, id := range ids {
		rec := jobstest.WaitState(t, e.ledger, jobs.DefaultQueue, id, jobs.Succeeded)
		if rec.Attempts != 1 {
			t.Errorf("job %s: %d attempts, want 1", id, rec.Attempts)
		}
		starts = append(starts, rec.Started)
	}
	slices.SortFunc(starts, time.Time.Compare)
	for i := 0; i+rate < len(starts); i++ {
		if d := starts[i+rate].Sub(starts[i]); d < per {
			t.Errorf("%d starts within %v (from %v), rate %d per %v", rate+1, d, starts[i], rate, per)
		}
	}
	for key, m := range maxHolders(readLimitLog(t, e.rdb, e.ns)) {
		if m > 2 {
			t.Errorf("key %s: %d holders at once, limit 2", key, m)
		}
	}
}
