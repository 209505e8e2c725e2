package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencedq/fencedq/examples/bank"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
)

// move is one balance change (chaos_moves).
type move struct {
	seq     int64
	account string
	delta   int64
	txid    int64
}

// accepted is one effect pgfence recorded (chaos_accepted).
type accepted struct {
	seq              int64
	op, resource     string
	token            lease.Token
	owner            string
	hwToken, hwOwner string
	txid             int64
	at               time.Time
}

// fenceChange is one change of a fences row (chaos_fence_log).
type fenceChange struct {
	seq      int64
	resource string
	token    lease.Token
	owner    string
}

// parseTok reads a token stored as numeric text.
func parseTok(s string) lease.Token { t, _ := strconv.ParseUint(s, 10, 64); return lease.Token(t) }

// readMoneyAndMoves reads balances and the balance-change log, and checks
// conservation and the replay. Shared by both modes.
func readMoneyAndMoves(ctx context.Context, pool *pgxpool.Pool, schema string, accounts []string, rep *report) ([]move, error) {
	s := qschema(schema)
	balances := map[string]int64{}
	rows, err := pool.Query(ctx, `SELECT id, balance FROM `+s+`.bank_accounts`)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var id string
		var b int64
		if err := rows.Scan(&id, &b); err != nil {
			return nil, err
		}
		balances[id] = b
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var moves []move
	rows, err = pool.Query(ctx, `SELECT seq, account, delta, txid FROM `+s+`.chaos_moves ORDER BY seq`)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var m move
		if err := rows.Scan(&m.seq, &m.account, &m.delta, &m.txid); err != nil {
			return nil, err
		}
		moves = append(moves, m)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	want := int64(len(accounts)) * initialCents
	c := rep.newCheck("money conserved", fmt.Sprintf("sum of %d balances = %d accounts x %d cents", len(balances), len(accounts), initialCents))
	if got := bank.Total(balances); got != want || len(balances) != len(accounts) {
		rep.fail(c, "total is %d cents over %d accounts, want %d over %d", got, len(balances), want, len(accounts))
	}
	replay := map[string]int64{}
	for _, a := range accounts {
		replay[a] = initialCents
	}
	for _, m := range moves {
		replay[m.account] += m.delta
	}
	c = rep.newCheck("balances replay", fmt.Sprintf("every balance = opening balance + its %d logged changes", len(moves)))
	for _, a := range accounts {
		if replay[a] != balances[a] {
			rep.fail(c, "%s holds %d, its changes add up to %d", a, balances[a], replay[a])
		}
	}
	rep.Storage["balance_changes"] = int64(len(moves))
	return moves, nil
}

// jobView is one acknowledged job with its ledger record and history (nil
// when lost).
type jobView struct {
	queue string
	id    string
	rec   *jobs.Record
	hist  []jobs.Entry
	// lost: missing at the end (for the bridge: its asynq task or its
	// ledger job).
	lost bool
}

// checkFenced verifies a fencedq run.
func checkFenced(ctx context.Context, e *runEnv, ledger *ledger.Ledger, w *workload, rep *report) error {
	s := qschema(e.schema)
	pool := e.admin
	moves, err := readMoneyAndMoves(ctx, pool, e.schema, e.accounts, rep)
	if err != nil {
		return err
	}

	// Storage logs.
	var acc []accepted
	rows, err := pool.Query(ctx, `SELECT seq, operation_id, resource, token::text, owner,
		coalesce(hw_token::text, ''), coalesce(hw_owner, ''), txid, at FROM `+s+`.chaos_accepted ORDER BY seq`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var a accepted
		var tok string
		if err := rows.Scan(&a.seq, &a.op, &a.resource, &tok, &a.owner, &a.hwToken, &a.hwOwner, &a.txid, &a.at); err != nil {
			return err
		}
		a.token = parseTok(tok)
		acc = append(acc, a)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	var changes []fenceChange
	rows, err = pool.Query(ctx, `SELECT seq, resource, token::text, owner FROM `+s+`.chaos_fence_log ORDER BY seq`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var f fenceChange
		var tok string
		if err := rows.Scan(&f.seq, &f.resource, &tok, &f.owner); err != nil {
			return err
		}
		f.token = parseTok(tok)
		changes = append(changes, f)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	type effect struct {
		resource, owner string
		token           lease.Token
	}
	effects := map[string]effect{}
	rows, err = pool.Query(ctx, `SELECT operation_id, resource, token::text, owner FROM `+s+`.effects`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var op, tok string
		var ef effect
		if err := rows.Scan(&op, &ef.resource, &tok, &ef.owner); err != nil {
			return err
		}
		ef.token = parseTok(tok)
		effects[op] = ef
	}
	if err := rows.Err(); err != nil {
		return err
	}
	rejected := map[string]int64{}
	rows, err = pool.Query(ctx, `SELECT stage, count(*) FROM `+s+`.chaos_rejected GROUP BY stage`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var stage string
		var n int64
		if err := rows.Scan(&stage, &n); err != nil {
			return err
		}
		rejected[stage] = n
	}
	if err := rows.Err(); err != nil {
		return err
	}
	rep.Storage["effects"] = int64(len(effects))
	rep.Storage["accepted_writes"] = int64(len(acc))
	rep.Storage["fence_raises"] = int64(len(changes))
	rep.Storage["rejected_stale_on_acquire"] = rejected["stale_acquire"]
	rep.Storage["rejected_stale_on_write"] = rejected["stale_transfer"]
	rep.Storage["rejected_already_applied"] = rejected["already_applied"]

	ops := w.operations()
	byOp := make(map[string]*operation, len(ops))
	for _, op := range ops {
		byOp[op.ID] = op
	}

	// Every balance change belongs to exactly one accepted effect, and moves
	// exactly the money of its transfer.
	c := rep.newCheck("every balance change is one fenced effect",
		"balance changes grouped by transaction: each transaction recorded exactly one effect and moved exactly its transfer's cents")
	movesByTx := map[int64][]move{}
	for _, m := range moves {
		movesByTx[m.txid] = append(movesByTx[m.txid], m)
	}
	accByTx := map[int64][]accepted{}
	for _, a := range acc {
		accByTx[a.txid] = append(accByTx[a.txid], a)
	}
	for tx, ms := range movesByTx {
		as := accByTx[tx]
		if len(as) != 1 {
			rep.fail(c, "transaction %d changed %d balances with %d effects recorded", tx, len(ms), len(as))
			continue
		}
		op := byOp[as[0].op]
		if op == nil {
			rep.fail(c, "transaction %d applied unknown operation %s", tx, as[0].op)
			continue
		}
		got := map[string]int64{}
		for _, m := range ms {
			got[m.account] += m.delta
		}
		if len(got) != 2 || got[op.Args.From] != -op.Args.Cents || got[op.Args.To] != op.Args.Cents {
			rep.fail(c, "transaction %d for %s moved %v, want %s -%d and %s +%d", tx, op.ID, got, op.Args.From, op.Args.Cents, op.Args.To, op.Args.Cents)
		}
	}
	for tx, as := range accByTx {
		if len(movesByTx[tx]) == 0 {
			rep.fail(c, "transaction %d recorded effect %s but changed no balance", tx, as[0].op)
		}
	}

	// The effect log and the acceptance log agree.
	c = rep.newCheck("effect log matches the acceptance log",
		"pgfence's effects and the trigger-written acceptance log hold the same operations with the same fence")
	accByOp := map[string][]accepted{}
	for _, a := range acc {
		accByOp[a.op] = append(accByOp[a.op], a)
	}
	for op, as := range accByOp {
		ef, ok := effects[op]
		switch {
		case len(as) != 1:
			rep.fail(c, "operation %s was accepted %d times", op, len(as))
		case !ok:
			rep.fail(c, "operation %s accepted but missing from the effect log", op)
		case ef.token != as[0].token || ef.owner != as[0].owner || ef.resource != as[0].resource:
			rep.fail(c, "operation %s: effect log says %s/%d/%s, acceptance log %s/%d/%s", op, ef.resource, ef.token, ef.owner, as[0].resource, as[0].token, as[0].owner)
		}
	}
	for op := range effects {
		if len(accByOp[op]) == 0 {
			rep.fail(c, "operation %s in the effect log was never accepted", op)
		}
	}

	// Tokens per resource never decrease and never have two owners.
	checkAcceptedOrder(acc, rep)
	c = rep.newCheck("tokens per account never decrease, one owner per token",
		"per resource, in the order the storage accepted them (one sequence under the fence row lock): high-water tokens never decrease, each write carries the high-water mark of its own transaction, no token has two owners")
	type ev struct {
		seq   int64
		token lease.Token
		owner string
		write *accepted
	}
	perRes := map[string][]ev{}
	for _, f := range changes {
		perRes[f.resource] = append(perRes[f.resource], ev{seq: f.seq, token: f.token, owner: f.owner})
	}
	for i := range acc {
		a := &acc[i]
		perRes[a.resource] = append(perRes[a.resource], ev{seq: a.seq, token: a.token, owner: a.owner, write: a})
	}
	strictWrites := 0
	for res, evs := range perRes {
		sort.Slice(evs, func(i, j int) bool { return evs[i].seq < evs[j].seq })
		owners := map[lease.Token]string{}
		var hw lease.Token
		var lastWrite lease.Token
		for _, x := range evs {
			if o, ok := owners[x.token]; ok && o != x.owner {
				rep.fail(c, "%s: token %d used by %s and by %s", res, x.token, o, x.owner)
			}
			owners[x.token] = x.owner
			if x.write == nil {
				if x.token < hw {
					rep.fail(c, "%s: high-water went down from %d to %d (seq %d)", res, hw, x.token, x.seq)
				}
				hw = max(hw, x.token)
				continue
			}
			if x.write.hwToken != x.token.String() || x.write.hwOwner != x.owner {
				rep.fail(c, "%s: write of %s with token %d/%s saw high-water %s/%s in its transaction", res, x.write.op, x.token, x.owner, x.write.hwToken, x.write.hwOwner)
			}
			if x.token > lastWrite {
				strictWrites++
			}
			lastWrite = max(lastWrite, x.token)
		}
	}
	rep.Storage["resources"] = int64(len(perRes))

	// The ledger: every job the client was given, with its history. For
	// the bridge, the acknowledgement is asynq's: its task must be there too.
	bridge := e.o.Baseline == modeBridge
	var insp *asynq.Inspector
	if bridge {
		insp = asynq.NewInspectorFromRedisClient(e.rdb)
	}
	views := map[string][]*jobView{} // op -> its jobs
	jobStates := map[string]int{}
	ledgerLost := map[*jobView]bool{} // bridge: asynq kept the task, the ledger lost its job
	for _, op := range ops {
		for _, q := range op.Queues {
			for _, id := range op.jobIDs(q) {
				v := &jobView{queue: q, id: id}
				views[op.ID] = append(views[op.ID], v)
				if bridge {
					_, err := insp.GetTaskInfo(baselineQueue(namespace, q), op.ID)
					switch {
					case errors.Is(err, asynq.ErrTaskNotFound) || errors.Is(err, asynq.ErrQueueNotFound):
						v.lost = true
					case err != nil:
						return err
					}
				}
				lq := e.ledgerQueue(q, op.ID)
				rec, err := ledger.Get(ctx, lq, id)
				if errors.Is(err, jobs.ErrNotFound) {
					if bridge && !v.lost {
						ledgerLost[v] = true
					}
					v.lost = true
					continue
				}
				if err != nil {
					return err
				}
				hist, err := ledger.History(ctx, lq, id)
				if err != nil {
					return err
				}
				v.rec, v.hist = rec, hist
				jobStates[string(rec.State)]++
			}
		}
	}
	rep.Jobs = jobStates
	checkFlow(e.o, views, rep)
	rep.Ledger = map[string]int64{}
	for _, q := range e.ledgerQueues() {
		st, err := ledger.Stats(ctx, q)
		if err != nil {
			return err
		}
		for k, v := range st {
			rep.Ledger[k] += v
		}
	}

	// Acknowledged jobs kept: a violation with one Redis (its AOF keeps
	// every acknowledged write) or with --durable; across failovers with
	// asynchronous replication, a finding.
	fs := rep.Failover
	if fs == nil {
		fs = &failoverSummary{} // counted, not reported
	}
	lossDetail := "every job the client's enqueue acknowledged is in the ledger at the end"
	if bridge {
		lossDetail = "every task asynq acknowledged is in asynq at the end, and the ledger job of every task it ran"
	}
	if e.fo != nil && !e.o.Durable {
		lossDetail += "; without durable acknowledgements a failover may lose them: counted and reported, not failed (--durable makes them violations)"
	}
	loss := rep.newFinding("acknowledged jobs kept", lossDetail, e.fo == nil || e.o.Durable)
	for _, op := range ops {
		_, applied := effects[op.ID]
		for _, v := range views[op.ID] {
			fs.AcknowledgedJobs++
			if !v.lost {
				continue
			}
			fs.LostJobs++
			what := "missing from the ledger"
			if bridge {
				what = "missing from asynq"
				if ledgerLost[v] {
					fs.LedgerJobsLost++
					what = "kept by asynq, its ledger job missing"
				}
			}
			if !ledgerLost[v] && rep.Failover != nil {
				fs.attribute(op.AckedAt[v.queue])
			}
			if applied {
				fs.LostApplied++
			} else {
				fs.LostNeverApplied++
			}
			rep.fail(loss, "%s: job %s in %s acknowledged, %s at the end (transfer applied: %v)", op.ID, v.id, v.queue, what, applied)
		}
	}
	if !bridge { // the bridge's ledger jobs are made at delivery, not at enqueue
		fs.ClientJobs = fs.AcknowledgedJobs
		fs.LedgerEnqueued = rep.Ledger["enqueued"]
	}
	// lostID reports whether job id of op was lost.
	lostID := func(op *operation, id string) bool {
		for _, v := range views[op.ID] {
			if v.id == id && v.lost {
				return true
			}
		}
		return false
	}

	// Every submitted operation has its jobs, each in a final state or
	// review, with a reason where it did not succeed.
	c = rep.newCheck("no job stuck",
		"every submission was confirmed; every job there at the end is succeeded, or dead/review with a recorded reason; none pending, running or uncertain")
	dedup := rep.newCheck("deduplicated submissions return the same job", "every repeated submission of an operation id to a queue got the first job's id")
	for _, op := range ops {
		for _, q := range op.Queues {
			if len(op.Others[q]) == 0 {
				continue
			}
			if lostID(op, op.Jobs[q]) {
				// The ledger forgot the operation id with the job.
				fs.ResubmittedAfterLoss += len(op.Others[q])
				rep.fail(loss, "%s: re-submitted to %s after its job %s was lost, got new job(s) %v", op.ID, q, op.Jobs[q], op.Others[q])
				continue
			}
			for _, cf := range op.Conflicts {
				rep.fail(dedup, "%s: %s", op.ID, cf)
			}
		}
		for _, q := range op.Queues {
			if !op.Confirmed[q] {
				rep.fail(c, "%s: no submission to %s was ever confirmed", op.ID, q)
			}
		}
		for _, v := range views[op.ID] {
			if v.rec == nil {
				continue // lost: the check above
			}
			switch v.rec.State {
			case jobs.Succeeded:
			case jobs.Dead, jobs.Review:
				if v.rec.Reason == "" && v.rec.Error == "" {
					rep.fail(c, "%s: job %s is %s without a recorded reason", op.ID, v.rec.ID, v.rec.State)
				}
			default:
				rep.fail(c, "%s: job %s is stuck %s (attempts %d, reason %q)", op.ID, v.rec.ID, v.rec.State, v.rec.Attempts, v.rec.Reason)
			}
		}
	}

	// Exactly once: the ledger and the storage agree per operation.
	var failovers []failoverRecord
	if rep.Failover != nil {
		failovers = rep.Failover.Failovers
	}
	c = rep.newCheck("every transfer applied exactly once",
		"an operation with a succeeded job has exactly one effect; one whose jobs are all dead has none; overdrafts are never applied; every effect was written by an attempt of its own operation")
	u := &uncertainSummary{Reasons: map[string]int{}, Decisions: map[string]int{}}
	for _, op := range ops {
		vs := views[op.ID]
		succeeded, dead, review, lost := 0, 0, 0, 0
		for _, v := range vs {
			if v.rec == nil {
				lost++
				continue
			}
			switch v.rec.State {
			case jobs.Succeeded:
				succeeded++
			case jobs.Dead:
				dead++
			case jobs.Review:
				review++
			}
		}
		ef, applied := effects[op.ID]
		n := len(accByOp[op.ID])
		switch {
		case succeeded > 0 && (!applied || n != 1):
			rep.fail(c, "%s succeeded but was applied %d times (effect logged: %v)", op.ID, n, applied)
		case succeeded == 0 && review == 0 && dead > 0 && applied:
			rep.fail(c, "%s is dead but its effect was applied (token %d by %s)", op.ID, ef.token, ef.owner)
		case op.Overdraft && applied:
			rep.fail(c, "overdraft %s was applied", op.ID)
		}
		switch {
		case len(vs) > 0 && lost == len(vs):
			if applied {
				rep.Outcomes["lost_applied"]++
			} else {
				rep.Outcomes["lost_never_applied"]++
			}
		case len(vs) == 0 || (succeeded == 0 && dead == 0 && review == 0):
			rep.Outcomes["unfinished"]++
		case succeeded > 0:
			rep.Outcomes["succeeded"]++
			if len(vs) > 1 && succeeded > 1 {
				rep.Outcomes["succeeded_twice_applied_once"]++
			}
		case review > 0:
			if applied {
				rep.Outcomes["review_applied"]++
			} else {
				rep.Outcomes["review_not_applied"]++
			}
		case op.Overdraft:
			rep.Outcomes["dead_overdraft"]++
		default:
			rep.Outcomes["dead_other"]++
		}
		if applied {
			// Native pools fence a transfer by its source account's lease;
			// the asynq bridge fences each job by its own token.
			want := "account:" + op.Args.From
			if bridge {
				want = jobs.LeaseResource(op.ID, "")
			}
			if ef.resource != want {
				rep.fail(c, "%s applied under resource %s, want %s", op.ID, ef.resource, want)
			}
			// The writer: the fence owner is "<worker>/<job id>"; the
			// effect's token is the fence of one of that job's attempts.
			// Bridged jobs of one operation in two queues share the id, so
			// the writer is the one with the matching attempt.
			var writer *jobView
			for _, v := range vs {
				if v.rec != nil && strings.HasSuffix(ef.owner, "/"+v.rec.ID) {
					if _, ok := writerAttempt(v.rec.ID, v.hist, ef.owner, ef.token, e.o.Cluster > 0); ok || writer == nil {
						writer = v
					}
				}
			}
			var at time.Time
			if as := accByOp[op.ID]; len(as) > 0 {
				at = as[0].at
			}
			switch {
			case writer == nil:
				lostWriter := false
				for _, v := range vs {
					lostWriter = lostWriter || (v.lost && strings.HasSuffix(ef.owner, "/"+v.id))
				}
				if !lostWriter {
					rep.fail(c, "%s applied by %s, which names none of its jobs", op.ID, ef.owner)
				} // else counted as a lost job that was applied
			default:
				tok, found := writerAttempt(writer.rec.ID, writer.hist, ef.owner, ef.token, e.o.Cluster > 0)
				switch {
				case found || len(writer.hist) >= 200: // histories keep the last 200 entries
				case e.fo != nil && e.inLossWindow(failovers, at):
					// The attempt's claim was on the old primary after what
					// the promoted replica had: the failover erased it.
					fs.AttemptsErased++
					rep.fail(loss, "%s applied with token %d by %s at %s, an attempt job %s's history lost in a failover",
						op.ID, ef.token, ef.owner, at.Format("15:04:05.000"), writer.rec.ID)
				default:
					rep.fail(c, "%s applied with token %d by %s, which is no attempt in job %s's history", op.ID, ef.token, ef.owner, writer.rec.ID)
				}
				if found && writer.rec.State == jobs.Succeeded && writer.rec.Token != tok {
					u.AppliedByEarlierAttempt++
				}
			}
		}
		// Uncertainty: how jobs got there and how they left.
		for _, v := range vs {
			ever := false
			for _, h := range v.hist {
				switch {
				case h.Event == "end" && h.Outcome == string(jobs.Uncertain):
					ever = true
					u.Episodes++
					u.Reasons[reasonKey(h.Reason)]++
				case h.Event == "resolve":
					actor := "reconciler"
					switch {
					case strings.HasPrefix(h.Actor, "bridge:"):
						actor = "bridge" // the asynq bridge, at a redelivery
					case !strings.HasPrefix(h.Actor, "reconciler"):
						actor = "operator"
					}
					u.Decisions[actor+"_"+h.Decision]++
				}
			}
			if ever {
				u.Jobs++
			}
		}
	}
	rep.Uncertain = u
	rep.Storage["strictly_increasing_writes"] = int64(strictWrites)
	if err := checkRefusals(ctx, e, rep); err != nil {
		return err
	}
	if rep.Failover != nil {
		ws := make([]write, 0, len(acc))
		for _, a := range acc {
			if op := byOp[a.op]; op != nil {
				ws = append(ws, write{at: a.at, account: op.Args.From})
			}
		}
		first := map[string]time.Time{}
		for _, a := range acc {
			if t, ok := first[a.op]; !ok || a.at.Before(t) {
				first[a.op] = a.at
			}
		}
		rep.Failover.Costs = failoverCosts(rep.Failover.Failovers, ws, queuedTransfers(ops, first), e.workloadStopped, time.Now())
	}
	return nil
}

// writerAttempt finds the attempt of job id, in its history, that wrote an
// effect with fence owner and token, and returns that attempt's job token.
//
// An attempt's history entry names the pool that claimed it (the fence
// owner is "<pool>/<job id>") and its job token. Its fence is the job token
// when the job is its own resource; when the job leases a named resource
// (a transfer leases its source account), the fence is that lease's token,
// minted after the claim, so never below the attempt's job token. The ledger
// records it when the attempt commits (the attempt's end entry, or the
// attempt itself on the common path); an attempt that never committed
// (expired, fenced at commit, killed) has none recorded. So the writer is an
// attempt with the effect's owner whose recorded fence is the effect's
// token, or, with no fence recorded, whose job token is at or below it.
// On Redis Cluster (crossSlot) the lease's token and the job's are minted
// in two slots, each in the epoch of its own master, so they are not
// ordered: the writer is then the latest attempt with the effect's owner.
func writerAttempt(id string, hist []jobs.Entry, owner string, token lease.Token, crossSlot bool) (lease.Token, bool) {
	fences := map[string]string{} // job token -> recorded fence
	for _, h := range hist {
		if h.Fence == "" || h.Token == "" {
			continue
		}
		if h.Event == "attempt" || h.Event == "end" {
			fences[h.Token] = h.Fence
		}
	}
	var best lease.Token
	found := false
	for _, h := range hist {
		if h.Event != "attempt" || (h.Owner != owner && h.Owner+"/"+id != owner) {
			continue
		}
		t := parseTok(h.Token)
		f, recorded := fences[h.Token]
		switch {
		case recorded && f == token.String():
			return t, true
		case !recorded && t == token:
			return t, true
		case !recorded && (t < token || crossSlot) && t >= best:
			best, found = t, true
		}
	}
	return best, found
}

// reasonKey shortens an uncertain reason to a stable key.
func reasonKey(r string) string {
	switch {
	case r == "":
		return "unspecified"
	case strings.HasPrefix(r, "lease lost mid-call"):
		return "lease lost mid-call"
	}
	return r
}
