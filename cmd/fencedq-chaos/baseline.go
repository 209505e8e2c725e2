package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hibiken/asynq"
)

// baselineSummary is what the unfenced asynq baseline got wrong.
type baselineSummary struct {
	// DoubleApplies counts applications beyond the first, over
	// DoubleAppliedOps operations.
	DoubleApplies    int `json:"double_applies"`
	DoubleAppliedOps int `json:"double_applied_operations"`
	// DoubleAppliesAcrossQueues come from the same operation submitted to
	// two queues (asynq's task id is unique per queue only);
	// DoubleAppliesRedelivery from retries and redeliveries of one task.
	DoubleAppliesAcrossQueues int `json:"double_applies_across_queues"`
	DoubleAppliesRedelivery   int `json:"double_applies_redelivery"`
	// RedeliveredSoon and RedeliveredLate split DoubleAppliesRedelivery by
	// the gap to the previous application of the task: under 30s it is
	// (almost always) asynq retrying a call that failed or timed out after
	// the database applied it; 30s or more, asynq's recoverer re-running a
	// task whose worker crashed or paused past asynq's 30s lease.
	RedeliveredSoon int `json:"redelivered_within_30s"`
	RedeliveredLate int `json:"redelivered_after_30s"`
	// StaleWrites counts applications committed after a newer attempt of
	// the same task had started: the write of a worker that no longer
	// owned the task.
	StaleWrites int `json:"stale_writes"`
	// Lost counts covered transfers never applied whose task asynq gave up
	// on (archived) or no longer has.
	Lost int `json:"lost"`
	// Unfinished counts tasks still queued, retrying or active at the end.
	Unfinished int `json:"unfinished"`
	// Asynq holds asynq's own counters and task states at the end.
	Asynq map[string]int `json:"asynq"`
}

// application is one committed debit+credit of the baseline.
type application struct {
	seq   int64
	op    string
	queue string
	retry int
	at    time.Time
	txid  int64
}

// checkBaseline examines a baseline run. Its findings are reported as
// failed checks, but they do not fail the run.
func checkBaseline(ctx context.Context, e *runEnv, w *workload, rep *report) error {
	s := qschema(e.schema)
	pool := e.admin
	moves, err := readMoneyAndMoves(ctx, pool, e.schema, e.accounts, rep)
	if err != nil {
		return err
	}
	var apps []application
	rows, err := pool.Query(ctx, `SELECT seq, operation_id, queue, retry, at, txid FROM `+s+`.chaos_applied ORDER BY seq`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var a application
		if err := rows.Scan(&a.seq, &a.op, &a.queue, &a.retry, &a.at, &a.txid); err != nil {
			return err
		}
		apps = append(apps, a)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	type attempt struct {
		retry int
		at    time.Time
	}
	attempts := map[string][]attempt{} // op/queue -> attempts
	rows, err = pool.Query(ctx, `SELECT operation_id, queue, retry, at FROM `+s+`.chaos_attempts`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var op, q string
		var a attempt
		if err := rows.Scan(&op, &q, &a.retry, &a.at); err != nil {
			return err
		}
		attempts[op+"/"+q] = append(attempts[op+"/"+q], a)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	rep.Storage["applications"] = int64(len(apps))

	b := &baselineSummary{Asynq: map[string]int{}}
	rep.Baseline = b
	movesByTx := map[int64]int{}
	for _, m := range moves {
		movesByTx[m.txid]++
	}
	c := rep.newCheck("every balance change is one recorded application", "each transaction that moved money recorded one application")
	appsByTx := map[int64]int{}
	for _, a := range apps {
		appsByTx[a.txid]++
	}
	for tx, n := range movesByTx {
		if appsByTx[tx] != 1 {
			rep.fail(c, "transaction %d changed %d balances with %d applications recorded", tx, n, appsByTx[tx])
		}
	}

	byOp := map[string]*operation{}
	for _, op := range w.operations() {
		byOp[op.ID] = op
	}
	appsByOp := map[string][]application{}
	for _, a := range apps {
		appsByOp[a.op] = append(appsByOp[a.op], a)
	}
	once := rep.newCheck("every transfer applied exactly once", "an applied operation has exactly one application")
	stale := rep.newCheck("no stale writes", "no application committed after a newer attempt of its task had started")
	for op, as := range appsByOp {
		if len(as) > 1 {
			b.DoubleAppliedOps++
			b.DoubleApplies += len(as) - 1
			queues := map[string]int{}
			last := map[string]time.Time{}
			for _, a := range as { // in seq (commit) order
				queues[a.queue]++
				if prev, ok := last[a.queue]; ok {
					if a.at.Sub(prev) < 30*time.Second {
						b.RedeliveredSoon++
					} else {
						b.RedeliveredLate++
					}
				}
				last[a.queue] = a.at
			}
			for _, n := range queues {
				b.DoubleAppliesRedelivery += n - 1
			}
			b.DoubleAppliesAcrossQueues += len(queues) - 1
			rep.fail(once, "%s applied %d times (%s)", op, len(as), describeApps(as))
		}
		for _, a := range as {
			for _, at := range attempts[a.op+"/"+a.queue] {
				if at.retry > a.retry && at.at.Before(a.at) {
					b.StaleWrites++
					rep.fail(stale, "%s: attempt %d committed at %s, after attempt %d had started at %s",
						op, a.retry, a.at.Format("15:04:05.000"), at.retry, at.at.Format("15:04:05.000"))
					break
				}
			}
		}
	}

	// Outcomes: applied, or what asynq did with the task; and every task
	// asynq acknowledged is still there (retained after completion).
	insp := asynq.NewInspectorFromRedisClient(e.rdb)
	kept := rep.newCheck("acknowledged jobs kept", "every task asynq acknowledged is in asynq at the end (completed tasks are retained)")
	fs := rep.Failover
	if fs == nil {
		fs = &failoverSummary{}
	}
	lost := rep.newCheck("no transfer lost", "every covered transfer was applied or is still in asynq's hands")
	for _, op := range w.operations() {
		applied := len(appsByOp[op.ID]) > 0
		state, lastErr := "missing", ""
		for _, q := range op.Queues {
			if !op.Confirmed[q] {
				continue
			}
			fs.AcknowledgedJobs++
			ti, err := insp.GetTaskInfo(baselineQueue(namespace, q), op.ID)
			if errors.Is(err, asynq.ErrTaskNotFound) || errors.Is(err, asynq.ErrQueueNotFound) {
				fs.LostJobs++
				if rep.Failover != nil {
					fs.attribute(op.AckedAt[q])
				}
				if applied {
					fs.LostApplied++
				} else {
					fs.LostNeverApplied++
				}
				rep.fail(kept, "%s: task in %s acknowledged, missing at the end (transfer applied: %v)", op.ID, q, applied)
				continue
			}
			if err != nil {
				return err
			}
			if state == "missing" || state == asynq.TaskStateArchived.String() {
				state, lastErr = ti.State.String(), ti.LastErr
			}
		}
		if applied {
			if op.Overdraft {
				rep.fail(once, "overdraft %s was applied", op.ID)
			}
			rep.Outcomes["applied"]++
			continue
		}
		switch {
		case op.Overdraft && state == "archived" && strings.Contains(lastErr, "insufficient funds"):
			rep.Outcomes["dead_overdraft"]++
		case state == "archived" || state == "missing" || state == "completed":
			b.Lost++
			rep.Outcomes["lost_"+state]++
			rep.fail(lost, "%s never applied; its task is %s (%s)", op.ID, state, lastErr)
		default:
			b.Unfinished++
			rep.Outcomes["unfinished_"+state]++
		}
	}
	if rep.Failover != nil {
		ws := make([]write, 0, len(apps))
		for _, a := range apps {
			if op := byOp[a.op]; op != nil {
				ws = append(ws, write{at: a.at, account: op.Args.From})
			}
		}
		first := map[string]time.Time{}
		for _, a := range apps {
			if t, ok := first[a.op]; !ok || a.at.Before(t) {
				first[a.op] = a.at
			}
		}
		rep.Failover.Costs = failoverCosts(rep.Failover.Failovers, ws, queuedTransfers(w.operations(), first), e.workloadStopped, time.Now())
	}
	b.Asynq, err = asynqCounts(insp)
	return err
}

// asynqCounts sums asynq's own counters and task states over the
// workload's queues.
func asynqCounts(insp *asynq.Inspector) (map[string]int, error) {
	out := map[string]int{}
	for _, q := range []string{transfersQueue, priorityQueue} {
		qi, err := baselineQueueInfo(insp, q)
		if err != nil {
			return nil, err
		}
		if qi == nil {
			continue
		}
		out["processed_total"] += qi.ProcessedTotal
		out["failed_total"] += qi.FailedTotal
		out["archived"] += qi.Archived
		out["completed"] += qi.Completed
		out["active"] += qi.Active
		out["pending"] += qi.Pending + qi.Scheduled + qi.Retry
	}
	return out, nil
}

// baselineQueueInfo returns the asynq statistics of one of the baseline's
// queues, or nil when asynq never saw a task for it (a queue exists in asynq
// only once something was enqueued to it). GetQueueInfo reports a missing
// queue with an error that does not wrap asynq.ErrQueueNotFound, so the
// queue list is asked first.
func baselineQueueInfo(insp *asynq.Inspector, q string) (*asynq.QueueInfo, error) {
	name := baselineQueue(namespace, q)
	queues, err := insp.Queues()
	if err != nil {
		return nil, err
	}
	if !slices.Contains(queues, name) {
		return nil, nil
	}
	return insp.GetQueueInfo(name)
}

// describeApps lists an operation's applications for an example line.
func describeApps(as []application) string {
	parts := make([]string, len(as))
	for i, a := range as {
		parts[i] = fmt.Sprintf("%s attempt %d at %s", a.queue, a.retry, a.at.Format("15:04:05.000"))
	}
	return strings.Join(parts, ", ")
}
