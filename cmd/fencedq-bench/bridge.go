package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/jackc/pgx/v5"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fence/pgfence"
)

// BridgeResult is the bridge section: a plain asynq server draining no-op
// tasks with and without the asynqfence middleware, same concurrency, same
// Redis; and the same with handlers that UPDATE PostgreSQL (plain in
// autocommit vs through pgfence.Store.Apply with the bridge's fence). No
// target: it shows what fencing costs on asynq's own delivery.
type BridgeResult struct {
	Jobs        int `json:"jobs"`
	Repeat      int `json:"repeat"`
	Concurrency int `json:"concurrency"`
	// Asynq is plain asynq; Bridge is the same server with the middleware.
	Asynq  Variant `json:"asynq"`
	Bridge Variant `json:"bridge"`
	// Ratio is bridge jobs/s ÷ asynq jobs/s.
	Ratio float64 `json:"ratio"`
	// Postgres is the PostgreSQL variant (nil when not run).
	Postgres *BridgePostgres `json:"postgres,omitempty"`
}

// BridgePostgres is the bridge section's PostgreSQL variant.
type BridgePostgres struct {
	// Skipped is true when PostgreSQL could not be reached; Note says why.
	Skipped bool   `json:"skipped"`
	Note    string `json:"note,omitempty"`
	Jobs    int    `json:"jobs"`
	Rows    int    `json:"rows"`
	// Asynq runs UPDATE ... in autocommit; Bridge runs it inside
	// pgfence.Store.Apply with the fence the bridge put in the context.
	Asynq  Variant `json:"asynq_update"`
	Bridge Variant `json:"bridge_pgfence"`
	// Ratio is bridge jobs/s ÷ asynq jobs/s.
	Ratio float64 `json:"ratio"`
}

func (e *bench) bridge(ctx context.Context) (*BridgeResult, error) {
	o := e.opts
	names := []string{"asynq", "asynq+bridge"}
	r := &BridgeResult{Jobs: o.jobs, Repeat: o.repeat, Concurrency: o.concurrency}
	runs, err := compareNamed(ctx, e, e.single, []string{"default"}, o.jobs, o.concurrency, nil, names, asynqDrain, bridgeDrain)
	if err != nil {
		return nil, err
	}
	r.Asynq, r.Bridge = variantOf(runs[0]), variantOf(runs[1])
	r.Ratio = ratio(r.Bridge.JobsPerSec, r.Asynq.JobsPerSec)
	e.progress("  ratio bridge/asynq %.3f", r.Ratio)
	if r.Postgres, err = e.bridgePostgres(ctx, names); err != nil {
		return nil, fmt.Errorf("postgres variant: %w", err)
	}
	return r, nil
}

func (e *bench) bridgePostgres(ctx context.Context, names []string) (*BridgePostgres, error) {
	o := e.opts
	r := &BridgePostgres{Jobs: o.pgJobs, Rows: pgRows}
	pool, note, err := e.openPostgres(ctx, o.concurrency+2, nil)
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
	d := &drainOpts{
		asynqWork: func(ctx context.Context, a noopArgs) error {
			_, err := pool.Exec(ctx, update, a.N%pgRows)
			if err == nil {
				applied.Add(1)
			}
			return err
		},
		bridgeWork: func(ctx context.Context, a noopArgs) error {
			f, ok := fence.FromContext(ctx)
			if !ok {
				return errors.New("no fence in the handler's context")
			}
			err := store.Apply(ctx, f, func(ctx context.Context, tx pgx.Tx) error {
				_, err := tx.Exec(ctx, update, a.N%pgRows)
				return err
			})
			if err == nil {
				applied.Add(1)
			}
			return err
		},
		after: func(ctx context.Context, _ *drained) error {
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
	runs, err := compareNamed(ctx, e, e.single, []string{"default"}, o.pgJobs, o.concurrency, d, names, asynqDrain, bridgeDrain)
	if err != nil {
		return nil, err
	}
	r.Asynq, r.Bridge = variantOf(runs[0]), variantOf(runs[1])
	r.Ratio = ratio(r.Bridge.JobsPerSec, r.Asynq.JobsPerSec)
	e.progress("  postgres ratio bridge/asynq %.3f", r.Ratio)
	return r, nil
}
