package main

import (
	"context"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fence/pgfence"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/workflow"
)

// With --workflows every operation is a workflow: its transfer (the bank's
// job, checked as without workflows), then a ledger entry, then a
// notification. The two later steps write through a pgfence store of
// their own (tables wf_fences, wf_effects: apart from the bank's, whose
// every effect is a transfer) into chaos_wf_steps, one row per applied
// step, numbered from the sequence the transfers' acceptance log uses, so
// the checker sees the order in which storage accepted a workflow's steps.

// wfTablePrefix names the workflow steps' pgfence tables.
const wfTablePrefix = "wf_"

// wfSetupSQL creates the steps' log.
const wfSetupSQL = `
CREATE TABLE IF NOT EXISTS {s}.chaos_wf_steps (
	seq          bigint PRIMARY KEY DEFAULT nextval('{s}.chaos_seq'),
	operation_id text NOT NULL,
	step         text NOT NULL,
	token        numeric(20,0) NOT NULL,
	worker       text NOT NULL,
	at           timestamptz NOT NULL DEFAULT clock_timestamp());
`

// setupWorkflowStorage creates the steps' pgfence tables and log.
func setupWorkflowStorage(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	if err := pgfence.Migrate(ctx, pool, pgfence.Options{Schema: schema, TablePrefix: wfTablePrefix}); err != nil {
		return err
	}
	_, err := pool.Exec(ctx, strings.ReplaceAll(wfSetupSQL, "{s}", qschema(schema)))
	return err
}

// wfStep is a workflow step after the transfer: entry or notify.
type wfStep struct {
	Op   string `json:"op"`
	Step string `json:"step"`
}

func (wfStep) Kind() string { return "chaos_wf_step" }

// stepWorker applies a step through its own pgfence store; a careless
// one ignores the handler's cancellation, so only the fence stops a paused
// attempt's write.
type stepWorker struct {
	store    *pgfence.Store
	table    string
	worker   string
	careless bool
}

func newStepWorker(pool *pgxpool.Pool, schema, worker string, careless bool) (*stepWorker, error) {
	st, err := pgfence.New(pool, pgfence.Options{Schema: schema, TablePrefix: wfTablePrefix})
	if err != nil {
		return nil, err
	}
	return &stepWorker{store: st, table: qschema(schema) + ".chaos_wf_steps", worker: worker, careless: careless}, nil
}

func (s *stepWorker) Work(ctx context.Context, j *jobs.Job[wfStep]) error {
	f, ok := fence.FromContext(ctx)
	if !ok {
		return jobs.Permanent(errors.New("no fence"))
	}
	if s.careless {
		ctx = context.WithoutCancel(ctx)
	}
	return s.store.Apply(ctx, f, func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO `+s.table+` (operation_id, step, token, worker) VALUES ($1, $2, $3::text::numeric, $4)`,
			j.Args.Op, j.Args.Step, f.Token.String(), s.worker)
		return err
	})
}

// Reconcile asks the steps' effect log.
func (s *stepWorker) Reconcile(ctx context.Context, j *jobs.Job[wfStep]) (jobs.Verdict, error) {
	_, ok, err := s.store.Applied(ctx, j.OperationID)
	switch {
	case err != nil:
		return jobs.CannotTell, err
	case ok:
		return jobs.Applied, nil
	}
	return jobs.NotApplied, nil
}

// checkWorkflows adds the workflow checks: every step applied once and
// only after the step it depends on, never after a transfer that was not
// applied; every workflow final, succeeded exactly when its transfer was
// applied; every dependent step promoted once (the queues' promoted
// counters).
func checkWorkflows(ctx context.Context, e *runEnv, lg *ledger.Ledger, w *workload, rep *report) error {
	s := qschema(e.schema)
	transferSeq := map[string]int64{}
	rows, err := e.admin.Query(ctx, `SELECT operation_id, min(seq) FROM `+s+`.chaos_accepted GROUP BY operation_id`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var op string
		var seq int64
		if err := rows.Scan(&op, &seq); err != nil {
			return err
		}
		transferSeq[op] = seq
	}
	if err := rows.Err(); err != nil {
		return err
	}
	steps := map[string]map[string][]int64{} // op -> step -> seqs
	rows, err = e.admin.Query(ctx, `SELECT operation_id, step, seq FROM `+s+`.chaos_wf_steps ORDER BY seq`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var op, step string
		var seq int64
		if err := rows.Scan(&op, &step, &seq); err != nil {
			return err
		}
		if steps[op] == nil {
			steps[op] = map[string][]int64{}
		}
		steps[op][step] = append(steps[op][step], seq)
	}
	if err := rows.Err(); err != nil {
		return err
	}

	ops := w.operations()
	known := map[string]bool{}
	c := rep.newCheck("every workflow step once, after its dependency",
		"per operation: the entry and the notification applied exactly once each when the transfer was applied (entry after the transfer, notification after the entry, in the storage's order), never when it was not")
	applied := 0
	for _, op := range ops {
		known[op.ID] = true
		tseq, ok := transferSeq[op.ID]
		got := steps[op.ID]
		if !ok {
			if len(got) > 0 {
				rep.fail(c, "operation %s: steps %v applied, its transfer never", op.ID, got)
			}
			continue
		}
		applied++
		prev, prevName := tseq, "transfer"
		for _, name := range []string{"entry", "notify"} {
			seqs := got[name]
			switch {
			case len(seqs) != 1:
				rep.fail(c, "operation %s: step %s applied %d times, want once", op.ID, name, len(seqs))
			case seqs[0] < prev:
				rep.fail(c, "operation %s: step %s (seq %d) applied before %s (seq %d)", op.ID, name, seqs[0], prevName, prev)
			}
			if len(seqs) > 0 {
				prev, prevName = seqs[0], name
			}
		}
	}
	for op := range steps {
		if !known[op] {
			rep.fail(c, "steps of unknown operation %s applied", op)
		}
	}

	c = rep.newCheck("every workflow final",
		"every workflow written ended: succeeded when its transfer was applied, failed when not (its later steps cancelled); every confirmed operation has one")
	client := jobs.NewClient(e.rdb, jobs.Config{Namespace: namespace})
	defer func() { _ = client.Close() }()
	ids, err := lg.Workflows(ctx, transfersQueue, 0, 1<<30)
	if err != nil {
		return err
	}
	succeeded := 0
	seen := map[string]bool{}
	for _, id := range ids {
		st, err := workflow.Get(ctx, client, id)
		if err != nil {
			rep.fail(c, "workflow %s: %v", id, err)
			continue
		}
		op, ok := strings.CutPrefix(st.OperationID, workflowOp(""))
		if !ok || !known[op] {
			rep.fail(c, "workflow %s of unknown operation %q", id, st.OperationID)
			continue
		}
		seen[op] = true
		_, transferred := transferSeq[op]
		switch {
		case st.State == workflow.Succeeded && transferred:
			succeeded++
		case st.State == workflow.Failed && !transferred:
		default:
			rep.fail(c, "operation %s: workflow %s is %s (%d/%d done), transfer applied: %v", op, id, st.State, st.Done, st.Total, transferred)
		}
	}
	for _, op := range ops {
		if op.Confirmed[transfersQueue] && !seen[op.ID] {
			rep.fail(c, "operation %s was confirmed but has no workflow", op.ID)
		}
	}

	c = rep.newCheck("every dependent step promoted once",
		"the queues' promoted counters (a step moved from waiting to pending) sum to two per succeeded workflow (its entry and its notification)")
	var promoted int64
	for _, q := range e.ledgerQueues() {
		st, err := lg.Stats(ctx, q)
		if err != nil {
			return err
		}
		promoted += st["promoted"]
	}
	if promoted != int64(2*succeeded) {
		rep.fail(c, "%d promotions for %d succeeded workflows, want %d", promoted, succeeded, 2*succeeded)
	}
	rep.Storage["workflows_succeeded"] = int64(succeeded)
	rep.Storage["workflow_transfers_applied"] = int64(applied)
	return nil
}
