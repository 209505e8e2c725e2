package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencedq/fencedq/fence/pgfence"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// OutboxResult is the outbox section: enqueueing through the PostgreSQL
// outbox (pgfence's Outbox.Enqueue, the code behind pgfence.Enqueue, each
// job in a transaction of its own) beside jobs.Client.Enqueue; the
// relay's drain of the committed backlog; and the latency from the commit
// to the handler's start beside plain Enqueue's. No target: it shows what
// transactional enqueue costs.
type OutboxResult struct {
	// Skipped is true when PostgreSQL could not be reached; Note says why.
	Skipped     bool   `json:"skipped"`
	Note        string `json:"note,omitempty"`
	Jobs        int    `json:"jobs"`
	Repeat      int    `json:"repeat"`
	Goroutines  int    `json:"goroutines"`
	Batch       int    `json:"batch"`
	Concurrency int    `json:"concurrency"`
	// Plain is jobs.Client.Enqueue, one call per job.
	Plain EnqueueSide `json:"plain_enqueue"`
	// Outbox is BEGIN; Outbox.Enqueue; COMMIT, one transaction per job.
	Outbox EnqueueSide `json:"outbox_enqueue"`
	// OutboxMany is BEGIN; Outbox.EnqueueMany of Batch jobs; COMMIT.
	OutboxMany EnqueueSide `json:"outbox_enqueue_many"`
	// Ratio is Outbox ÷ Plain jobs/s; RatioMany is OutboxMany ÷ Plain.
	Ratio     float64 `json:"ratio"`
	RatioMany float64 `json:"ratio_many"`
	// StatementsPerJob is PostgreSQL statements (BEGIN and COMMIT
	// included) per job of the median Outbox run.
	StatementsPerJob float64 `json:"statements_per_job"`
	// RelayDrainPerSec is the median rate at which a fresh pool (leader
	// elected at start) relays the Outbox run's committed backlog and runs
	// it (no-op handlers): from the pool's start to the last handler call.
	RelayDrainPerSec float64   `json:"relay_drain_jobs_per_s"`
	RelayDrainRuns   []float64 `json:"runs_relay_drain_jobs_per_s"`
	// Latency: LatencyJobs jobs offered at LatencyRate jobs/s into an idle
	// pool. OutboxLatency is from the tx.Commit call to the handler's
	// start; PlainLatency from the Enqueue call to the handler's start.
	LatencyRate   float64     `json:"latency_rate_jobs_per_s"`
	LatencyJobs   int         `json:"latency_jobs"`
	OutboxLatency LatencySide `json:"outbox_latency"`
	PlainLatency  LatencySide `json:"plain_latency"`
}

// outboxEnv is the section's PostgreSQL side: a pool, a private schema
// with pgfence's tables, and the outbox over them.
type outboxEnv struct {
	pool   *pgxpool.Pool
	stmts  *statementCounter
	outbox *pgfence.Outbox
}

// truncate empties the outbox table.
func (o *outboxEnv) truncate(ctx context.Context) error {
	_, err := o.pool.Exec(ctx, "TRUNCATE "+o.outbox.Table())
	return err
}

// rows counts the outbox table's rows.
func (o *outboxEnv) rows(ctx context.Context) (int, error) {
	var n int
	err := o.pool.QueryRow(ctx, "SELECT count(*) FROM "+o.outbox.Table()).Scan(&n)
	return n, err
}

// settled waits until the relay deleted every row it enqueued: a pool
// stopped between a relay's enqueue and its commit would leave rows that
// the next run's pool, in a namespace of its own, would enqueue again.
func (o *outboxEnv) settled(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := o.rows(ctx)
		if err != nil || n == 0 {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d rows still in the outbox 30s after their jobs ran", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// inTx runs f in a transaction and commits it; before is called just
// before the commit.
func (o *outboxEnv) inTx(ctx context.Context, f func(tx pgx.Tx) error, before func()) error {
	tx, err := o.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := f(tx); err != nil {
		return err
	}
	if before != nil {
		before()
	}
	return tx.Commit(ctx)
}

// enqueue times n jobs through the outbox, one transaction per call of
// batch jobs (batch 1: Outbox.Enqueue; otherwise EnqueueMany), from g
// goroutines. Nothing relays meanwhile; the rows stay in the table.
func (o *outboxEnv) enqueue(ctx context.Context, t *target, n, g, batch int) (enqueueRun, float64, error) {
	calls := (n + batch - 1) / batch
	before := o.stmts.n.Load()
	r, err := timedParallel(ctx, t, n, calls, g, func(k int) error {
		return o.inTx(ctx, func(tx pgx.Tx) error {
			if batch == 1 {
				_, err := o.outbox.Enqueue(ctx, tx, noopArgs{N: k})
				return err
			}
			from, to := k*batch, min((k+1)*batch, n)
			ps := make([]jobs.Params, 0, to-from)
			for i := from; i < to; i++ {
				ps = append(ps, jobs.Params{Args: noopArgs{N: i}})
			}
			_, err := o.outbox.EnqueueMany(ctx, tx, ps)
			return err
		}, nil)
	})
	return r, float64(o.stmts.n.Load()-before) / float64(n), err
}

// relayDrain starts a pool relaying the outbox and times it until n no-op
// jobs ran, then checks the table is empty.
func (o *outboxEnv) relayDrain(ctx context.Context, t *target, n, conc int) (float64, error) {
	ns := uniq("fqo")
	defer deleteMatching(context.WithoutCancel(ctx), t.rdb, ns, nil)
	c := newCompletions(n)
	cfg := poolConfig(ns, conc, nil)
	cfg.Maintenance.Outboxes = []worker.OutboxRelay{o.outbox}
	pool, err := worker.NewPool(t.rdb, cfg)
	if err != nil {
		return 0, err
	}
	if err := worker.Register(pool, jobs.WorkFunc[noopArgs](func(context.Context, *jobs.Job[noopArgs]) error {
		return c.record(nil)
	})); err != nil {
		return 0, err
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ran := make(chan error, 1)
	t0 := time.Now()
	go func() { ran <- pool.Run(rctx) }()
	err = c.wait(ctx)
	elapsed := time.Since(t0)
	if err == nil {
		err = o.settled(ctx)
	}
	cancel()
	if rerr := <-ran; rerr != nil && err == nil {
		err = rerr
	}
	if err != nil {
		return 0, fmt.Errorf("relay drain: %w", err)
	}
	return float64(n) / elapsed.Seconds(), nil
}

// latency offers n jobs at rate through the outbox into an idle pool that
// relays it, from the commit call to the handler's start.
func (o *outboxEnv) latency(ctx context.Context, t *target, n, conc int, rate float64) (latencyRun, error) {
	ns := uniq("fqol")
	defer deleteMatching(context.WithoutCancel(ctx), t.rdb, ns, nil)
	if err := o.truncate(ctx); err != nil {
		return latencyRun{}, err
	}
	rec := newLatencyRecorder(n)
	commitAt := make([]atomic.Int64, n)
	ready := make(chan struct{})
	cfg := poolConfig(ns, conc, nil)
	cfg.Maintenance.Outboxes = []worker.OutboxRelay{o.outbox}
	pool, err := worker.NewPool(t.rdb, cfg)
	if err != nil {
		return latencyRun{}, err
	}
	if err := worker.Register(pool, jobs.WorkFunc[latArgs](func(_ context.Context, j *jobs.Job[latArgs]) error {
		if j.Args.N < 0 {
			close(ready)
			return nil
		}
		if j.Args.N < n {
			rec.started(latArgs{N: j.Args.N, At: commitAt[j.Args.N].Load()})
		}
		return nil
	})); err != nil {
		return latencyRun{}, err
	}
	rctx, cancel := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- pool.Run(rctx) }()
	defer func() {
		cancel()
		<-ran
	}()
	// A first job through the outbox: once it ran, the pool is the
	// maintenance leader and its relay is running.
	if err := o.inTx(ctx, func(tx pgx.Tx) error {
		_, err := o.outbox.Enqueue(ctx, tx, latArgs{N: -1})
		return err
	}, nil); err != nil {
		return latencyRun{}, err
	}
	select {
	case <-ready:
	case <-time.After(drainTimeout(1)):
		return latencyRun{}, errors.New("outbox latency: the first relayed job did not run")
	case <-ctx.Done():
		return latencyRun{}, ctx.Err()
	}
	time.Sleep(idleWait) // idle again, as the latency section's sides are
	p, err := startProbe(ctx, t.rdb, t.hook)
	if err != nil {
		return latencyRun{}, err
	}
	offered, err := offer(ctx, n, rate, func(i int, _ time.Time) error {
		return o.inTx(ctx, func(tx pgx.Tx) error {
			_, err := o.outbox.Enqueue(ctx, tx, latArgs{N: i})
			return err
		}, func() { commitAt[i].Store(time.Now().UnixNano()) })
	})
	if err != nil {
		return latencyRun{}, fmt.Errorf("outbox enqueue: %w", err)
	}
	if err := rec.wait(ctx, drainTimeout(n)); err != nil {
		return latencyRun{}, fmt.Errorf("outbox: %w", err)
	}
	cost, err := p.end(ctx, n)
	if err == nil {
		err = o.settled(ctx)
	}
	return summarizeLatency(rec, offered, cost), err
}

func (e *bench) outbox(ctx context.Context) (*OutboxResult, error) {
	o := e.opts
	r := &OutboxResult{Jobs: o.outboxJobs, Repeat: o.repeat, Goroutines: o.enqueueGoroutines, Batch: o.enqueueBatch,
		Concurrency: o.concurrency, LatencyRate: o.outboxRate}
	r.LatencyJobs = max(int(o.outboxRate*o.outboxDuration.Seconds()), 1)
	stmts := &statementCounter{}
	// Connections: the enqueuers (or the latency offer's goroutines, which
	// queue for one), the relay and its LISTEN connection.
	pool, note, err := e.openPostgres(ctx, max(o.enqueueGoroutines, o.concurrency)+4, stmts)
	if err != nil {
		return nil, err
	}
	if pool == nil {
		r.Skipped, r.Note = true, note
		return r, nil
	}
	defer pool.Close()
	opts, _, drop, err := createAccounts(ctx, pool)
	if err != nil {
		return nil, err
	}
	defer drop()
	ob, err := pgfence.NewOutbox(pool, opts)
	if err != nil {
		return nil, err
	}
	env := &outboxEnv{pool: pool, stmts: stmts, outbox: ob}

	// Warm-up: connections open, statements prepared, scripts cached.
	warm := max(o.outboxJobs/10, 20)
	if _, err := fencedqEnqueue(ctx, e.single, warm, o.enqueueGoroutines, 1); err != nil {
		return nil, err
	}
	if _, _, err := env.enqueue(ctx, e.single, warm, o.enqueueGoroutines, 1); err != nil {
		return nil, err
	}
	if _, err := env.relayDrain(ctx, e.single, warm, o.concurrency); err != nil {
		return nil, err
	}

	var plain, single, many []enqueueRun
	var stmtsPerJob []float64
	for rep := range o.repeat {
		run, err := fencedqEnqueue(ctx, e.single, o.outboxJobs, o.enqueueGoroutines, 1)
		if err != nil {
			return nil, fmt.Errorf("plain enqueue: %w", err)
		}
		plain = append(plain, run)
		run, spj, err := env.enqueue(ctx, e.single, o.outboxJobs, o.enqueueGoroutines, 1)
		if err != nil {
			return nil, fmt.Errorf("outbox enqueue: %w", err)
		}
		single, stmtsPerJob = append(single, run), append(stmtsPerJob, spj)
		drain, err := env.relayDrain(ctx, e.single, o.outboxJobs, o.concurrency)
		if err != nil {
			return nil, err
		}
		r.RelayDrainRuns = append(r.RelayDrainRuns, round(drain, 1))
		if run, _, err = env.enqueue(ctx, e.single, o.outboxJobs, o.enqueueGoroutines, o.enqueueBatch); err != nil {
			return nil, fmt.Errorf("outbox enqueue many: %w", err)
		}
		many = append(many, run)
		if err := env.truncate(ctx); err != nil {
			return nil, err
		}
		e.progress("  run %d: plain Enqueue %.0f jobs/s, outbox Enqueue %.0f jobs/s, outbox EnqueueMany %.0f jobs/s, relay drain %.0f jobs/s",
			rep+1, plain[rep].jobsPerSec, single[rep].jobsPerSec, many[rep].jobsPerSec, drain)
	}
	side := func(rs []enqueueRun) EnqueueSide {
		tp := make([]float64, len(rs))
		for i, x := range rs {
			tp[i] = round(x.jobsPerSec, 1)
		}
		return EnqueueSide{JobsPerSec: round(median(tp), 1), Runs: tp, PerJob: rs[medianIndex(tp)].cost}
	}
	r.Plain, r.Outbox, r.OutboxMany = side(plain), side(single), side(many)
	r.Ratio = ratio(r.Outbox.JobsPerSec, r.Plain.JobsPerSec)
	r.RatioMany = ratio(r.OutboxMany.JobsPerSec, r.Plain.JobsPerSec)
	r.StatementsPerJob = round(stmtsPerJob[medianIndex(r.Outbox.Runs)], 2)
	r.RelayDrainPerSec = round(median(r.RelayDrainRuns), 1)

	// Latency, alternating which side goes first.
	fns := []latencyFunc{fencedqLatency, env.latency}
	names := []string{"plain", "outbox"}
	runs := make([][]latencyRun, 2)
	for rep := range o.repeat {
		for k := range fns {
			i := k
			if rep%2 == 1 {
				i = 1 - k
			}
			run, err := fns[i](ctx, e.single, r.LatencyJobs, o.concurrency, o.outboxRate)
			if err != nil {
				return nil, err
			}
			e.progress("  latency %s run %d: %.0f jobs/s offered, p50 %.2f ms, p99 %.2f ms, max %.2f ms",
				names[i], rep+1, run.offeredRate, durMs(run.p50), durMs(run.p99), durMs(run.max))
			runs[i] = append(runs[i], run)
		}
	}
	r.PlainLatency, r.OutboxLatency = latencySide(runs[0]), latencySide(runs[1])
	return r, nil
}
