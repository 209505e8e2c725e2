package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fence/pgfence"
	"github.com/fencedq/fencedq/fence/redisfence"
	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/pgtest"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// stalledArgs is a job whose handler stalls (it ignores its context, as a
// paused process does) until the test wakes it, then writes through the
// store the test chose for it with its attempt's fence.
type stalledArgs struct {
	N int `json:"n"`
}

func (stalledArgs) Kind() string { return "cli_stall" }

// stalledEnv is a pool whose attempts stall until woken, over a real
// Redis and a real PostgreSQL, each job writing through pgfence or
// redisfence when woken.
type stalledEnv struct {
	*operatorEnv
	pg       *pgfence.Store
	rs       *redisfence.Store
	pgURL    string // the database, for --fence-postgres
	pgSchema string // the pgfence tables' schema, for --fence-postgres-schema
	started  chan int
	resume   []chan struct{}
	wrote    []chan error
}

// newStalledEnv starts a pool running jobs 0..n-1, each writing through
// the store stores[i] names ("pg" or "redis") once woken.
func newStalledEnv(t *testing.T, stores ...string) *stalledEnv {
	e := &stalledEnv{operatorEnv: newOperatorEnv(t), started: make(chan int, len(stores))}
	ctx := context.Background()
	pool := pgtest.New(t)
	cc := pool.Config().ConnConfig
	e.pgSchema = cc.RuntimeParams["search_path"]
	e.pgURL = fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", cc.User, cc.Host, cc.Port, cc.Database)
	opts := pgfence.Options{Schema: e.pgSchema}
	must(t, pgfence.Migrate(ctx, pool, opts))
	var err error
	e.pg, err = pgfence.New(pool, opts)
	must(t, err)
	rdb := e.ledger.Redis()
	e.rs, err = redisfence.New(rdb, redisfence.Config{Namespace: e.ns})
	must(t, err)
	for range stores {
		e.resume = append(e.resume, make(chan struct{}))
		e.wrote = append(e.wrote, make(chan error, 1))
	}
	p, err := worker.NewPool(rdb, worker.Config{
		Jobs: jobs.Config{Namespace: e.ns}, Concurrency: len(stores), LeaseTTL: time.Second,
		HandlerTimeout: 5 * time.Second, ShutdownTimeout: time.Second, Logger: slog.New(slog.DiscardHandler),
		Maintenance: worker.MaintenanceConfig{Interval: 100 * time.Millisecond},
	})
	must(t, err)
	must(t, worker.Register(p, jobs.WorkFunc[stalledArgs](func(ctx context.Context, j *jobs.Job[stalledArgs]) error {
		n := j.Args.N
		e.started <- n
		<-e.resume[n]
		f, _ := fence.FromContext(ctx)
		ctx = context.WithoutCancel(ctx)
		var err error
		if stores[n] == "pg" {
			err = e.pg.Apply(ctx, f, func(ctx context.Context, tx pgx.Tx) error { return nil })
		} else {
			err = e.rs.Apply(ctx, f, redisfence.Set("{"+f.Resource+"}:charged", "1"))
		}
		e.wrote[n] <- err
		return err
	})))
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(pctx) }()
	t.Cleanup(func() {
		for n := range e.resume {
			e.wake(n)
		}
		cancel()
		<-done
	})
	return e
}

// wake lets job n's stalled attempt go on (once).
func (e *stalledEnv) wake(n int) {
	select {
	case <-e.resume[n]:
	default:
		close(e.resume[n])
	}
}

// stall enqueues job n and waits until its attempt stalled and its lease
// lapsed: the job is in review (the pool has no effect log), its attempt
// still running.
func (e *stalledEnv) stall(n int) string {
	e.t.Helper()
	res, err := e.client.Enqueue(context.Background(), stalledArgs{N: n}, jobs.OperationID(fmt.Sprintf("charge-%d", n)), jobs.Timeout(100*time.Millisecond))
	must(e.t, err)
	select {
	case got := <-e.started:
		if got != n {
			e.t.Fatalf("job %d started, want %d", got, n)
		}
	case <-time.After(testsignal.Timeout()):
		e.t.Fatalf("job %d's handler never started", n)
	}
	jobstest.WaitState(e.t, e.ledger, jobs.DefaultQueue, res.JobID, jobs.Review)
	return res.JobID
}

// lateWrite wakes job n's stalled attempt and returns what its write got.
func (e *stalledEnv) lateWrite(n int) error {
	e.t.Helper()
	e.wake(n)
	select {
	case err := <-e.wrote[n]:
		return err
	case <-time.After(testsignal.Timeout()):
		e.t.Fatalf("job %d's stalled attempt never wrote", n)
	}
	return nil
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestResolveFencesOutTheStalledAttempt: a job's attempt stalls (a paused
// worker) and the job goes to review. `fencedq resolve` deciding it was
// not applied (rerun or dead) with no fence store is refused, naming the
// flags, and decides nothing; with --fence-postgres (or --fence-redis) it
// first fences the attempt out of the store the handlers write through,
// so the attempt's write when it wakes is refused as stale and the
// operation is not applied on top of the decision; with --unfenced it is
// recorded as before, and the output says the attempt was not fenced.
func TestResolveFencesOutTheStalledAttempt(t *testing.T) {
	e := newStalledEnv(t, "pg", "redis", "pg")
	ctx := context.Background()
	ids := []string{e.stall(0), e.stall(1), e.stall(2)}
	if _, err := e.client.Pause(ctx, jobs.DefaultQueue, "alice", "hold the re-runs"); err != nil {
		t.Fatal(err)
	}

	// no fence store: refused, nothing decided
	for _, d := range []string{"rerun", "dead"} {
		before, err := e.ledger.History(ctx, jobs.DefaultQueue, ids[0])
		must(t, err)
		code, out, errOut := e.cli("resolve", "--job", ids[0], "--decision", d, "--actor", "alice", "--note", "no such charge")
		if code != 1 || out != "" || !strings.Contains(errOut, "--fence-postgres") || !strings.Contains(errOut, "--fence-redis") ||
			!strings.Contains(errOut, "--unfenced") || !strings.Contains(errOut, "nothing was decided") {
			t.Errorf("resolve --decision %s of a review job without a fence store: code %d, stdout %q, stderr %q (want 1 naming the flags, nothing decided)", d, code, out, errOut)
		}
		after, err := e.ledger.History(ctx, jobs.DefaultQueue, ids[0])
		must(t, err)
		if rec, err := e.ledger.Get(ctx, jobs.DefaultQueue, ids[0]); err != nil || rec.State != jobs.Review || len(after) != len(before) {
			t.Fatalf("job after a refused decision: %+v (%v), history %d entries, was %d: want review, nothing recorded", rec, err, len(after), len(before))
		}
	}

	// --fence-postgres: the attempt is fenced out of PostgreSQL first
	code, out, errOut := e.cli("resolve", "--job", ids[0], "--decision", "rerun", "--actor", "alice", "--note", "no such charge",
		"--fence-postgres", e.pgURL, "--fence-postgres-schema", e.pgSchema)
	if code != 0 || !strings.Contains(out, "is now pending") || !strings.Contains(out, "fenced out of the PostgreSQL fence store") {
		t.Fatalf("resolve --fence-postgres: code %d, stdout %q, stderr %q", code, out, errOut)
	}
	if err := e.lateWrite(0); !errors.Is(err, fence.ErrStale) {
		t.Errorf("the stalled attempt's write after resolve --fence-postgres: %v, want fence.ErrStale", err)
	}
	if eff, ok, err := e.pg.Applied(ctx, "charge-0"); err != nil || ok {
		t.Errorf("PostgreSQL effect log after resolve --fence-postgres: %+v, applied %v (%v), want not applied", eff, ok, err)
	}

	// --fence-redis: the store's namespace is --namespace unless given
	code, out, errOut = e.cli("resolve", "--job", ids[1], "--decision", "dead", "--actor", "alice", "--json", "--fence-redis", e.url)
	if code != 0 || !strings.Contains(out, `"state":"dead"`) || !strings.Contains(out, `"fenced_out":true`) || !strings.Contains(out, `"unfenced":false`) {
		t.Fatalf("resolve --fence-redis: code %d, stdout %q, stderr %q", code, out, errOut)
	}
	if err := e.lateWrite(1); !errors.Is(err, fence.ErrStale) {
		t.Errorf("the stalled attempt's write after resolve --fence-redis: %v, want fence.ErrStale", err)
	}

	// --unfenced: recorded as it is, and said so
	code, out, errOut = e.cli("resolve", "--job", ids[2], "--decision", "dead", "--actor", "alice", "--unfenced")
	if code != 0 || !strings.Contains(out, "is now dead") || !strings.Contains(out, "NOT fenced out (--unfenced)") {
		t.Fatalf("resolve --unfenced: code %d, stdout %q, stderr %q", code, out, errOut)
	}
	if err := e.lateWrite(2); err != nil {
		t.Errorf("the stalled attempt's write after resolve --unfenced: %v, want accepted (nothing fenced it out)", err)
	}
}

// uncertain enqueues a job, claims it and records its attempt uncertain
// (an attempt abandoned at shutdown), returning its id and token.
func (e *operatorEnv) uncertain(opts ...jobs.Option) (string, string) {
	e.t.Helper()
	id := e.enqueue(opts...)
	cl := e.claim(id)
	cs, err := e.ledger.Complete(context.Background(), jobs.DefaultQueue, []ledger.Completion{{ID: id, Token: cl.Token,
		Outcome: ledger.Outcome{To: jobs.Uncertain, Reason: "abandoned"}}})
	if err != nil || !cs[0].Applied {
		e.t.Fatalf("commit uncertain: %+v %v", cs, err)
	}
	return id, cl.Token.String()
}

// TestResolveFenceFlags: the fence flags are checked before anything is
// reached (a contradiction, an option without its store, a bad schema
// or namespace are bad usage, a password never shown); a fence store that
// does not answer, or whose tables are not there, fails the command and
// decides nothing; a succeeded decision needs no fence; the refusal holds
// for a job named by --op or seen with --seen-state too.
func TestResolveFenceFlags(t *testing.T) {
	e := newOperatorEnv(t)
	id, token := e.uncertain(jobs.OperationID("pay-7"))
	base := []string{"resolve", "--job", id, "--decision", "rerun", "--actor", "alice"}
	const secret = "hunter2"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--fence-postgres", "postgres://u@h/db", "--fence-redis", e.url}, "--fence-postgres and --fence-redis"},
		{[]string{"--fence-redis", e.url, "--unfenced"}, "--unfenced says no store is fenced"},
		{[]string{"--fence-postgres-schema", "s"}, "go with --fence-postgres"},
		{[]string{"--fence-redis-namespace", "ns"}, "goes with --fence-redis"},
		{[]string{"--fence-redis", e.url, "--fence-redis-namespace", "a{b}"}, "--fence-redis-namespace"},
		{[]string{"--fence-postgres", "postgres://u:" + secret + "@127.0.0.1:1/db", "--fence-postgres-schema", "bad-schema"}, "--fence-postgres-schema"},
		{[]string{"--fence-postgres", "postgres://u:" + secret + "@127.0.0.1:1/db", "--fence-postgres-table-prefix", "x y"}, "--fence-postgres-table-prefix"},
		{[]string{"--fence-postgres", "postgres://u:" + secret + "@[::1/db"}, "--fence-postgres: not a PostgreSQL URL"},
		{[]string{"--fence-postgres", "host=127.0.0.1 password=" + secret + " port=notaport"}, "--fence-postgres: not a PostgreSQL URL"},
	} {
		code, out, errOut := e.cli(append(slices.Clone(base), c.args...)...)
		if code != 2 || !strings.Contains(errOut, c.want) || strings.Contains(out+errOut, secret) {
			t.Errorf("%q: code %d, stdout %q, stderr %q (want 2 and %q, no password)", c.args, code, out, errOut, c.want)
		}
	}
	pool := pgtest.New(t)
	cc := pool.Config().ConnConfig
	pgURL := fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", cc.User, cc.Host, cc.Port, cc.Database)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--fence-postgres", "postgres://u:" + secret + "@127.0.0.1:1/db?connect_timeout=2"}, "does not answer"},
		// the schema is there, pgfence's tables are not (not migrated)
		{[]string{"--fence-postgres", pgURL, "--fence-postgres-schema", cc.RuntimeParams["search_path"]}, "nothing was decided"},
		{[]string{"--fence-redis", "redis://:" + secret + "@127.0.0.1:1"}, "nothing was decided"},
	} {
		code, out, errOut := e.cli(append(slices.Clone(base), c.args...)...)
		if code != 1 || !strings.Contains(errOut, c.want) || strings.Contains(out+errOut, secret) {
			t.Errorf("%q: code %d, stdout %q, stderr %q (want 1 and %q, no password)", c.args, code, out, errOut, c.want)
		}
		if s := e.state(id); s != jobs.Uncertain {
			t.Fatalf("%q: the job is %s, want still uncertain", c.args, s)
		}
	}
	for _, args := range [][]string{
		{"resolve", "--op", "pay-7", "--decision", "dead", "--actor", "alice"},
		{"resolve", "--op", "pay-7", "--queue", jobs.DefaultQueue, "--decision", "dead", "--actor", "alice"},
		{"resolve", "--job", id, "--decision", "rerun", "--actor", "alice", "--seen-state", "uncertain"},
		{"resolve", "--job", id, "--decision", "rerun", "--actor", "alice", "--seen-state", "uncertain", "--seen-token", token},
	} {
		if code, out, errOut := e.cli(args...); code != 1 || !strings.Contains(errOut, "--unfenced") {
			t.Errorf("%q with no fence store: code %d, stdout %q, stderr %q (want 1 naming --unfenced)", args, code, out, errOut)
		}
	}
	if s := e.state(id); s != jobs.Uncertain {
		t.Fatalf("refused decisions wrote: the job is %s", s)
	}
	code, out, errOut := e.cli("resolve", "--job", id, "--decision", "succeeded", "--actor", "alice")
	if code != 0 || !strings.Contains(out, "is now succeeded") || strings.Contains(out, "fenced") {
		t.Fatalf("succeeded with no fence store: code %d, stdout %q, stderr %q", code, out, errOut)
	}
	// a seen uncertain job through the Redis store, its namespace given
	id, token = e.uncertain()
	code, out, errOut = e.cli("resolve", "--job", id, "--decision", "rerun", "--actor", "alice", "--seen-state", "uncertain",
		"--seen-token", token, "--fence-redis", e.url, "--fence-redis-namespace", e.ns)
	if code != 0 || !strings.Contains(out, "is now pending") || !strings.Contains(out, "fenced out of the Redis fence store") {
		t.Fatalf("seen uncertain through --fence-redis: code %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// TestFenceStoreFromTheEnvironment: FENCEDQ_FENCE_REDIS (and
// FENCEDQ_FENCE_POSTGRES) name the fence store as the flags do, so a
// deployment's operator shell (docker compose run --rm dashboard resolve)
// fences without a URL, and its password, typed on the command line.
func TestFenceStoreFromTheEnvironment(t *testing.T) {
	e := newOperatorEnv(t)
	id, _ := e.uncertain()
	t.Setenv("FENCEDQ_FENCE_REDIS", e.url)
	code, out, errOut := e.cli("resolve", "--job", id, "--decision", "rerun", "--actor", "alice")
	if code != 0 || !strings.Contains(out, "fenced out of the Redis fence store") || strings.Contains(errOut, "is ignored") {
		t.Fatalf("resolve with FENCEDQ_FENCE_REDIS: code %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// TestDashboardCommandFencesDecisions: `fencedq dashboard` with actions
// enabled makes the same "not applied" decisions as resolve (re-run, alone
// or in bulk, and dead): without a fence store it refuses to start, naming
// the flags, unless --unfenced; read-only it needs none; given
// --fence-redis its re-run of a review job fences the stalled attempt out
// first, so the attempt's write when it wakes is refused as stale.
func TestDashboardCommandFencesDecisions(t *testing.T) {
	e := newStalledEnv(t, "redis")
	for _, creds := range [][]string{
		{"--dashboard-user", "ops", "--dashboard-password", "pw"},
		{"--dashboard-token", "script-token"},
	} {
		code, out, errOut := e.dashboardExit(creds...)
		if code != 2 || !strings.Contains(errOut, "--fence-postgres") || !strings.Contains(errOut, "--fence-redis") || !strings.Contains(errOut, "--unfenced") {
			t.Errorf("dashboard %q with no fence store: code %d, stdout %q, stderr %q (want 2 naming the flags)", creds, code, out, errOut)
		}
	}
	e.startDashboard()                                                  // read-only: no decisions, no store needed
	e.startDashboard("--dashboard-token", "script-token", "--unfenced") // said so
	id := e.stall(0)
	if _, err := e.client.Pause(context.Background(), jobs.DefaultQueue, "alice", "hold the re-run"); err != nil {
		t.Fatal(err)
	}
	base := e.startDashboard("--dashboard-token", "script-token", "--fence-redis", e.url)
	req, err := http.NewRequest(http.MethodPost, base+"api/jobs/default/"+id+"/resolve", strings.NewReader(`{"decision":"rerun","note":"no such charge"}`))
	must(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer script-token")
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("re-run through the dashboard: %s", resp.Status)
	}
	if err := e.lateWrite(0); !errors.Is(err, fence.ErrStale) {
		t.Errorf("the stalled attempt's write after the dashboard's re-run: %v, want fence.ErrStale", err)
	}
}

// dashboardExit runs fencedq dashboard and returns its exit code and
// output when it exits before serving; one that serves fails the test
// (and is stopped).
func (e *operatorEnv) dashboardExit(args ...string) (int, string, string) {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &urlWriter{url: make(chan string, 1)}
	var errOut syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"dashboard", "--addr", "127.0.0.1:0", "--redis", e.url, "--namespace", e.ns, "--log-level", "error"}, args...), out, &errOut)
	}()
	select {
	case u := <-out.url:
		cancel()
		<-done
		e.t.Errorf("dashboard %q served on %s, want it to exit", args, u)
		return 0, u, errOut.String()
	case code := <-done:
		out.mu.Lock()
		defer out.mu.Unlock()
		return code, out.buf.String(), errOut.String()
	}
}
