package main

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/examples/bank"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/jobs"
)

// namespace is the key namespace of a run (its Redis is private anyway).
const namespace = "chaos"

// chaosMain parses flags, runs the chaos run and prints the report.
func chaosMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseOptions(args, stderr)
	if err != nil {
		return err
	}
	rep, err := runChaos(ctx, o)
	if err != nil {
		return err
	}
	if o.JSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		rep.printTable(stdout)
	}
	if rep.Mode != modeBaseline && len(rep.Violations) > 0 {
		return fmt.Errorf("%w: %d (see the report)", errViolation, rep.violationCount())
	}
	return nil
}

// Run modes.
const (
	modeFenced   = "fencedq"
	modeBaseline = "asynq-baseline"
	modeBridge   = "asynq-bridge"
)

// runEnv is everything a run started, for cleanup and for the checker.
type runEnv struct {
	o        *options
	dir      string
	schema   string
	admin    *pgxpool.Pool
	redis    *redisServer   // single-server mode
	cluster  []*redisServer // --cluster: the masters
	fo       *failoverRedis // --failover
	cf       *clusterRedis  // --cluster with --failover
	rdb      redis.UniversalClient
	workers  *workers
	accounts []string
	progress func(format string, a ...any)

	crashMu sync.Mutex
	crashes []string
	// switches are the primary switches the Sentinel announced (failover
	// mode), with when they were seen.
	switches []sentinelSwitch
	// workloadStopped is when the workload stopped generating transfers.
	workloadStopped time.Time
}

// sentinelSwitch is one +switch-master event.
type sentinelSwitch struct {
	at      time.Time
	payload string
}

// runChaos performs one run and returns its report. An error means the run
// itself broke (could not start, interrupted), not that the checker found
// violations.
func runChaos(ctx context.Context, o *options) (rep *report, err error) {
	started := time.Now()
	e := &runEnv{o: o, accounts: bank.Accounts(o.Accounts)}
	var pmu sync.Mutex
	e.progress = func(format string, a ...any) {
		pmu.Lock()
		defer pmu.Unlock()
		fmt.Fprintf(o.Progress, "[%6.1fs] %s\n", time.Since(started).Seconds(), fmt.Sprintf(format, a...))
	}
	mode := modeFenced
	switch o.Baseline {
	case "asynq":
		mode = modeBaseline
	case "asynq-bridge":
		mode = modeBridge
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own executable: %w", err)
	}
	if e.dir, err = os.MkdirTemp("", "fencedq-chaos-*"); err != nil {
		return nil, err
	}
	keepDir := o.Keep
	defer func() {
		if !keepDir {
			_ = os.RemoveAll(e.dir)
		}
	}()

	// PostgreSQL: a fresh schema for this run.
	upstream, err := pgUpstream(o.DatabaseURL)
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	e.admin, err = pgxpool.New(pctx, o.DatabaseURL)
	if err == nil {
		err = e.admin.Ping(pctx)
	}
	cancel()
	if err != nil {
		if e.admin != nil {
			e.admin.Close()
		}
		return nil, fmt.Errorf("PostgreSQL at %s is unreachable: %v\n%s", redactURL(o.DatabaseURL), err, pgInstallHint)
	}
	defer e.admin.Close()
	var b [3]byte
	_, _ = crand.Read(b[:])
	e.schema = "chaos_" + time.Now().UTC().Format("20060102_150405") + "_" + hex.EncodeToString(b[:])
	keepSchema := o.Keep
	defer func() {
		if !keepSchema {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			if err := dropSchema(dctx, e.admin, e.schema); err != nil {
				e.progress("drop schema %s: %v", e.schema, err)
			}
		}
	}()
	if err := setupStorage(ctx, e.admin, e.schema, e.accounts, initialCents); err != nil {
		return nil, err
	}
	e.progress("schema %s ready", e.schema)

	// Redis with AOF: one server, or a primary, a replica and a Sentinel.
	rdir := filepath.Join(e.dir, "redis")
	if err := os.MkdirAll(rdir, 0o755); err != nil {
		return nil, err
	}
	redisArgs := []string{}
	if o.Failover && o.Cluster > 0 {
		if e.cf, err = startClusterRedis(ctx, rdir, o.Cluster); err != nil {
			return nil, err
		}
		defer e.cf.Stop()
		seeds := e.cf.seeds()
		e.rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: seeds})
		redisArgs = append(redisArgs, "--cluster", strings.Join(seeds, ","))
		e.progress("%s run, seed %d: Redis Cluster of %d masters, one replica each %v (AOF, appendfsync always), run directory %s",
			mode, o.Seed, o.Cluster, seeds, e.dir)
	} else if o.Failover {
		if e.fo, err = startFailoverRedis(ctx, rdir, slices.Contains(o.FailoverKinds, faultFailoverClock)); err != nil {
			return nil, err
		}
		defer e.fo.Stop()
		e.rdb = redis.NewFailoverClient(e.fo.clientOptions())
		redisArgs = append(redisArgs, "--sentinel", e.fo.sentinel.Addr, "--master-name", masterName)
		e.progress("%s run, seed %d: %s, run directory %s", mode, o.Seed, e.fo.describe(), e.dir)
	} else if o.Cluster > 0 {
		if e.cluster, err = startCluster(ctx, rdir, o.Cluster); err != nil {
			return nil, err
		}
		var addrs []string
		for _, n := range e.cluster {
			defer n.Stop()
			addrs = append(addrs, n.Addr)
		}
		e.rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
		redisArgs = append(redisArgs, "--cluster", strings.Join(addrs, ","))
		e.progress("%s run, seed %d: Redis Cluster of %d masters %v (AOF, appendfsync always), run directory %s",
			mode, o.Seed, len(addrs), addrs, e.dir)
	} else {
		if e.redis, err = startRedis(ctx, rdir); err != nil {
			return nil, err
		}
		defer e.redis.Stop()
		e.rdb = redis.NewClient(&redis.Options{Addr: e.redis.Addr})
		redisArgs = append(redisArgs, "--redis", e.redis.Addr)
		e.progress("%s run, seed %d: redis-server %s (AOF, appendfsync always), run directory %s",
			mode, o.Seed, e.redis.Addr, e.dir)
	}
	defer e.rdb.Close()

	if o.Partitions > 1 {
		pc := jobs.NewClient(e.rdb, jobs.Config{Namespace: namespace})
		for _, q := range []string{transfersQueue, priorityQueue} {
			if _, err := pc.SetPartitions(ctx, q, o.Partitions, "chaos", "chaos run: partitioned queues"); err != nil {
				_ = pc.Close()
				return nil, err
			}
		}
		_ = pc.Close()
		e.progress("queues %s and %s declared with %d partitions", transfersQueue, priorityQueue, o.Partitions)
	}

	// Workers, each behind its own PostgreSQL proxy.
	wmode := "fencedq"
	switch mode {
	case modeBaseline:
		wmode = "asynq"
	case modeBridge:
		wmode = "asynq-bridge"
	}
	e.workers = &workers{exe: exe, dir: e.dir, mode: wmode, baseArg: append(redisArgs,
		"--postgres", o.DatabaseURL, "--schema", e.schema, "--namespace", namespace,
		"--concurrency", strconv.Itoa(o.Concurrency), "--lease-ttl", o.LeaseTTL.String(),
		"--handler-timeout", o.HandlerTimeout.String(), "--reconcile-interval", o.ReconcileInterval.String(),
		"--log-level", o.LogLevel,
	)}
	if o.Durable && mode != modeBaseline {
		e.workers.baseArg = append(e.workers.baseArg, "--replicas", strconv.Itoa(durability.Replicas))
	}
	if o.IdleInTransaction > 0 {
		e.workers.baseArg = append(e.workers.baseArg, "--pg-idle-in-transaction", o.IdleInTransaction.String())
	}
	for i := range o.Workers {
		p, err := startProxy(upstream)
		if err != nil {
			return nil, err
		}
		defer p.close()
		e.workers.slots = append(e.workers.slots, &slot{n: i, proxy: p, careless: i < o.Careless})
	}
	defer e.workers.stopAll(15 * time.Second)
	for _, s := range e.workers.slots {
		if err := e.workers.start(s); err != nil {
			return nil, err
		}
	}

	// The workload's client.
	var enq enqueuer
	var jc *jobs.Client
	var ac *asynq.Client
	lg := ledger.New(e.rdb, ledger.Config{Namespace: namespace})
	switch mode {
	case modeFenced:
		cfg := jobs.Config{Namespace: namespace}
		if o.Durable {
			cfg.Durability = durability
		}
		jc = jobs.NewClient(e.rdb, cfg)
		defer jc.Close()
		enq = fencedEnqueuer(jc, o)
		if o.Workflows {
			enq = workflowEnqueuer(jc, o)
		}
	case modeBaseline:
		ac = asynq.NewClientFromRedisClient(e.rdb)
		defer ac.Close()
		enq = baselineEnqueuer(ac, namespace, o.HandlerTimeout)
	case modeBridge:
		ac = asynq.NewClientFromRedisClient(e.rdb)
		defer ac.Close()
		enq = bridgeEnqueuer(ac, namespace, o.HandlerTimeout)
	}
	w := newWorkload(o, e.accounts, enq)
	drainDeadline := time.Now().Add(o.Duration + o.Drain)
	subCtx, subCancel := context.WithDeadline(ctx, drainDeadline)
	defer subCancel()
	w.startSubmitters(subCtx, 8)

	// Fault phase.
	nem := newNemesis(o, e.workers, e.redis, e.fo, e.progress)
	nem.cluster = e.cluster
	nem.cf = e.cf
	faultCtx, faultCancel := context.WithTimeout(ctx, o.Duration)
	defer faultCancel()
	monCtx, monCancel := context.WithCancel(ctx)
	defer monCancel()
	go e.monitor(monCtx)
	if e.fo != nil {
		go e.fo.watchSwitches(monCtx, func(at time.Time, payload string) {
			e.crashMu.Lock()
			e.switches = append(e.switches, sentinelSwitch{at: at, payload: payload})
			e.crashMu.Unlock()
		})
	}
	go e.progressLoop(monCtx, w, nem, mode)
	var genDone sync.WaitGroup
	genDone.Add(1)
	go func() {
		defer genDone.Done()
		w.generate(faultCtx)
		e.workloadStopped = time.Now() // read after genDone.Wait
	}()
	nem.run(faultCtx)
	genDone.Wait()
	if ctx.Err() != nil {
		return nil, errors.New("interrupted")
	}
	faultPhase := time.Since(started)
	for _, s := range e.workers.slots {
		s.proxy.heal()
		s.resume()
	}
	e.progress("faults stopped: %v; draining (at most %v)", nem.Counts(), o.Drain)

	// Drain: every submission confirmed, then no job pending, running or
	// uncertain (fencedq) or no task left to run (baseline).
	drainStart := time.Now()
	w.finish()
	settled := e.waitSettled(ctx, mode, drainDeadline)
	drain := time.Since(drainStart)
	monCancel()
	if ctx.Err() != nil {
		return nil, errors.New("interrupted")
	}
	if settled {
		e.progress("settled after %v", drain.Round(100*time.Millisecond))
	} else {
		e.progress("did not settle within %v", o.Drain)
	}
	e.workers.stopAll(15 * time.Second)

	// Check.
	cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Minute)
	defer ccancel()
	if e.cf != nil {
		if err := e.cf.waitOK(cctx); err != nil {
			e.progress("the cluster did not report ok on every node before the check: %v", err)
		}
	}
	rep = e.newReport(mode, nem)
	rep.Timing = timing{FaultPhase: faultPhase.Round(time.Second).String(), Drain: drain.Round(100 * time.Millisecond).String(), Settled: settled}
	rep.Faults, rep.FaultLog = nem.Counts(), nem.Events()
	rep.Workload = w.summary()
	e.crashMu.Lock()
	rep.WorkerCrashes = append([]string{}, e.crashes...)
	e.crashMu.Unlock()
	if !settled {
		rep.violation("settled", fmt.Sprintf("the system did not settle within --drain %v after the faults stopped", o.Drain))
	}
	if len(rep.WorkerCrashes) > 0 {
		rep.violation("no worker crashed", fmt.Sprintf("%d worker processes exited by themselves: %s", len(rep.WorkerCrashes), strings.Join(rep.WorkerCrashes, "; ")))
	}
	if mode == modeBaseline {
		err = checkBaseline(cctx, e, w, rep)
	} else {
		err = checkFenced(cctx, e, lg, w, rep)
		if err == nil && o.Workflows {
			err = checkWorkflows(cctx, e, lg, w, rep)
		}
	}
	if err == nil && mode == modeBridge {
		rep.Asynq, err = asynqCounts(asynq.NewInspectorFromRedisClient(e.rdb))
	}
	if err != nil {
		keepDir, keepSchema = true, true
		return nil, fmt.Errorf("checker: %w (kept schema %s and directory %s)", err, e.schema, e.dir)
	}
	if o.afterCheck != nil {
		recheck := func() (*report, error) {
			r := e.newReport(mode, nem)
			if mode == modeBaseline {
				return r, checkBaseline(cctx, e, w, r)
			}
			if err := checkFenced(cctx, e, lg, w, r); err != nil || !o.Workflows {
				return r, err
			}
			return r, checkWorkflows(cctx, e, lg, w, r)
		}
		if err := o.afterCheck(cctx, e, recheck); err != nil {
			return nil, err
		}
	}
	if mode != modeBaseline && len(rep.Violations) > 0 && !o.Keep {
		keepDir, keepSchema = true, true
		e.progress("violations found: keeping schema %s and directory %s (worker logs) for inspection", e.schema, e.dir)
	}
	rep.ViolationCount = rep.violationCount()
	if keepSchema {
		rep.Schema = e.schema
	}
	if keepDir {
		rep.Dir = e.dir
	}
	return rep, nil
}

// newReport starts the run's report; in failover mode it carries the
// failovers the nemesis made, for the checker.
func (e *runEnv) newReport(mode string, nem *nemesis) *report {
	r := newReport(mode, e.o)
	if !e.failingOver() {
		return r
	}
	fs := &failoverSummary{Durable: e.o.Durable, Failovers: nem.Failovers()}
	e.crashMu.Lock()
	switches := append([]sentinelSwitch{}, e.switches...)
	e.crashMu.Unlock()
	fs.SentinelSwitches = len(switches)
	// A switch the nemesis did not cause is a failover all the same: the
	// checker gives it a loss window (from a down-after and a vote before
	// it was announced).
	for _, sw := range switches {
		planned := false
		for _, f := range fs.Failovers {
			planned = planned || (!sw.at.Before(f.Killed) && !f.Promoted.IsZero() && sw.at.Before(f.Promoted.Add(2*time.Second)))
		}
		if !planned {
			promoted := sw.at
			fs.Failovers = append(fs.Failovers, failoverRecord{Kind: "unplanned", Killed: promoted.Add(-sentinelDownAfter - 2*time.Second),
				Promoted: promoted, Failover: "unknown", From: sw.payload})
		}
	}
	sort.Slice(fs.Failovers, func(i, j int) bool { return fs.Failovers[i].Killed.Before(fs.Failovers[j].Killed) })
	r.Failover = fs
	return r
}

// pgUpstream returns the host:port a proxy forwards to.
func pgUpstream(url string) (string, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return "", fmt.Errorf("%w: PostgreSQL URL: %v", errUsage, err)
	}
	if strings.HasPrefix(cfg.Host, "/") {
		return "", fmt.Errorf("%w: PostgreSQL must be reached over TCP (the chaos proxy sits on that path), not the socket %s", errUsage, cfg.Host)
	}
	return net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))), nil
}

// redactURL hides a password in a connection URL.
func redactURL(url string) string {
	cfg, err := pgx.ParseConfig(url)
	if err != nil || cfg.Password == "" {
		return url
	}
	return strings.Replace(url, cfg.Password, "xxxxx", 1)
}

// monitor restarts worker processes that exited by themselves (not under a
// fault) and records them: a worker must not crash on its own.
func (e *runEnv) monitor(ctx context.Context) {
	for sleepCtx(ctx, 500*time.Millisecond) {
		for _, s := range e.workers.slots {
			if !s.take() {
				continue
			}
			if s.exited() && ctx.Err() == nil {
				id := s.currentID()
				tail := logTail(filepath.Join(e.dir, "worker-"+strings.TrimPrefix(id, "w")+".log"), 3)
				e.crashMu.Lock()
				e.crashes = append(e.crashes, id+": "+tail)
				e.crashMu.Unlock()
				e.progress("worker %s exited by itself: %s", id, tail)
				if err := e.workers.start(s); err != nil {
					e.progress("restart slot %d: %v", s.n, err)
				}
			}
			s.release()
		}
	}
}

// logTail returns the last n lines of a file.
func logTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// progressLoop prints progress every 10 seconds.
func (e *runEnv) progressLoop(ctx context.Context, w *workload, n *nemesis, mode string) {
	for sleepCtx(ctx, 10*time.Second) {
		state := ""
		if mode != modeBaseline {
			c, err := e.ledgerCounts(ctx)
			if err != nil {
				state = "ledger: " + err.Error()
			} else {
				state = fmt.Sprintf("pending %d running %d uncertain %d succeeded %d dead %d review %d",
					c[jobs.Pending], c[jobs.Running], c[jobs.Uncertain], c[jobs.Succeeded], c[jobs.Dead], c[jobs.Review])
				if c[jobs.Pending] > 0 && c[jobs.Pending] <= 50 {
					state += " (pending jobs: " + e.pendingDue(ctx) + ")"
				}
			}
		}
		if mode != modeFenced {
			left, err := e.baselineLeft(ctx)
			if err != nil {
				state += " asynq: " + err.Error()
			} else {
				state += fmt.Sprintf(" asynq tasks left %d", left)
			}
		}
		if e.fo != nil {
			state += " | primary " + e.fo.primaryAddr(ctx)
		}
		e.progress("submitted %d (confirmed %d, enqueue errors %d) | %s | faults %v",
			w.submissions.Load(), w.confirmed.Load(), w.enqueueErrors.Load(), state, n.Counts())
	}
}

// ledgerCounts sums the ledger's per-state counts over the workload queues.
func (e *runEnv) ledgerCounts(ctx context.Context) (map[jobs.State]int64, error) {
	l := ledger.New(e.rdb, ledger.Config{Namespace: namespace})
	out := map[jobs.State]int64{}
	for _, q := range e.ledgerQueues() {
		c, err := l.Counts(ctx, q)
		if err != nil {
			return nil, err
		}
		for s, n := range c {
			out[s] += n
		}
	}
	return out, nil
}

// pendingDue says how many of the pending jobs are due now and how many
// wait for a later time (a retry's backoff): the ledger's pending index is
// the queue itself, scored by due time, so a due job waits only for a free
// worker slot.
func (e *runEnv) pendingDue(ctx context.Context) string {
	l := ledger.New(e.rdb, ledger.Config{Namespace: namespace})
	now, err := l.ServerTime(ctx)
	if err != nil {
		return err.Error()
	}
	states := map[string]int{}
	for _, q := range e.ledgerQueues() {
		all, err := l.IDs(ctx, q, jobs.Pending, 0, 50)
		if err != nil {
			return err.Error()
		}
		due, err := l.DueIDs(ctx, q, jobs.Pending, now, 50)
		if err != nil {
			return err.Error()
		}
		states["due"] += len(due)
		states["scheduled"] += len(all) - len(due)
	}
	return joinCounts(states)
}

// baselineLeft counts the baseline's tasks not yet finished.
func (e *runEnv) baselineLeft(ctx context.Context) (int, error) {
	insp := asynq.NewInspectorFromRedisClient(e.rdb)
	left := 0
	for _, q := range []string{transfersQueue, priorityQueue} {
		qi, err := baselineQueueInfo(insp, q)
		if err != nil {
			return 0, err
		}
		if qi == nil {
			continue
		}
		left += qi.Pending + qi.Active + qi.Scheduled + qi.Retry + qi.Aggregating
	}
	return left, nil
}

// waitSettled waits until every submission was answered and no work is
// left, or the deadline passes.
func (e *runEnv) waitSettled(ctx context.Context, mode string, deadline time.Time) bool {
	stable := 0
	for time.Now().Before(deadline) && ctx.Err() == nil {
		left := -1
		switch mode {
		case modeFenced:
			if c, err := e.ledgerCounts(ctx); err == nil {
				left = int(c[jobs.Waiting] + c[jobs.Pending] + c[jobs.Running] + c[jobs.Uncertain])
			}
		case modeBaseline:
			if n, err := e.baselineLeft(ctx); err == nil {
				left = n
			}
		case modeBridge:
			// asynq holds no task any more, and no ledger attempt is
			// running or uncertain (a bridged job left pending waits for
			// a delivery asynq will not make: the checker reports it).
			c, err := e.ledgerCounts(ctx)
			n, aerr := e.baselineLeft(ctx)
			if err == nil && aerr == nil {
				left = n + int(c[jobs.Running]+c[jobs.Uncertain])
			}
		}
		if left == 0 {
			stable++
			if stable >= 2 {
				return true
			}
		} else {
			stable = 0
		}
		sleepCtx(ctx, time.Second)
	}
	return false
}

// ledgerQueues returns the ledger queues the workload's jobs live in: the
// workload's queues, or with --partitions each one's partitions.
func (e *runEnv) ledgerQueues() []string {
	qs := []string{transfersQueue, priorityQueue}
	if e.o.Partitions <= 1 {
		return qs
	}
	var out []string
	for _, q := range qs {
		out = append(out, ledger.PartitionNames(q, e.o.Partitions)...)
	}
	return out
}

// ledgerQueue returns the ledger queue operation op's job of queue q lives
// in: q, or with --partitions the partition its operation id routes it to
// (the workload names no partition key).
func (e *runEnv) ledgerQueue(q, op string) string {
	if e.o.Partitions <= 1 {
		return q
	}
	return ledger.PartitionNames(q, e.o.Partitions)[ledger.RoutePartition(e.o.Partitions, "", op, 0)]
}

// failingOver reports whether the run fails Redis over (--failover, on a
// Sentinel deployment or a Cluster): the checker then applies its failover
// rules.
func (e *runEnv) failingOver() bool { return e.fo != nil || e.cf != nil }
