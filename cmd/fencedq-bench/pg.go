package main

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fence/pgfence"
	"github.com/fencedq/fencedq/jobs"
)

// defaultPG is the PostgreSQL used when neither --pg nor DATABASE_URL is set.
const defaultPG = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// pgRows is how many rows the jobs update (job n updates row n mod pgRows).
const pgRows = 100

// PostgresResult is the postgres section.
type PostgresResult struct {
	// Skipped is true when PostgreSQL could not be reached; Note says why.
	Skipped     bool   `json:"skipped"`
	Note        string `json:"note,omitempty"`
	Jobs        int    `json:"jobs"`
	Repeat      int    `json:"repeat"`
	Concurrency int    `json:"concurrency"`
	Rows        int    `json:"rows"`
	// Asynq runs UPDATE accounts SET balance = balance + 1 ... in autocommit.
	Asynq Variant `json:"asynq_update"`
	// Fencedq runs the same UPDATE through pgfence.Store.ApplyBatch, the
	// path for writes known up front: one transaction that raises the
	// resource's high-water mark, records the operation id in the effect
	// log, and updates, sent as one pipelined round trip.
	Fencedq Variant `json:"fencedq_pgfence"`
	// FencedqApply runs it through pgfence.Store.Apply (a callback with
	// the transaction: three round trips).
	FencedqApply Variant `json:"fencedq_pgfence_apply"`
	// StatementsPerJob is the PostgreSQL statements (BEGIN and COMMIT
	// included, batched ones counted one by one) per job, by side, from
	// the median run.
	StatementsPerJob map[string]float64 `json:"statements_per_job"`
	// RoundTripsPerJob is the PostgreSQL round trips per job (a batch of
	// statements sent together is one), by side, from the median run.
	RoundTripsPerJob map[string]float64 `json:"round_trips_per_job"`
	// Ratio is fencedq jobs/s ÷ asynq jobs/s (target ≥ Target), with
	// ApplyBatch.
	Ratio float64 `json:"ratio"`
	// RatioApply is the same with Apply.
	RatioApply  float64 `json:"ratio_apply"`
	Target      float64 `json:"target"`
	MeetsTarget bool    `json:"meets_target"`
}

// statementCounter is a pgx.QueryTracer and pgx.BatchTracer that counts
// statements (n) and round trips (trips): a query outside a batch is one
// of each, a batch is one round trip for all its statements.
type statementCounter struct{ n, trips atomic.Int64 }

// TraceQueryStart implements pgx.QueryTracer.
func (c *statementCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	c.trips.Add(1)
	return ctx
}

// TraceQueryEnd implements pgx.QueryTracer.
func (c *statementCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TraceBatchStart implements pgx.BatchTracer.
func (c *statementCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.trips.Add(1)
	return ctx
}

// TraceBatchQuery implements pgx.BatchTracer.
func (c *statementCounter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {
	c.n.Add(1)
}

// TraceBatchEnd implements pgx.BatchTracer.
func (c *statementCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func redactURL(u string) string {
	if at := strings.LastIndex(u, "@"); at >= 0 {
		if scheme := strings.Index(u, "://"); scheme >= 0 && scheme < at {
			return u[:scheme+3] + "…@" + u[at+1:]
		}
	}
	return u
}

func postgresVersion(ctx context.Context, url string) string {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return ""
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	var v string
	_ = conn.QueryRow(ctx, "SHOW server_version").Scan(&v)
	return v
}

func (e *bench) postgres(ctx context.Context) (*PostgresResult, error) {
	o := e.opts
	r := &PostgresResult{Jobs: o.pgJobs, Repeat: o.repeat, Concurrency: o.concurrency, Rows: pgRows, Target: 0.8}
	stmts := &statementCounter{}
	pool, note, err := e.openPostgres(ctx, o.concurrency+2, stmts)
	if err != nil {
		return nil, err
	}
	if pool == nil {
		r.Skipped, r.Note = true, note
		return r, nil
	}
	defer pool.Close()
	opts, accounts, drop, err := createAccounts(ctx, pool)
	if err != nil {
		return nil, err
	}
	defer drop()
	store, err := pgfence.New(pool, opts)
	if err != nil {
		return nil, err
	}

	update := "UPDATE " + accounts + " SET balance = balance + 1, updated_at = now() WHERE id = $1"
	var applied atomic.Int64 // updates the handlers made; checked against the table
	var useApply atomic.Bool // the fencedq handlers use Apply, not ApplyBatch
	var stmtsBefore, tripsBefore int64
	perJob := map[string][]float64{}      // statements per job of every timed run, by side
	tripsPerJob := map[string][]float64{} // round trips per job of every timed run, by side
	d := &drainOpts{
		before: func(context.Context) error {
			stmtsBefore, tripsBefore = stmts.n.Load(), stmts.trips.Load()
			return nil
		},
		asynqWork: func(ctx context.Context, a noopArgs) error {
			_, err := pool.Exec(ctx, update, a.N%pgRows)
			if err == nil {
				applied.Add(1)
			}
			return err
		},
		fencedqWork: func(ctx context.Context, j *jobs.Job[noopArgs]) error {
			f, ok := fence.FromContext(ctx)
			if !ok {
				return fmt.Errorf("no fence in the handler's context")
			}
			var err error
			if useApply.Load() {
				err = store.Apply(ctx, f, func(ctx context.Context, tx pgx.Tx) error {
					_, err := tx.Exec(ctx, update, j.Args.N%pgRows)
					return err
				})
			} else {
				b := &pgx.Batch{}
				b.Queue(update, j.Args.N%pgRows)
				err = store.ApplyBatch(ctx, f, b)
			}
			if err == nil {
				applied.Add(1)
			}
			return err
		},
		after: func(ctx context.Context, dr *drained) error {
			side, n := "asynq_update", len(dr.tasks)
			switch {
			case dr.ns != "" && useApply.Load():
				side, n = "fencedq_pgfence_apply", len(dr.jobs)
			case dr.ns != "":
				side, n = "fencedq_pgfence", len(dr.jobs)
			}
			perJob[side] = append(perJob[side], float64(stmts.n.Load()-stmtsBefore)/float64(n))
			tripsPerJob[side] = append(tripsPerJob[side], float64(stmts.trips.Load()-tripsBefore)/float64(n))
			var sum int64
			if err := pool.QueryRow(ctx, "SELECT coalesce(sum(balance), 0) FROM "+accounts).Scan(&sum); err != nil {
				return err
			}
			if sum != applied.Load() {
				return fmt.Errorf("postgres: table holds %d increments, handlers made %d", sum, applied.Load())
			}
			return nil
		},
	}
	// The fencedq handlers write through ApplyBatch, or through Apply
	// while applyDrain runs.
	batchDrain := func(ctx context.Context, t *target, queues []string, n, conc int, o *drainOpts) (drainRun, error) {
		useApply.Store(false)
		return fencedqDrain(ctx, t, queues, n, conc, o)
	}
	applyDrain := func(ctx context.Context, t *target, queues []string, n, conc int, o *drainOpts) (drainRun, error) {
		useApply.Store(true)
		defer useApply.Store(false)
		return fencedqDrain(ctx, t, queues, n, conc, o)
	}
	runs, err := compareNamed(ctx, e, e.single, []string{"default"}, o.pgJobs, o.concurrency, d,
		[]string{"asynq UPDATE", "fencedq ApplyBatch", "fencedq Apply"}, asynqDrain, batchDrain, applyDrain)
	if err != nil {
		return nil, err
	}
	r.Asynq, r.Fencedq, r.FencedqApply = variantOf(runs[0]), variantOf(runs[1]), variantOf(runs[2])
	r.Ratio = ratio(r.Fencedq.JobsPerSec, r.Asynq.JobsPerSec)
	r.RatioApply = ratio(r.FencedqApply.JobsPerSec, r.Asynq.JobsPerSec)
	e.progress("  ratio fencedq/asynq: ApplyBatch %.3f, Apply %.3f", r.Ratio, r.RatioApply)
	r.MeetsTarget = r.Ratio >= r.Target
	r.StatementsPerJob = map[string]float64{}
	for side, xs := range perJob {
		r.StatementsPerJob[side] = round(median(xs), 2)
	}
	r.RoundTripsPerJob = map[string]float64{}
	for side, xs := range tripsPerJob {
		r.RoundTripsPerJob[side] = round(median(xs), 2)
	}
	return r, nil
}

// openPostgres connects a pool of at most maxConns connections to the
// benchmark's PostgreSQL, with tracer (nil: none). When PostgreSQL cannot be
// reached it returns a nil pool and a note saying so (the section is
// skipped, not failed).
func (e *bench) openPostgres(ctx context.Context, maxConns int, tracer pgx.QueryTracer) (*pgxpool.Pool, string, error) {
	cfg, err := pgxpool.ParseConfig(e.opts.pgURL)
	if err != nil {
		return nil, "", fmt.Errorf("postgres URL: %w", err)
	}
	cfg.MaxConns = int32(maxConns)
	if tracer != nil {
		cfg.ConnConfig.Tracer = tracer
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(cctx, cfg)
	if err == nil {
		err = pool.Ping(cctx)
	}
	if err != nil {
		if pool != nil {
			pool.Close()
		}
		note := fmt.Sprintf("PostgreSQL at %s unreachable (%v): section skipped; set DATABASE_URL or --pg", redactURL(e.opts.pgURL), err)
		e.progress("  %s", note)
		return nil, note, nil
	}
	return pool, "", nil
}

// createAccounts creates a fresh schema holding pgRows accounts and
// pgfence's tables, and returns the pgfence options naming the schema, the
// accounts table's qualified name and a function dropping the schema.
func createAccounts(ctx context.Context, pool *pgxpool.Pool) (opts pgfence.Options, accounts string, drop func(), err error) {
	schema := strings.ReplaceAll(uniq("fqbench"), "-", "_")
	accounts = pgx.Identifier{schema, "accounts"}.Sanitize()
	drop = func() {
		_, _ = pool.Exec(context.WithoutCancel(ctx), "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
	}
	for _, s := range []string{
		"CREATE SCHEMA " + pgx.Identifier{schema}.Sanitize(),
		"CREATE TABLE " + accounts + " (id int PRIMARY KEY, balance bigint NOT NULL DEFAULT 0, updated_at timestamptz)",
		fmt.Sprintf("INSERT INTO %s (id) SELECT generate_series(0, %d)", accounts, pgRows-1),
	} {
		if _, err := pool.Exec(ctx, s); err != nil {
			drop()
			return pgfence.Options{}, "", nil, fmt.Errorf("postgres setup: %w", err)
		}
	}
	opts = pgfence.Options{Schema: schema}
	if err := pgfence.Migrate(ctx, pool, opts); err != nil {
		drop()
		return pgfence.Options{}, "", nil, err
	}
	return opts, accounts, drop, nil
}
