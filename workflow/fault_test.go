package workflow_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fence/pgfence"
	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/pgtest"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
	"github.com/fencedq/fencedq/workflow"
)

// helperEnv names the worker process a re-executed test binary runs.
const helperEnv = "FENCEDQ_WF_HELPER"

// TestMain doubles as a worker process for the fault tests: with
// FENCEDQ_WF_HELPER set, the test binary runs a pool instead of the tests.
func TestMain(m *testing.M) {
	if proc := os.Getenv(helperEnv); proc != "" {
		os.Exit(runFaultWorker(proc))
	}
	os.Exit(m.Run())
}

// The two queues of the fault tests: steps alternate between them, so
// dependencies cross queues through hand-over records.
const qa, qb = "wfa", "wfb"

// FaultStep is the job kind of the fault tests: it writes its effect
// through pgfence and records an output.
type FaultStep struct {
	Name string   `json:"name"`
	Deps []string `json:"deps,omitempty"`
}

func (FaultStep) Kind() string { return "wf_fault_step" }

// faultOut is a FaultStep's output: how many of its dependencies' outputs
// it read, and how many had none (a step that was reconciled as applied
// after its worker died records no output).
type faultOut struct {
	Step    string `json:"step"`
	Read    int    `json:"read"`
	Missing int    `json:"missing"`
}

// The victim modes: the test marks a step's operation id with one; the
// first process to run it (and no other victim) plays it out.
const (
	// killAfterEffect: the effect is applied, then the process waits to be
	// SIGKILLed before completing the step.
	killAfterEffect = "kill-after-effect"
	// killBeforeEffect: the process waits to be SIGKILLed before the effect.
	killBeforeEffect = "kill-before-effect"
	// stopBeforeEffect: the process waits to be SIGSTOPped past its lease,
	// resumed and released; then it writes the effect with its old token.
	stopBeforeEffect = "stop-before-effect"
)

// faultWorker runs FaultStep in a helper process.
type faultWorker struct {
	proc  string
	rdb   redis.UniversalClient
	ns    string
	store *pgfence.Store
	table string
}

func (w *faultWorker) key(s string) string { return w.ns + ":test:" + s }

func (w *faultWorker) Work(ctx context.Context, j *jobs.Job[FaultStep]) error {
	f, ok := fence.FromContext(ctx)
	if !ok {
		return jobs.Permanent(errors.New("no fence in the handler's context"))
	}
	if mode, err := w.victim(ctx, j.OperationID); err != nil {
		return err
	} else if mode != "" {
		return w.playVictim(ctx, j, f, mode)
	}
	out := faultOut{Step: j.Args.Name}
	for _, d := range j.Args.Deps {
		var o faultOut
		switch err := j.DependencyOutput(ctx, d, &o); {
		case errors.Is(err, jobs.ErrNoOutput):
			out.Missing++
		case err != nil:
			return err
		default:
			out.Read++
		}
	}
	if err := w.apply(ctx, f, j.Args.Name); err != nil && !errors.Is(err, fence.ErrAlreadyApplied) {
		return err
	}
	return jobs.RecordOutput(ctx, out)
}

// victim returns the victim mode this attempt plays, "" for none: the
// step's mode when no attempt played it yet and this process plays no
// other (so victims are distinct processes).
func (w *faultWorker) victim(ctx context.Context, op string) (string, error) {
	mode, err := w.rdb.HGet(ctx, w.key("victims"), op).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if ok, err := w.rdb.HSetNX(ctx, w.key("victim-procs"), w.proc, op).Result(); err != nil || !ok {
		return "", err
	}
	ok, err := w.rdb.HSetNX(ctx, w.key("victimized"), op, w.proc).Result()
	if err != nil || !ok {
		w.rdb.HDel(ctx, w.key("victim-procs"), w.proc)
		return "", err
	}
	return mode, nil
}

// playVictim signals the test (mode, pid, step) and waits for its signal.
func (w *faultWorker) playVictim(ctx context.Context, j *jobs.Job[FaultStep], f fence.Fence, mode string) error {
	bg := context.WithoutCancel(ctx) // a paused worker that ignores its lost lease
	if mode == killAfterEffect {
		if err := w.apply(bg, f, j.Args.Name); err != nil {
			return err
		}
	}
	w.rdb.RPush(bg, w.key("signals"), fmt.Sprintf("%s %d %s", mode, os.Getpid(), j.OperationID))
	if mode != stopBeforeEffect {
		select {} // killed here
	}
	for {
		err := w.rdb.BLPop(bg, 5*time.Second, w.key("release:"+j.OperationID)).Err()
		if err == nil {
			break
		}
		if !errors.Is(err, redis.Nil) {
			time.Sleep(100 * time.Millisecond) // a timeout of a connection stopped with the process
		}
	}
	err := w.apply(bg, f, j.Args.Name)
	outcome := "applied"
	switch {
	case errors.Is(err, fence.ErrStale):
		outcome = "stale"
	case err != nil:
		outcome = "error"
	}
	w.rdb.RPush(bg, w.key("late-writes"), j.OperationID+" "+outcome)
	if err != nil {
		return err
	}
	return jobs.RecordOutput(ctx, faultOut{Step: j.Args.Name})
}

// apply writes the step's effect, fenced: one row per application.
func (w *faultWorker) apply(ctx context.Context, f fence.Fence, step string) error {
	return w.store.Apply(ctx, f, func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "INSERT INTO "+w.table+" (op, step, token, proc) VALUES ($1, $2, $3, $4)",
			f.OperationID, step, f.Token.String(), w.proc)
		return err
	})
}

// runFaultWorker is a helper process: a pool over both queues until
// SIGTERM, its maintenance reconciling through the effect log.
func runFaultWorker(proc string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("FENCEDQ_REDIS")})
	defer rdb.Close()
	schema := os.Getenv("FENCEDQ_PG_SCHEMA")
	pg, err := pgxpool.New(ctx, pgtest.URL())
	if err != nil {
		logger.Error("postgres", "err", err)
		return 2
	}
	defer pg.Close()
	store, err := pgfence.New(pg, pgfence.Options{Schema: schema})
	if err != nil {
		logger.Error("pgfence", "err", err)
		return 2
	}
	ns := os.Getenv("FENCEDQ_NS")
	p, err := worker.NewPool(rdb, worker.Config{
		// One slot: a process playing a victim (blocked until the test
		// kills or stops it) claims nothing else, so every victim step is
		// played by a process of its own and no other step is caught in
		// a killed or stopped process.
		Jobs: jobs.Config{Namespace: ns}, Queues: map[string]int{qa: 1, qb: 1}, Concurrency: 1,
		LeaseTTL: time.Second, WorkerID: proc, Logger: logger,
		RetryDelay:  func(int) time.Duration { return 50 * time.Millisecond },
		Maintenance: worker.MaintenanceConfig{Interval: 200 * time.Millisecond, MaxReconcileTries: 50, EffectLog: store},
	})
	if err != nil {
		logger.Error("pool", "err", err)
		return 2
	}
	w := &faultWorker{proc: proc, rdb: rdb, ns: ns, store: store, table: schema + ".effects"}
	if err := worker.Register(p, jobs.Worker[FaultStep](w)); err != nil {
		logger.Error("register", "err", err)
		return 2
	}
	if err := p.Run(ctx); err != nil {
		logger.Error("run", "err", err)
		return 1
	}
	return 0
}

// faultEnv is a fault test's Redis (AOF), PostgreSQL schema and helper
// processes.
type faultEnv struct {
	t      *testing.T
	srv    *redistest.Server
	rdb    *redis.Client
	ns     string
	pg     *pgxpool.Pool
	schema string
	client *jobs.Client
	ledger *ledger.Ledger
	procs  map[int]*exec.Cmd // by pid
	n      int
}

func newFaultEnv(t *testing.T) *faultEnv {
	srv := redistest.Start(t, redistest.Options{AOF: true})
	rdb := srv.Client()
	ns := redistest.Namespace(t)
	pg := pgtest.New(t)
	schema := pg.Config().ConnConfig.RuntimeParams["search_path"]
	ctx := context.Background()
	if err := pgfence.Migrate(ctx, pg, pgfence.Options{Schema: schema}); err != nil {
		t.Fatal(err)
	}
	// no unique key: every application of an effect is a row
	if _, err := pg.Exec(ctx, "CREATE TABLE "+schema+".effects (op text, step text, token text, proc text)"); err != nil {
		t.Fatal(err)
	}
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	t.Cleanup(func() { _ = c.Close() })
	return &faultEnv{t: t, srv: srv, rdb: rdb, ns: ns, pg: pg, schema: schema, client: c,
		ledger: ledger.New(rdb, ledger.Config{Namespace: ns}), procs: map[int]*exec.Cmd{}}
}

func (e *faultEnv) key(s string) string { return e.ns + ":test:" + s }

// startWorker starts a helper process.
func (e *faultEnv) startWorker() {
	e.n++
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=proc-"+strconv.Itoa(e.n), "FENCEDQ_REDIS="+e.srv.Addr,
		"FENCEDQ_NS="+e.ns, "FENCEDQ_PG_SCHEMA="+e.schema)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.procs[cmd.Process.Pid] = cmd
	e.t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_, _ = cmd.Process.Wait()
	})
}

// signal waits for the next victim's signal: its mode, process and step's
// operation id.
func (e *faultEnv) signal() (string, *exec.Cmd, string) {
	e.t.Helper()
	v, err := e.rdb.BLPop(context.Background(), 60*time.Second, e.key("signals")).Result()
	if err != nil {
		e.t.Fatalf("waiting for a victim's signal: %v", err)
	}
	f := strings.Fields(v[1])
	pid, _ := strconv.Atoi(f[1])
	cmd := e.procs[pid]
	if cmd == nil {
		e.t.Fatalf("signal from unknown process %d", pid)
	}
	return f[0], cmd, f[2]
}

// kill SIGKILLs cmd and waits for it.
func (e *faultEnv) kill(cmd *exec.Cmd) {
	if err := cmd.Process.Kill(); err != nil {
		e.t.Fatal(err)
	}
	_, _ = cmd.Process.Wait()
}

// fanOut is split → page-00..page-(n-1) → join, pages alternating queues.
func fanOut(n int) *workflow.Workflow {
	w := workflow.New("export").Add("split", FaultStep{Name: "split"}, workflow.Options(jobs.Queue(qa)))
	var pages []string
	for i := range n {
		p := fmt.Sprintf("page-%02d", i)
		pages = append(pages, p)
		w.Add(p, FaultStep{Name: p, Deps: []string{"split"}}, workflow.After("split"),
			workflow.Options(jobs.Queue([]string{qa, qb}[i%2])))
	}
	return w.Add("join", FaultStep{Name: "join", Deps: pages}, workflow.After(pages...), workflow.Options(jobs.Queue(qb)))
}

// order is charge → (reserve, invoice) → ship across both queues.
func order() *workflow.Workflow {
	return workflow.New("order").
		Add("charge", FaultStep{Name: "charge"}, workflow.Options(jobs.Queue(qa))).
		Add("reserve", FaultStep{Name: "reserve", Deps: []string{"charge"}}, workflow.After("charge"), workflow.Options(jobs.Queue(qb))).
		Add("invoice", FaultStep{Name: "invoice", Deps: []string{"charge"}}, workflow.After("charge"), workflow.Options(jobs.Queue(qa))).
		Add("ship", FaultStep{Name: "ship", Deps: []string{"reserve", "invoice"}}, workflow.After("reserve", "invoice"), workflow.Options(jobs.Queue(qb)))
}

// checkOnce waits for every workflow to succeed, then checks each step's
// effect was applied exactly once, under the token its job ended with, and
// that every dependent step became pending exactly once (the queues'
// promoted counters sum to the number of steps with dependencies: each
// such step ran, so each was promoted at least once).
func (e *faultEnv) checkOnce(ress ...*workflow.Result) {
	e.t.Helper()
	ctx := context.Background()
	dependents := 0
	for _, res := range ress {
		for name, ref := range res.Steps {
			jobstest.WaitStateWithin(e.t, e.ledger, ref.Queue, ref.JobID, jobs.Succeeded, 90*time.Second)
			if name != "split" && name != "charge" {
				dependents++
			}
		}
		st, err := workflow.Get(ctx, e.client, res.ID)
		if err != nil {
			e.t.Fatal(err)
		}
		if st.State != workflow.Succeeded || st.Done != st.Total {
			e.t.Fatalf("workflow %s: %s, %d of %d done", st.Name, st.State, st.Done, st.Total)
		}
		for _, s := range st.Steps {
			rows, err := e.pg.Query(ctx, "SELECT token, proc FROM "+e.schema+".effects WHERE op = $1",
				st.OperationID+"/"+s.Name)
			if err != nil {
				e.t.Fatal(err)
			}
			var applied []string
			for rows.Next() {
				var token, proc string
				if err := rows.Scan(&token, &proc); err != nil {
					e.t.Fatal(err)
				}
				applied = append(applied, token+" by "+proc)
				if token != s.Token.String() {
					e.t.Errorf("step %s/%s: effect applied under token %s, the step ended under %s", st.Name, s.Name, token, s.Token)
				}
			}
			if rows.Err() != nil {
				e.t.Fatal(rows.Err())
			}
			if len(applied) != 1 {
				e.t.Errorf("step %s/%s: effect applied %d times (%v), want once", st.Name, s.Name, len(applied), applied)
			}
		}
	}
	var promoted int64
	for _, q := range []string{qa, qb} {
		stats, err := e.client.Inspector().Stats(ctx, q)
		if err != nil {
			e.t.Fatal(err)
		}
		promoted += stats["promoted"]
	}
	if promoted != int64(dependents) {
		e.t.Errorf("%d promotions of %d dependent steps: each must become pending once", promoted, dependents)
	}
}

// TestFaultsKilledAndStoppedWorkersMidGraph: an order (charge → (reserve,
// invoice) → ship) and an export (split → 20 pages → join) run by worker
// processes writing their effects through pgfence. Mid-graph, the worker
// running reserve is SIGKILLed after its effect was applied (the step is
// reconciled as applied), the one running the fan-in join is SIGKILLed
// before its effect (it runs again elsewhere), and the one running page-07
// is SIGSTOPped before its effect until the page ran elsewhere, then
// resumed: its write with the old token is fenced out. Every step's effect
// is applied once, every dependent becomes pending once, both workflows
// succeed.
func TestFaultsKilledAndStoppedWorkersMidGraph(t *testing.T) {
	if testing.Short() {
		t.Skip("worker processes")
	}
	e := newFaultEnv(t)
	ctx := context.Background()
	victims := map[string]string{"order:1/reserve": killAfterEffect, "export:1/join": killBeforeEffect,
		"export:1/page-07": stopBeforeEffect}
	for op, mode := range victims {
		e.rdb.HSet(ctx, e.key("victims"), op, mode)
	}
	for range 4 {
		e.startWorker()
	}
	ord, err := workflow.Enqueue(ctx, e.client, order(), workflow.OperationID("order:1"))
	if err != nil {
		t.Fatal(err)
	}
	exp, err := workflow.Enqueue(ctx, e.client, fanOut(20), workflow.OperationID("export:1"))
	if err != nil {
		t.Fatal(err)
	}
	steps := map[string]workflow.StepRef{}
	for n, r := range ord.Steps {
		steps["order:1/"+n] = r
	}
	for n, r := range exp.Steps {
		steps["export:1/"+n] = r
	}
	for range victims {
		mode, cmd, op := e.signal()
		switch mode {
		case killAfterEffect, killBeforeEffect:
			e.kill(cmd)
			e.startWorker()
		case stopBeforeEffect:
			if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			ref := steps[op]
			// its lease expires; the effect log says not applied; it runs again elsewhere
			jobstest.WaitStateWithin(t, e.ledger, ref.Queue, ref.JobID, jobs.Succeeded, 90*time.Second)
			if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			e.rdb.RPush(ctx, e.key("release:"+op), "go")
			v, err := e.rdb.BLPop(ctx, 60*time.Second, e.key("late-writes")).Result()
			if err != nil {
				t.Fatalf("the resumed worker's late write: %v", err)
			}
			if v[1] != op+" stale" {
				t.Fatalf("the resumed worker's late write: %q, want %q", v[1], op+" stale")
			}
		}
	}
	e.checkOnce(ord, exp)
	var out faultOut
	ref := exp.Steps["join"]
	if err := e.client.Output(ctx, ref.Queue, ref.JobID, &out); err != nil {
		t.Fatal(err)
	}
	if out.Read+out.Missing != 20 {
		t.Fatalf("join's output %+v: it looked at the 20 pages' outputs", out)
	}
	// ship's dependency reserve was reconciled as applied: it has no output
	// (nor has any step that was in flight in a killed or stopped worker)
	ref = ord.Steps["ship"]
	if err := e.client.Output(ctx, ref.Queue, ref.JobID, &out); err != nil {
		t.Fatal(err)
	}
	if out.Read+out.Missing != 2 || out.Missing < 1 {
		t.Fatalf("ship's output %+v: reserve's missing", out)
	}
}

// TestRedisRestartMidGraph: two worker processes run an export (split →
// 20 pages → join, across two queues) and an order, queue wfb paused: once
// some of wfa's steps succeeded (others in flight, wfb's dependents
// promoted but not run), Redis is restarted from its AOF and wfb resumed.
// Every step's effect is applied once, every dependent becomes pending
// once, both workflows succeed.
func TestRedisRestartMidGraph(t *testing.T) {
	if testing.Short() {
		t.Skip("worker processes")
	}
	e := newFaultEnv(t)
	ctx := context.Background()
	if _, err := e.client.Pause(ctx, qb, "test", "until the restart"); err != nil {
		t.Fatal(err)
	}
	e.startWorker()
	e.startWorker()
	exp, err := workflow.Enqueue(ctx, e.client, fanOut(20), workflow.OperationID("export:2"))
	if err != nil {
		t.Fatal(err)
	}
	ord, err := workflow.Enqueue(ctx, e.client, order(), workflow.OperationID("order:2"))
	if err != nil {
		t.Fatal(err)
	}
	redistest.AwaitWithin(t, e.rdb, e.ns, "4 steps succeeded", 60*time.Second, func() bool {
		c, err := e.client.Inspector().Counts(ctx, qa)
		if err != nil {
			t.Fatal(err)
		}
		return c[jobs.Succeeded] >= 4
	})
	e.srv.Restart()
	if _, err := e.client.Resume(ctx, qb, "test", "restarted"); err != nil {
		t.Fatal(err)
	}
	e.checkOnce(exp, ord)
}
