package main

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/examples/bank"
	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/internal/cli"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/syncbuf"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// Memos that stage the demo's failures.
const (
	memoPause   = "demo: paused worker"
	memoSlowAck = "demo: answer after timeout"
	memoCrash   = "demo: crash after effect"
	// memoNoReport's first attempt gets no answer from the bank, and the
	// bank's report of it stays unreachable: the reconciler cannot tell,
	// and the job is left in review for the operator.
	memoNoReport = "demo: bank report unreachable"
)

// heldQueue is the queue the demo pauses with one transfer in it, left for
// the operator to resume.
const heldQueue = "held"

// summary is what the demo prints at the end.
type summary struct {
	Duration          string `json:"duration"`
	Enqueued          int    `json:"enqueued"`
	Submissions       int    `json:"submissions"`
	Succeeded         int    `json:"succeeded"`
	Dead              int    `json:"dead"`
	Deduplicated      int64  `json:"deduplicated"`
	FencedRejections  int64  `json:"fenced_rejections"`
	UncertainResolved int64  `json:"uncertain_resolved"`
	InReview          int    `json:"in_review"`
	Unfinished        int    `json:"unfinished"`
	// LeftForOperator are the jobs the demo leaves on purpose: one in
	// review, one waiting in a paused queue.
	LeftForOperator []leftJob `json:"left_for_operator"`
	Lost            int       `json:"lost"`
	MoneyConserved  bool      `json:"money_conserved"`
	// ExactlyOnce is true when every account's balance is what applying
	// each transfer whose effect the store recorded exactly once gives (a
	// transfer applied twice keeps the sum but not the balances), and no
	// job that ended dead has an effect.
	ExactlyOnce bool `json:"exactly_once"`
	// BalanceDiffs names the accounts whose balance differs from the
	// expected one ("account: expected X, is Y"; sorted; empty when they
	// all match).
	BalanceDiffs []string `json:"balance_diffs,omitempty"`
	// AppliedButDead counts jobs that ended dead although their effect is
	// in the store (must be 0).
	AppliedButDead int      `json:"applied_but_dead"`
	Stages         []string `json:"stages"`
	// Verdicts judge every staged failure and every global check: what
	// happened, what had to happen, and whether it did.
	Verdicts []verdict `json:"verdicts"`
}

func demoCmd(fs *flag.FlagSet) func(context.Context, io.Writer) error {
	redisURL := fs.String("redis", "", "Redis URL or host:port (default: an embedded in-process Redis); the demo runs there only in an empty namespace or one it created")
	postgres := fs.String("postgres", "", "PostgreSQL URL for the bank's accounts (default: in Redis via redisfence)")
	ns := fs.String("namespace", "", "key namespace: empty, or one the demo created (default: a fresh demo-<random> one, so the summary counts only this run)")
	exit := fs.Bool("exit", false, "exit after the summary (default: keep the dashboard up until Ctrl-C; --json always exits)")
	addr := fs.String("addr", "127.0.0.1:8080", "dashboard address (port 0 picks a free port)")
	duration := fs.Duration("duration", 30*time.Second, "how long to run (Ctrl-C ends it early)")
	rate := fs.Int("rate", 20, "transfers enqueued per second")
	accounts := fs.Int("accounts", 20, "number of bank accounts")
	asJSON := fs.Bool("json", false, "print the summary as JSON")
	var logs cli.LogFlags
	logs.Add(fs, slog.LevelError)
	return func(ctx context.Context, out io.Writer) error {
		if *duration < 5*time.Second {
			return fmt.Errorf("%w: --duration must be at least 5s", errUsage)
		}
		if *rate <= 0 || *accounts < 2 {
			return fmt.Errorf("%w: --rate must be positive and --accounts at least 2", errUsage)
		}
		if *ns != "" {
			if err := jobs.ValidateNamespace(*ns); err != nil {
				return fmt.Errorf("%w: --namespace: %v", errUsage, err)
			}
		}
		d := &demo{out: out, progress: out, ns: *ns, rate: *rate, accounts: bank.Accounts(*accounts), postgres: *postgres}
		if *asJSON {
			d.progress = os.Stderr
		}
		if d.ns == "" {
			d.ns = "demo-" + randomHex(4)
		}
		fmt.Fprintf(d.progress, "namespace %s\n", d.ns)
		var verdict error
		_, err := d.run(ctx, *redisURL, *addr, *duration, logs.Logger(os.Stderr), func(s *summary) {
			verdict = report(out, s, *asJSON)
			if *exit || *asJSON || ctx.Err() != nil {
				return
			}
			fmt.Fprintf(d.progress, "\nThe dashboard stays up at %s for you to explore (the pools still run, idle but for what you do). Ctrl-C to exit; --exit ends the demo after the summary.\n", d.dashURL)
			if !*asJSON {
				printLeft(d.progress, s.LeftForOperator, d.dashURL)
			}
			<-ctx.Done()
		})
		if err != nil {
			return err
		}
		return verdict
	}
}

// errCheckFailed is the demo's verdict when its checks fail: the process
// exits 1, with --json as without.
var errCheckFailed = errors.New("the checker found lost jobs, lost money or an effect not applied exactly once")

// report prints the summary (as JSON with asJSON) and fails when a check
// failed.
func report(out io.Writer, s *summary, asJSON bool) error {
	if asJSON {
		if err := json.NewEncoder(cli.JSONWriter(out)).Encode(s); err != nil {
			return err
		}
	} else {
		printSummary(out, s)
	}
	if s.Lost > 0 || !s.MoneyConserved || !s.ExactlyOnce || s.failed() > 0 {
		return errCheckFailed
	}
	return nil
}

type demo struct {
	out, progress io.Writer
	ns            string
	rate          int
	accounts      []string
	postgres      string
	redisURL      string
	dashURL       string

	rdb    redis.UniversalClient
	client *jobs.Client
	store  bank.Store
	reg    *prometheus.Registry

	mu          sync.Mutex
	ids         map[string]bool // job ids enqueued
	ops         map[string]int  // submissions per operation id
	submissions int
	stages      []string
	staged      map[string]stagedJob // the job each stage enqueued, by check name
	stray       *strayResult         // what the stray due-entry stage saw
	left        []leftJob            // the jobs left for the operator
}

// leftJob is a job the demo leaves for the operator, and what to do.
type leftJob struct {
	Queue string `json:"queue"`
	ID    string `json:"id"`
	State string `json:"state"`
	What  string `json:"what"`
}

func (d *demo) stage(format string, a ...any) {
	msg := fmt.Sprintf(format, a...)
	d.mu.Lock()
	d.stages = append(d.stages, msg)
	d.mu.Unlock()
	fmt.Fprintln(d.progress, "  * "+cli.Escape(msg))
}

// run runs the demo and summarizes it; summarized is called with the
// summary while the pools and the dashboard still run.
func (d *demo) run(ctx context.Context, redisURL, addr string, duration time.Duration, log *slog.Logger, summarized func(*summary)) (*summary, error) {
	start := time.Now()
	d.ids = map[string]bool{}
	d.ops = map[string]int{}
	d.staged = map[string]stagedJob{}
	if redisURL == "" {
		m := miniredis.NewMiniRedis()
		if err := m.Start(); err != nil {
			return nil, fmt.Errorf("embedded redis: %w", err)
		}
		defer m.Close()
		stopClock := make(chan struct{})
		defer close(stopClock)
		go func() { // let TTLs pass like on a real server
			t := time.NewTicker(50 * time.Millisecond)
			defer t.Stop()
			last := time.Now()
			for {
				select {
				case <-stopClock:
					return
				case now := <-t.C:
					m.FastForward(now.Sub(last))
					last = now
				}
			}
		}()
		redisURL = "redis://" + m.Addr()
		fmt.Fprintf(d.progress, "embedded Redis on %s\n", m.Addr())
	}
	d.redisURL = redisURL
	rdb, err := cli.ConnectRedis(ctx, redisURL)
	if err != nil {
		return nil, err
	}
	defer rdb.Close()
	d.rdb = rdb
	if err := claimNamespace(ctx, rdb, d.ns); err != nil {
		if errors.Is(err, errForeignNamespace) {
			return nil, fmt.Errorf("%w: --namespace %s on redis %s: %w: the demo stages failures (a killed worker, late writes, a stray due entry) and runs only in a namespace of its own; give --namespace a new name, or leave it out for a fresh demo-<random> one",
				errUsage, d.ns, cli.RedactURL(redisURL), err)
		}
		return nil, err
	}
	store, closeStore, err := bank.OpenStore(ctx, d.postgres, rdb, d.ns)
	if err != nil {
		return nil, err
	}
	defer closeStore()
	d.store = store
	if err := store.Setup(ctx, d.accounts, 100_000); err != nil {
		return nil, err
	}
	before, err := store.Balances(ctx)
	if err != nil {
		return nil, err
	}
	d.client = jobs.NewClient(rdb, jobs.Config{Namespace: d.ns})
	defer d.client.Close()
	d.reg = prometheus.NewRegistry()

	// Two in-process pools share a store that stages the pause and the
	// late answer.
	staged := &stagingStore{Store: store, paused: map[string]bool{}, unreachable: map[string]bool{}}
	runCtx, stopPools := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	for _, name := range []string{"demo-worker-a", "demo-worker-b"} {
		p, err := worker.NewPool(rdb, worker.Config{
			Jobs: jobs.Config{Namespace: d.ns}, Concurrency: 8, Queues: map[string]int{"default": 1, heldQueue: 1}, WorkerID: name,
			LeaseTTL: time.Second, HandlerTimeout: 10 * time.Second, ShutdownTimeout: 5 * time.Second,
			RetryDelay: func(int) time.Duration { return 200 * time.Millisecond },
			Logger:     log, Registerer: d.reg,
			Maintenance: worker.MaintenanceConfig{Interval: 250 * time.Millisecond, EffectLog: store},
		})
		if err != nil {
			stopPools()
			return nil, err
		}
		if err := worker.Register(p, &bank.Worker{Store: staged}); err != nil {
			stopPools()
			return nil, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A *worker.ShutdownError names jobs recorded uncertain at the
			// stop: the maintenance leader resolves them, so it is no failure.
			if err := p.Run(runCtx); err != nil {
				log.Warn("pool stopped", "pool", name, "error", err)
			}
		}()
	}
	defer func() { stopPools(); wg.Wait() }()

	// Dashboard, with actions enabled for this run only.
	pw := randomHex(8)
	h, err := dashboard.New(nil, d.client, dashboard.Options{Username: "demo", Password: pw, Logger: log})
	if err != nil {
		return nil, err
	}
	ready := make(chan string, 1)
	serveErr := make(chan error, 1)
	go func() { serveErr <- cli.ListenAndServe(runCtx, "--addr", addr, h, func(a string) { ready <- a }) }()
	select {
	case a := <-ready:
		d.dashURL = "http://" + a + "/"
		fmt.Fprintf(d.progress, "dashboard: %s  (actions: user demo, password %s)\n", d.dashURL, pw)
	case err := <-serveErr:
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	fmt.Fprintf(d.progress, "running for %v: %d transfers/s between %d accounts for the first %v, staging failures, then letting them settle\n",
		duration, d.rate, len(d.accounts), duration*6/10)

	end := start.Add(duration)
	feedEnd := start.Add(duration * 6 / 10)
	feedCtx, stopFeed := context.WithDeadline(ctx, feedEnd)
	defer stopFeed()
	var feedWG sync.WaitGroup
	feedWG.Add(2)
	go func() { defer feedWG.Done(); d.feed(feedCtx) }()
	go func() { defer feedWG.Done(); d.stageFailures(feedCtx, ctx, staged) }()
	reportCtx, stopReport := context.WithCancel(ctx)
	reported := make(chan struct{})
	go func() { defer close(reported); d.report(reportCtx, start, end) }()
	defer func() { stopReport(); <-reported }()
	feedWG.Wait()
	if left, err := d.unfinished(ctx); err == nil {
		fmt.Fprintf(d.progress, "new transfers stopped; %d job(s) still to finish: watch the staged crash and timeouts settle (the maintenance leader reconciles uncertain jobs)\n", left)
	}
	if ctx.Err() == nil {
		d.leaveForOperator(ctx, staged)
	}

	// Drain: wait for the stream to settle, until the duration ends (and
	// a little past it if work is still in flight).
	for {
		left, _ := d.unfinished(ctx)
		if (left == 0 && !time.Now().Before(end)) || ctx.Err() != nil || time.Now().After(end.Add(15*time.Second)) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Progress lines end here: the summary is the last word.
	stopReport()
	<-reported
	sctx := context.WithoutCancel(ctx)
	s, err := d.summarize(sctx, before)
	if err != nil {
		return nil, err
	}
	s.Duration = time.Since(start).Round(100 * time.Millisecond).String()
	if summarized != nil {
		summarized(s)
	}
	return s, nil
}

// feed enqueues random transfers, resubmitting some operation ids.
func (d *demo) feed(ctx context.Context) {
	tick := time.NewTicker(time.Second / time.Duration(d.rate))
	defer tick.Stop()
	n := 0
	var lastOp string
	var lastT bank.Transfer
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		n++
		if n%10 == 0 && lastOp != "" { // a client retrying a submission
			d.enqueue(ctx, lastT, jobs.OperationID(lastOp))
			continue
		}
		i := rand.N(len(d.accounts))
		j := (i + 1 + rand.N(len(d.accounts)-1)) % len(d.accounts)
		t := bank.Transfer{From: d.accounts[i], To: d.accounts[j], Cents: 1 + rand.Int64N(500), Memo: "invoice " + randomHex(3)}
		lastOp = fmt.Sprintf("transfer-%d-%s", n, randomHex(4))
		lastT = t
		d.enqueue(ctx, t, jobs.OperationID(lastOp))
	}
}

// enqueueTimeout bounds one enqueue of the demo.
const enqueueTimeout = 10 * time.Second

// enqueue enqueues t and remembers its job for the checks; a feed that
// already ended enqueues nothing.
func (d *demo) enqueue(ctx context.Context, t bank.Transfer, opts ...jobs.Option) *jobs.Result {
	if ctx.Err() != nil {
		return nil
	}
	// An enqueue once started is not cut off when the feed ends: a caller
	// that gave up waiting could not tell whether Redis took the job, and
	// a job that ran without being counted would break the balance check.
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), enqueueTimeout)
	defer cancel()
	res, err := d.client.Enqueue(ectx, t, opts...)
	if err != nil {
		fmt.Fprint(d.progress, cli.Escapef("  ! enqueue: %v\n", err))
		return nil
	}
	d.mu.Lock()
	d.ids[res.JobID] = true
	d.ops[res.OperationID]++
	d.submissions++
	d.mu.Unlock()
	return res
}

// enqueueStaged enqueues a stage's job and remembers it for the verdict.
func (d *demo) enqueueStaged(ctx context.Context, check string, t bank.Transfer, opts ...jobs.Option) *jobs.Result {
	res := d.enqueue(ctx, t, opts...)
	if res != nil {
		d.mu.Lock()
		d.staged[check] = stagedJob{queue: res.Queue, id: res.JobID, op: res.OperationID}
		d.mu.Unlock()
	}
	return res
}

// stageFailures stages a paused worker, a late answer, a crash and a
// finished job found due again. Stages start while ctx (the feed) lasts;
// the crash and stray stages, once started, run to their end under runCtx,
// so a short run or a slow machine does not cut them off mid-way (the
// crash between its enqueue and the kill, the stray stage before its
// entry is dropped), and the stray stage follows the crash stage even when
// the feed ended meanwhile.
func (d *demo) stageFailures(ctx, runCtx context.Context, staged *stagingStore) {
	sleep := func(dur time.Duration) bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(dur):
			return true
		}
	}
	if !sleep(time.Second) {
		return
	}
	d.enqueueStaged(ctx, checkPaused, bank.Transfer{From: d.accounts[0], To: d.accounts[1], Cents: 100, Memo: memoPause}, jobs.Timeout(500*time.Millisecond))
	d.stage("a worker pauses mid-transfer past its 1s lease (3s, or until the re-run wrote); the job is re-run with a higher token and the paused worker's late write must be fenced out")
	if !sleep(500 * time.Millisecond) {
		return
	}
	d.enqueueStaged(ctx, checkLateAnswer, bank.Transfer{From: d.accounts[2], To: d.accounts[3], Cents: 100, Memo: memoSlowAck}, jobs.Timeout(300*time.Millisecond))
	d.stage("storage accepts a transfer but answers after the job's timeout: the job must end uncertain and be reconciled, not re-applied")
	if !sleep(500 * time.Millisecond) {
		return
	}
	if err := d.crash(runCtx); err != nil {
		d.stage("crash stage skipped: %v", err)
	}
	// The stray stage follows even when the feed ended during the crash
	// stage (a slow machine): it needs a succeeded transfer, not new ones.
	sleep(500 * time.Millisecond)
	d.strayDueEntry(runCtx)
}

// crashWorkerEnv, set to "1" in a fencedq-demo process's environment,
// makes it the demo's crash-stage worker instead of the demo: only the
// crash stage sets it, when it re-executes its own binary (no FENCEDQ_
// prefix: the demo reads no FENCEDQ_ variable). The process
// takes the bank-worker's flags (bank.WorkerConfig) and runs the same
// worker (bank.RunWorker), which stalls forever after applying the
// transfer memoCrash and waits for the demo's SIGKILL.
const crashWorkerEnv = "FQDEMO_CRASH_WORKER"

// crashWorker is the process crashWorkerEnv selects; it returns the exit
// code.
func crashWorker(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cli.QuietRedis()
	fs := flag.NewFlagSet("fencedq-demo (crash worker)", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var cfg bank.WorkerConfig
	cfg.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		fmt.Fprint(stderr, cli.Escapef("%s: %v\n", fs.Name(), err))
		return 2
	}
	cfg.StallAfterMemo = memoCrash
	cfg.Logger = slog.New(slog.NewJSONHandler(cli.JSONWriter(stderr), &slog.HandlerOptions{Level: slog.LevelError}))
	if err := bank.RunWorker(ctx, cfg, stdout); err != nil {
		fmt.Fprint(stderr, cli.Escapef("%s: %v\n", fs.Name(), err))
		return 1
	}
	return 0
}

// crash runs a worker process (this binary in its crashWorkerEnv mode),
// lets it apply a transfer, and SIGKILLs it before its ledger commit.
func (d *demo) crash(ctx context.Context) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	args := []string{"--redis", d.redisURL, "--namespace", d.ns, "--queues", "crash=1",
		"--lease-ttl", "1s", "--maintenance=false"}
	if d.postgres != "" {
		args = append(args, "--postgres", d.postgres)
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(withoutFencedqEnv(os.Environ()), crashWorkerEnv+"=1")
	output := &syncbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = output, output
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	res := d.enqueueStaged(ctx, checkCrash, bank.Transfer{From: d.accounts[4], To: d.accounts[5], Cents: 100, Memo: memoCrash}, jobs.Queue("crash"))
	if res == nil {
		return errors.New("could not enqueue the crash transfer")
	}
	deadline := time.Now().Add(30 * time.Second) // a process start on a loaded machine can take long
	for !strings.Contains(output.String(), "stalling before the ledger commit") {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("worker process did not reach the effect: %s", strings.TrimSpace(output.String()))
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	d.stage("a worker process (pid %d) applied a transfer and was killed with SIGKILL before its ledger commit: the effect log must resolve the job, not re-apply it", cmd.Process.Pid)
	return nil
}

// withoutFencedqEnv drops the FENCEDQ_ variables from env: the crash
// worker takes its Redis and namespace from its flags alone.
func withoutFencedqEnv(env []string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return strings.HasPrefix(kv, cli.EnvPrefix) })
}

// strayWait bounds the wait for a claim to drop the stray entry: an idle
// pool finds it at its next idle look (FetchPollInterval), later on a
// loaded machine.
const strayWait = 15 * time.Second

// strayDueEntry puts a succeeded job back in the queue's due index, as a
// duplicate write or a restored backup could: the next claim must drop the
// entry (counted as deduplicated_execute) and the handler must not run.
func (d *demo) strayDueEntry(ctx context.Context) {
	const q = "default"
	l := ledger.New(d.rdb, ledger.Config{Namespace: d.ns})
	ids, err := l.IDs(ctx, q, jobs.Succeeded, 0, 1)
	if err != nil || len(ids) == 0 {
		d.stage("stray due-index stage skipped: no succeeded transfer yet (%v)", err)
		return
	}
	id := ids[0]
	rec, err := l.Get(ctx, q, id)
	if err != nil {
		d.stage("stray due-index stage skipped: %v", err)
		return
	}
	dedupBefore := d.queueStat(ctx, q, "deduplicated_execute")
	now, err := l.ServerTime(ctx)
	if err == nil {
		err = d.rdb.ZAdd(ctx, l.StateKey(q, jobs.Pending), redis.Z{Score: float64(now.UnixMilli()), Member: id}).Err()
	}
	if err != nil {
		d.stage("stray due-index stage skipped: %v", err)
		return
	}
	d.stage("succeeded transfer %s is put back in the queue's due index (as a duplicate write or a restored backup could): the next claim must drop it without running the handler", id)
	res := &strayResult{id: id, attempts: rec.Attempts, token: rec.Token}
	d.mu.Lock()
	d.stray = res
	d.mu.Unlock()
	deadline := time.Now().Add(strayWait)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if d.queueStat(ctx, q, "deduplicated_execute") > dedupBefore {
			after, err := l.Get(ctx, q, id)
			d.mu.Lock()
			res.dropped = true
			if err == nil {
				res.after = after
			}
			d.mu.Unlock()
			if err == nil && after.State == jobs.Succeeded && after.Attempts == rec.Attempts && after.Token == rec.Token {
				d.stage("the claim dropped the stray entry of %s (deduplicated_execute +1); it is still succeeded after %d attempt(s) with token %d", id, after.Attempts, after.Token)
			} else {
				d.stage("the stray entry of %s was dropped, but the job changed: %+v (%v)", id, after, err)
			}
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// queueStat reads one of queue q's ledger counters (0 on error).
func (d *demo) queueStat(ctx context.Context, q, name string) int64 {
	st, err := d.client.Inspector().Stats(ctx, q)
	if err != nil {
		return 0
	}
	return st[name]
}

// unfinished counts enqueued jobs not yet final or in review.
func (d *demo) unfinished(ctx context.Context) (int, error) {
	n := 0
	l := d.client.Inspector()
	qs, err := l.Queues(ctx)
	if err != nil {
		return 0, err
	}
	for _, q := range qs {
		if q == heldQueue { // paused on purpose: left for the operator
			continue
		}
		c, err := l.Counts(ctx, q)
		if err != nil {
			return 0, err
		}
		n += int(c[jobs.Pending] + c[jobs.Running] + c[jobs.Uncertain])
	}
	return n, nil
}

func (d *demo) report(ctx context.Context, start, end time.Time) {
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if time.Now().After(end.Add(15 * time.Second)) {
			return
		}
		st := d.stats(ctx)
		fmt.Fprintf(d.progress, "[%4.0fs] enqueued %d  succeeded %d  deduplicated %d  fenced rejections %d  uncertain %d  resolved %d\n",
			time.Since(start).Seconds(), st["enqueued"], st["succeeded"],
			st["deduplicated_enqueue"]+st["deduplicated_execute"], st["fenced_commit"]+st["fenced_renew"]+d.storageRejections(),
			st["uncertain"], st["resolved_succeeded"]+st["resolved_rerun"])
	}
}

// stats sums every queue's ledger counters.
func (d *demo) stats(ctx context.Context) map[string]int64 {
	out := map[string]int64{}
	l := d.client.Inspector()
	qs, _ := l.Queues(ctx)
	for _, q := range qs {
		st, _ := l.Stats(ctx, q)
		for k, v := range st {
			out[k] += v
		}
	}
	return out
}

func (d *demo) summarize(ctx context.Context, before map[string]int64) (*summary, error) {
	st := d.stats(ctx)
	s := &summary{Stages: d.stages}
	d.mu.Lock()
	left := slices.Clone(d.left)
	d.mu.Unlock()
	for _, j := range left {
		if rec, err := d.client.Inspector().Get(ctx, j.Queue, j.ID); err == nil {
			j.State = string(rec.State)
		}
		s.LeftForOperator = append(s.LeftForOperator, j)
	}
	d.mu.Lock()
	s.Enqueued, s.Submissions = len(d.ids), d.submissions
	ids := make([]string, 0, len(d.ids))
	for id := range d.ids {
		ids = append(ids, id)
	}
	d.mu.Unlock()
	// The balances that applying each recorded effect exactly once gives.
	expected := maps.Clone(before)
	decodable := true
	for _, id := range ids {
		rec, err := d.client.Inspector().Find(ctx, id)
		if errors.Is(err, jobs.ErrNotFound) {
			s.Lost++
			continue
		}
		if err != nil {
			return nil, err
		}
		_, applied, err := d.store.Applied(ctx, rec.OperationID)
		if err != nil {
			return nil, err
		}
		if applied {
			var t bank.Transfer
			if json.Unmarshal(rec.Payload, &t) != nil {
				decodable = false
			}
			expected[t.From] -= t.Cents
			expected[t.To] += t.Cents
		}
		switch rec.State {
		case jobs.Succeeded:
			s.Succeeded++
			if !applied {
				s.Lost++ // succeeded without its effect
			}
		case jobs.Dead:
			s.Dead++
			if applied {
				s.AppliedButDead++
			}
		case jobs.Review:
			s.InReview++
		default:
			s.Unfinished++
		}
	}
	s.Deduplicated = st["deduplicated_enqueue"] + st["deduplicated_execute"]
	s.FencedRejections = st["fenced_commit"] + st["fenced_renew"] + d.storageRejections()
	s.UncertainResolved = st["resolved_succeeded"] + st["resolved_rerun"] + st["resolved_dead"]
	after, err := d.store.Balances(ctx)
	if err != nil {
		return nil, err
	}
	s.MoneyConserved = bank.Total(after) == bank.Total(before)
	s.ExactlyOnce = decodable && s.AppliedButDead == 0 && maps.Equal(expected, after)
	s.BalanceDiffs = balanceDiffs(expected, after)
	s.Verdicts, err = d.verdicts(ctx, s, st)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// storageRejections reads fencedq_fenced_rejections_total{stage="storage"}.
func (d *demo) storageRejections() int64 {
	fams, _ := d.reg.Gather()
	var n float64
	for _, f := range fams {
		if f.GetName() != "fencedq_fenced_rejections_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "stage" && l.GetValue() == "storage" {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return int64(n)
}

func printSummary(w io.Writer, s *summary) {
	fmt.Fprintln(w, "\nsummary")
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	rows := []struct {
		k string
		v any
	}{
		{"duration", s.Duration}, {"enqueued", s.Enqueued}, {"submissions", s.Submissions},
		{"succeeded", s.Succeeded}, {"dead (e.g. insufficient funds)", s.Dead},
		{"deduplicated", s.Deduplicated}, {"fenced rejections", s.FencedRejections},
		{"uncertain resolved", s.UncertainResolved}, {"in review", s.InReview},
		{"unfinished", s.Unfinished}, {"lost (must be 0)", s.Lost}, {"money conserved", s.MoneyConserved},
		{"each effect applied exactly once", s.ExactlyOnce}, {"dead with an effect (must be 0)", s.AppliedButDead},
	}
	for _, r := range rows {
		fmt.Fprintf(tw, "  %s\t%v\n", r.k, r.v)
	}
	_ = tw.Flush()
	printVerdicts(w, s.Verdicts)
}

// printLeft says what the demo left for the operator, with links.
func printLeft(w io.Writer, left []leftJob, dash string) {
	if len(left) == 0 {
		return
	}
	fmt.Fprintln(w, "Left for you to act on:")
	for _, j := range left {
		fmt.Fprint(w, cli.Escapef("  - job %s (%s, queue %s): %s\n    %s#/job/%s/%s\n", j.ID, j.State, j.Queue, j.What, dash, j.Queue, j.ID))
	}
}

// leaveForOperator stages the two jobs the demo leaves for the operator:
// a transfer the bank never answered whose report stays unreachable (the
// reconciler cannot tell, and after its tries the job is in review), and
// a transfer waiting in a paused queue.
func (d *demo) leaveForOperator(ctx context.Context, staged *stagingStore) {
	res := d.enqueue(ctx, bank.Transfer{From: d.accounts[6%len(d.accounts)], To: d.accounts[7%len(d.accounts)], Cents: 100, Memo: memoNoReport},
		jobs.Timeout(300*time.Millisecond), jobs.OperationID("demo-no-report-"+randomHex(4)))
	if res != nil {
		staged.makeUnreachable(res.OperationID)
		d.mu.Lock()
		d.left = append(d.left, leftJob{Queue: res.Queue, ID: res.JobID, State: string(jobs.Pending),
			What: "the bank never answered and its report is unreachable: the reconciler could not tell whether the transfer was applied. Decide: succeeded, re-run (it then goes through) or dead"})
		d.mu.Unlock()
		d.stage("the bank never answers transfer %s and its report stays unreachable: the reconciler cannot tell, and after its tries the job waits in review for you", res.JobID)
	}
	if _, err := d.client.Pause(ctx, heldQueue, "operator:demo", "the demo holds this queue for you to resume"); err != nil {
		d.stage("paused-queue stage skipped: %v", err)
		return
	}
	res = d.enqueue(ctx, bank.Transfer{From: d.accounts[8%len(d.accounts)], To: d.accounts[9%len(d.accounts)], Cents: 100, Memo: "demo: held"}, jobs.Queue(heldQueue))
	if res != nil {
		d.mu.Lock()
		d.left = append(d.left, leftJob{Queue: res.Queue, ID: res.JobID, State: string(jobs.Pending),
			What: "stuck: due, but its queue is paused. Resume queue " + heldQueue + " on the overview and it runs"})
		d.mu.Unlock()
		d.stage("queue %s is paused with transfer %s due in it: stuck until you resume the queue", heldQueue, res.JobID)
	}
}

// stagingStore stages the paused worker, the late answer and the
// transfer whose report is unreachable.
type stagingStore struct {
	bank.Store
	mu          sync.Mutex
	paused      map[string]bool
	unreachable map[string]bool // operation ids whose effect lookups fail until an attempt gets through
}

// makeUnreachable makes operation op's first attempt get no answer, and
// every effect lookup of it fail, until an attempt of it gets through (an
// operator's re-run).
func (s *stagingStore) makeUnreachable(op string) {
	s.mu.Lock()
	s.unreachable[op] = true
	s.mu.Unlock()
}

// errNoReport is the bank's report of a staged transfer being unreachable.
var errNoReport = errors.New("demo: the bank's report of this transfer is unreachable")

// Applied fails for an unreachable operation: the reconciler cannot tell.
func (s *stagingStore) Applied(ctx context.Context, op string) (fence.Effect, bool, error) {
	s.mu.Lock()
	unreachable := s.unreachable[op]
	s.mu.Unlock()
	if unreachable {
		return fence.Effect{}, false, errNoReport
	}
	return s.Store.Applied(ctx, op)
}

func (s *stagingStore) Transfer(ctx context.Context, f fence.Fence, t bank.Transfer) error {
	switch t.Memo {
	case memoPause:
		s.mu.Lock()
		first := !s.paused[f.OperationID]
		s.paused[f.OperationID] = true
		s.mu.Unlock()
		if first {
			// A stop-the-world pause: the worker neither renews nor notices
			// its context, then writes as if nothing happened. It lasts 3 s,
			// and on a slow machine until the re-run has written (at most
			// 30 s): a late reconciler would otherwise find this write and
			// settle the job without the re-run the stage shows.
			bg := context.WithoutCancel(ctx)
			time.Sleep(3 * time.Second)
			for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
				if _, done, err := s.Store.Applied(bg, f.OperationID); err == nil && done {
					break
				}
			}
			return s.Store.Transfer(bg, f, t)
		}
	case memoNoReport:
		s.mu.Lock()
		first := s.unreachable[f.OperationID] && !s.paused[f.OperationID]
		s.paused[f.OperationID] = true
		if !first {
			delete(s.unreachable, f.OperationID) // a later attempt gets through
		}
		s.mu.Unlock()
		if first {
			<-ctx.Done() // no answer at all: the attempt ends at its deadline
			return fmt.Errorf("the bank did not answer: %w", ctx.Err())
		}
	case memoSlowAck:
		// Storage accepts the write whatever the caller's deadline (on a
		// loaded machine the write itself can outlast the job's 300 ms
		// timeout: cancelled with it, it would be a transfer never made,
		// which the reconciler rightly re-runs), then answers late.
		err := s.Store.Transfer(context.WithoutCancel(ctx), f, t)
		if err != nil {
			return err
		}
		<-ctx.Done() // the answer arrives after the caller gave up
		return fmt.Errorf("storage answered too late: %w", ctx.Err())
	}
	return s.Store.Transfer(ctx, f, t)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = crand.Read(b)
	return hex.EncodeToString(b)
}

// FenceOnAcquire passes through to the underlying store when it can.
func (s *stagingStore) FenceOnAcquire(ctx context.Context, f fence.Fence) error {
	if r, ok := s.Store.(bank.FenceRaiser); ok {
		return r.FenceOnAcquire(ctx, f)
	}
	return nil
}

// balanceDiffs lists the accounts whose balance is not the expected one.
func balanceDiffs(expected, got map[string]int64) []string {
	var out []string
	for a, want := range expected {
		if have := got[a]; have != want {
			out = append(out, fmt.Sprintf("%s: expected %d, is %d", a, want, have))
		}
	}
	for a, have := range got {
		if _, ok := expected[a]; !ok {
			out = append(out, fmt.Sprintf("%s: expected none, is %d", a, have))
		}
	}
	slices.Sort(out)
	return out
}
