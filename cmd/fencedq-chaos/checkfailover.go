package main

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// What the checker adds for failovers (and measures in every mode):
//
//   - acknowledged jobs lost: every job (or asynq task) the client's
//     enqueue acknowledged must be there at the end. With one Redis and
//     its AOF a loss is a violation; across failovers without durable
//     acknowledgements (asynchronous replication) it is a finding, counted
//     and reported, and with --durable a violation again. The consequences
//     of a loss (a re-submission that got a new job because the ledger
//     forgot the operation id, an effect whose job or whose attempt a
//     failover erased) are findings of the same kind, each tied to a
//     failover's loss window, never excused otherwise;
//   - accepted tokens in order: per resource, no write the storage accepted
//     carries a token below an earlier accepted write's (pgfence refuses
//     them; the check reads the storage's own acceptance log);
//   - refusal stretches: per resource, a run of stale-fence refusals by the
//     storage with no write accepted in between, from its first refusal to
//     its last (chaos_rejected's timestamps). In failover mode the longest
//     must not exceed the lease TTL plus the longest failover (kill to
//     promotion): after that, every live attempt holds a token above any
//     from before the failover. Elsewhere it is reported;
//   - what each failover cost: the longest time without any accepted write
//     around it, and the account slowest to see a write again.

// failoverSummary is what the failovers cost and what was lost.
type failoverSummary struct {
	// Durable is --durable: losses are violations.
	Durable bool `json:"durable"`
	// Failovers are the nemesis's failovers and any primary switch the
	// Sentinel made by itself (kind "unplanned"), in time order.
	Failovers []failoverRecord `json:"failovers"`
	// SentinelSwitches counts the switches the Sentinel announced.
	SentinelSwitches int `json:"sentinel_switches"`
	// AcknowledgedJobs counts jobs (fencedq: distinct job ids the ledger
	// returned; asynq and the bridge: tasks asynq acknowledged) and
	// LostJobs those missing at the end; LostApplied of them had their
	// transfer applied anyway (before the loss, or through another job of
	// the operation), LostNeverApplied not: work the client was told was
	// queued and that never happened.
	AcknowledgedJobs int `json:"acknowledged_jobs"`
	LostJobs         int `json:"lost_jobs"`
	LostApplied      int `json:"lost_applied"`
	LostNeverApplied int `json:"lost_never_applied"`
	// LostByKind attributes each lost job (or task) to the failover whose
	// loss window its acknowledgement fell in: the first failover after
	// it, if acknowledged after a second before what that failover's
	// promoted replica last received (the cut, or the kill). LostOutsideWindows
	// counts lost jobs acknowledged before every window: replicated, yet
	// gone (expected 0).
	LostByKind         map[string]int `json:"lost_by_failover_kind,omitempty"`
	LostOutsideWindows int            `json:"lost_outside_windows"`
	// LedgerJobsLost counts, for the bridge, tasks asynq kept whose ledger
	// job is gone (included in LostJobs).
	LedgerJobsLost int `json:"ledger_jobs_lost,omitempty"`
	// ResubmittedAfterLoss counts duplicate submissions that got a new job
	// because the first one (and its operation id) was lost.
	ResubmittedAfterLoss int `json:"resubmitted_after_loss"`
	// AttemptsErased counts effects whose writing attempt is missing from
	// its job's history, written inside a failover's loss window.
	AttemptsErased int `json:"attempts_erased"`
	// ClientJobs is the number of new jobs acknowledged to the client;
	// LedgerEnqueued the ledger's own enqueued counter at the end (fencedq).
	ClientJobs     int   `json:"client_jobs,omitempty"`
	LedgerEnqueued int64 `json:"ledger_enqueued,omitempty"`
	// Rewinds counts the ledger rewinds clients and pools recorded
	// (fencedq), and RewindLostEnqueues the acknowledged enqueues they
	// counted as lost (a lower bound).
	Rewinds            int   `json:"rewinds"`
	RewindLostEnqueues int64 `json:"rewind_lost_enqueues"`
	// Costs says what each failover cost.
	Costs []failoverCost `json:"costs"`
}

// failoverCost is what one failover cost the workload.
type failoverCost struct {
	Kind     string `json:"kind"`
	Failover string `json:"failover"`
	// WorkStopped is the longest time without any accepted write that
	// began between the kill and the promotion.
	WorkStopped string `json:"work_stopped"`
	// SlowestAccount is the account (among those written in the minute
	// before the kill) that waited longest after the promotion for its
	// next accepted write, and SlowestResumed how long after the kill that
	// was (or that it saw none before the next failover or the end).
	SlowestAccount string `json:"slowest_account,omitempty"`
	SlowestResumed string `json:"slowest_resumed,omitempty"`
	// Window is how long the promoted primary served before the next
	// failover's kill (or the end).
	Window string `json:"window,omitempty"`
	// SlowestQueued tells a stall from an account with nothing to do: the
	// transfers out of the slowest account (overdrafts aside) acknowledged
	// from a minute before this kill until the next failover and not
	// applied before this kill, and of
	// them how many were applied only after the next failover's kill and
	// how many never (lost with the failover's data).
	SlowestQueued      int `json:"slowest_queued"`
	SlowestAppliedLate int `json:"slowest_applied_late"`
	SlowestNeverRan    int `json:"slowest_never_applied"`
	slowest            time.Duration
	stopped            time.Duration
}

// queuedTransfer is one acknowledged transfer: when the queue first
// acknowledged it, its source account, and when storage accepted it (zero:
// never).
type queuedTransfer struct {
	acked, applied time.Time
	account        string
}

// queuedTransfers lists the acknowledged transfers of ops (overdrafts
// aside) with the time storage accepted each (firstApplied: by operation
// id).
func queuedTransfers(ops []*operation, firstApplied map[string]time.Time) []queuedTransfer {
	out := make([]queuedTransfer, 0, len(ops))
	for _, op := range ops {
		if op.Overdraft {
			continue
		}
		var acked time.Time
		for _, at := range op.AckedAt {
			if acked.IsZero() || at.Before(acked) {
				acked = at
			}
		}
		if acked.IsZero() {
			continue
		}
		out = append(out, queuedTransfer{acked: acked, applied: firstApplied[op.ID], account: op.Args.From})
	}
	return out
}

// refusalStretch is a run of stale-fence refusals of one resource with no
// accepted write in between.
type refusalStretch struct {
	Resource string    `json:"resource"`
	From     time.Time `json:"from"`
	To       time.Time `json:"to"`
	Duration string    `json:"duration"`
	Refusals int       `json:"refusals"`
	// Limit is the longest stretch the failover check allows.
	Limit string `json:"limit,omitempty"`
	d     time.Duration
}

// write is one accepted write at a time (its account is the transfer's
// source).
type write struct {
	at      time.Time
	account string
}

// readRefusalTimeline reads, per resource, the times the storage accepted
// something (a fence raise or a write) and the times it refused a stale
// fence, each in time order.
func readRefusalTimeline(ctx context.Context, pool *pgxpool.Pool, schema string) (accepts, refusals map[string][]time.Time, err error) {
	s := qschema(schema)
	accepts, err = readTimes(ctx, pool, `SELECT resource, at FROM `+s+`.chaos_fence_log
		UNION ALL SELECT resource, at FROM `+s+`.chaos_accepted`)
	if err != nil {
		return nil, nil, err
	}
	refusals, err = readTimes(ctx, pool, `SELECT resource, at FROM `+s+`.chaos_rejected WHERE stage LIKE 'stale_%'`)
	return accepts, refusals, err
}

// readTimes runs q, which selects (resource, time) rows, and returns the
// times per resource in order.
func readTimes(ctx context.Context, pool *pgxpool.Pool, q string) (map[string][]time.Time, error) {
	rows, err := pool.Query(ctx, q)
	if err != nil {
		return nil, err
	}
	out := map[string][]time.Time{}
	for rows.Next() {
		var res string
		var at time.Time
		if err := rows.Scan(&res, &at); err != nil {
			return nil, err
		}
		out[res] = append(out[res], at)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for _, ts := range out {
		sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
	}
	return out, nil
}

// refusalStretches returns every resource's stretches of refusals.
func refusalStretches(accepts, refusals map[string][]time.Time) []refusalStretch {
	var out []refusalStretch
	for res, rs := range refusals {
		as := accepts[res]
		ai := 0
		var cur *refusalStretch
		for _, r := range rs {
			// An acceptance before this refusal ends the open stretch.
			crossed := false
			for ai < len(as) && !as[ai].After(r) {
				ai++
				crossed = true
			}
			if cur != nil && crossed {
				out = append(out, *cur)
				cur = nil
			}
			if cur == nil {
				cur = &refusalStretch{Resource: res, From: r}
			}
			cur.To = r
			cur.Refusals++
		}
		if cur != nil {
			out = append(out, *cur)
		}
	}
	for i := range out {
		out[i].d = out[i].To.Sub(out[i].From)
		out[i].Duration = out[i].d.Round(time.Millisecond).String()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].d > out[j].d })
	return out
}

// checkRefusals adds the refusal-stretch figure, and in failover mode its
// check, to rep.
func checkRefusals(ctx context.Context, e *runEnv, rep *report) error {
	accepts, refusals, err := readRefusalTimeline(ctx, e.admin, e.schema)
	if err != nil {
		return err
	}
	stretches := refusalStretches(accepts, refusals)
	if len(stretches) > 0 {
		rep.LongestRefusal = &stretches[0]
	}
	if !e.failingOver() {
		return nil
	}
	var longestFailover time.Duration
	for _, f := range rep.Failover.Failovers {
		if !f.Promoted.IsZero() {
			longestFailover = max(longestFailover, f.Promoted.Sub(f.Killed))
		}
	}
	limit := e.o.LeaseTTL + longestFailover
	c := rep.newCheck("no attempt refused for longer than lease TTL + failover time",
		fmt.Sprintf("per resource, a run of stale-fence refusals by the storage with no accepted write in between lasts at most lease TTL %v + the longest failover %v = %v",
			e.o.LeaseTTL, longestFailover.Round(time.Millisecond), limit.Round(time.Millisecond)))
	if rep.LongestRefusal != nil {
		rep.LongestRefusal.Limit = limit.Round(time.Millisecond).String()
	}
	for _, st := range stretches {
		if st.d <= limit {
			break
		}
		rep.fail(c, "%s refused %d times over %s (%s to %s) without an accepted write",
			st.Resource, st.Refusals, st.Duration, st.From.Format("15:04:05.000"), st.To.Format("15:04:05.000"))
	}
	return nil
}

// checkAcceptedOrder checks that per resource no accepted write carries a
// token below an earlier accepted write's (acc in the storage's order).
func checkAcceptedOrder(acc []accepted, rep *report) {
	c := rep.newCheck("accepted tokens never below an earlier accepted token",
		"per resource, in the order the storage accepted writes (chaos_accepted's sequence, drawn under the fence row lock), each write's token is at least every earlier write's")
	last := map[string]accepted{}
	for _, a := range acc {
		if prev, ok := last[a.resource]; ok && a.token < prev.token {
			rep.fail(c, "%s: %s accepted with token %d after %s with token %d", a.resource, a.op, a.token, prev.op, prev.token)
			continue
		}
		last[a.resource] = a
	}
}

// attribute counts a job or task acknowledged at acked and lost, by the
// failover that lost it (see LostByKind).
func (fs *failoverSummary) attribute(acked time.Time) {
	for _, f := range fs.Failovers {
		// An acknowledgement read just after the kill was sent before it.
		if acked.After(f.Killed.Add(time.Second)) {
			continue
		}
		if !acked.Before(f.lossFrom()) {
			if fs.LostByKind == nil {
				fs.LostByKind = map[string]int{}
			}
			fs.LostByKind[f.Kind]++
			return
		}
		break
	}
	fs.LostOutsideWindows++
}

// inLossWindow reports whether a write at t may have come from an attempt
// whose ledger record a failover lost: claimed on the old primary after
// a second before what the promoted replica last received (the cut, or
// the kill), writing within a handler timeout plus the longest pause (3
// lease TTLs) of the kill. A long-paused attempt writing later is not
// excused: by then newer attempts have raised the fence and the storage
// refuses it, so such a write is reported as a violation.
func (e *runEnv) inLossWindow(failovers []failoverRecord, t time.Time) bool {
	slack := e.o.HandlerTimeout + 3*e.o.LeaseTTL
	for _, f := range failovers {
		if !t.Before(f.lossFrom()) && !t.After(f.Killed.Add(slack)) {
			return true
		}
	}
	return false
}

// failoverCosts measures what each failover cost from the accepted writes
// over the accounts; a failover after the workload stopped submitting
// (stopped) had no work to hold up and is not measured.
func failoverCosts(failovers []failoverRecord, writes []write, queued []queuedTransfer, stopped, end time.Time) []failoverCost {
	sort.Slice(writes, func(i, j int) bool { return writes[i].at.Before(writes[j].at) })
	out := make([]failoverCost, 0, len(failovers))
	for i, f := range failovers {
		c := failoverCost{Kind: f.Kind, Failover: f.Failover}
		if f.Promoted.IsZero() {
			c.Failover = "no promotion"
			out = append(out, c)
			continue
		}
		if f.Killed.After(stopped) {
			c.WorkStopped = "not measured: after the workload stopped"
			out = append(out, c)
			continue
		}
		// Work stopped: the longest gap after a moment in [kill, promotion].
		k := sort.Search(len(writes), func(j int) bool { return writes[j].at.After(f.Killed) })
		from := f.Killed
		for j := k; ; j++ {
			next := end
			if j < len(writes) {
				next = writes[j].at
			}
			c.stopped = max(c.stopped, next.Sub(from))
			if j >= len(writes) || writes[j].at.After(f.Promoted) {
				break
			}
			from = writes[j].at
		}
		c.WorkStopped = c.stopped.Round(10 * time.Millisecond).String()
		// The slowest account: written in the minute before the kill, first
		// written again after the promotion.
		horizon := end
		if i+1 < len(failovers) {
			horizon = failovers[i+1].Killed
		}
		active := map[string]bool{}
		for j := k - 1; j >= 0 && writes[j].at.After(f.Killed.Add(-time.Minute)); j-- {
			active[writes[j].account] = true
		}
		resumed := map[string]time.Duration{}
		p := sort.Search(len(writes), func(j int) bool { return writes[j].at.After(f.Promoted) })
		for j := p; j < len(writes) && writes[j].at.Before(horizon) && len(resumed) < len(active); j++ {
			if a := writes[j].account; active[a] {
				if _, ok := resumed[a]; !ok {
					resumed[a] = writes[j].at.Sub(f.Killed)
				}
			}
		}
		c.Window = horizon.Sub(f.Promoted).Round(10 * time.Millisecond).String()
		for _, a := range sortedKeys(active) {
			d, ok := resumed[a]
			if !ok {
				c.SlowestAccount, c.slowest = a, horizon.Sub(f.Killed)
				c.SlowestResumed = "no write before the next failover"
				if i+1 >= len(failovers) {
					c.SlowestResumed = "no write until the end"
				}
				break
			}
			if d > c.slowest {
				c.SlowestAccount, c.slowest = a, d
				c.SlowestResumed = d.Round(10 * time.Millisecond).String()
			}
		}
		for _, q := range queued {
			if q.account != c.SlowestAccount || !q.acked.Before(horizon) || q.acked.Before(f.Killed.Add(-time.Minute)) ||
				(!q.applied.IsZero() && q.applied.Before(f.Killed)) {
				continue
			}
			c.SlowestQueued++
			switch {
			case q.applied.IsZero():
				c.SlowestNeverRan++
			case !q.applied.Before(horizon):
				c.SlowestAppliedLate++
			}
		}
		out = append(out, c)
	}
	return out
}
