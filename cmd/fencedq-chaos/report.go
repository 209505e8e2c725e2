package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
)

// report is the checker's result: what ran, what was injected, what was
// verified and what was counted. Its JSON form is what --json prints.
type report struct {
	Mode          string            `json:"mode"`
	Seed          uint64            `json:"seed"`
	Config        map[string]string `json:"config"`
	Timing        timing            `json:"timing"`
	Workload      workloadSummary   `json:"workload"`
	Faults        map[string]int    `json:"faults"`
	WorkerCrashes []string          `json:"worker_crashes"`
	// Outcomes counts operations by their final outcome.
	Outcomes map[string]int `json:"outcomes"`
	// Jobs counts ledger jobs by final state (fencedq mode).
	Jobs map[string]int `json:"jobs,omitempty"`
	// Ledger is the ledger's counters summed over the queues (fencedq mode).
	Ledger map[string]int64 `json:"ledger,omitempty"`
	// Storage counts what PostgreSQL saw.
	Storage map[string]int64 `json:"storage"`
	// Uncertain summarises the jobs that were ever uncertain (fencedq mode).
	Uncertain *uncertainSummary `json:"uncertain,omitempty"`
	// Baseline holds what the unfenced baseline did wrong (baseline mode).
	Baseline *baselineSummary `json:"baseline,omitempty"`
	// Asynq holds asynq's own counters and task states at the end (bridge
	// mode; the baseline's are in Baseline).
	Asynq map[string]int `json:"asynq,omitempty"`
	// LongestRefusal is the longest run of stale-fence refusals of one
	// resource by the storage with no accepted write in between.
	LongestRefusal *refusalStretch `json:"longest_refusal_stretch,omitempty"`
	// Failover holds the failovers and what they cost (--failover).
	Failover *failoverSummary `json:"failover,omitempty"`
	Checks   []*check         `json:"checks"`
	// ViolationCount is the number of violations over all checks.
	ViolationCount int `json:"violation_count"`
	// Violations lists failed checks' findings (the first examples of each).
	Violations []string `json:"violations"`
	// Findings lists what checks reported without failing the run (the
	// first examples of each): losses a non-durable failover is allowed.
	Findings []string     `json:"findings,omitempty"`
	FaultLog []faultEvent `json:"fault_log"`
	Schema   string       `json:"kept_schema,omitempty"`
	Dir      string       `json:"kept_dir,omitempty"`
}

// timing says how long the fault phase and the drain took.
type timing struct {
	FaultPhase string `json:"fault_phase"`
	Drain      string `json:"drain"`
	Settled    bool   `json:"settled"`
}

// workloadSummary counts what the workload submitted and how the queue answered.
type workloadSummary struct {
	Submissions          int64 `json:"submissions"`
	Operations           int   `json:"operations"`
	DuplicateSubmissions int64 `json:"duplicate_submissions"`
	ConcurrentDuplicates int64 `json:"concurrent_duplicates"`
	PriorityCopies       int64 `json:"priority_copies"`
	Overdrafts           int64 `json:"overdrafts"`
	Confirmed            int64 `json:"confirmed_submissions"`
	Deduplicated         int64 `json:"deduplicated_at_submit"`
	EnqueueErrors        int64 `json:"enqueue_errors_retried"`
	NeverConfirmed       int64 `json:"never_confirmed"`
}

// summary counts the workload so far.
func (w *workload) summary() workloadSummary {
	return workloadSummary{
		Submissions: w.submissions.Load(), Operations: len(w.operations()),
		DuplicateSubmissions: w.duplicates.Load(), ConcurrentDuplicates: w.concurrentDups.Load(),
		PriorityCopies: w.priorityCopies.Load(), Overdrafts: w.overdrafts.Load(),
		Confirmed: w.confirmed.Load(), Deduplicated: w.deduplicated.Load(),
		EnqueueErrors: w.enqueueErrors.Load(), NeverConfirmed: w.neverConfirmed.Load(),
	}
}

// uncertainSummary says how jobs became uncertain and how they were resolved.
type uncertainSummary struct {
	Jobs int `json:"jobs_ever_uncertain"`
	// Episodes counts entries into uncertain (a job can have several).
	Episodes int `json:"episodes"`
	// Reasons counts episodes by why the job became uncertain.
	Reasons map[string]int `json:"reasons"`
	// Decisions counts reconciler and operator decisions on uncertain jobs.
	Decisions map[string]int `json:"decisions"`
	// AppliedByEarlierAttempt counts succeeded operations whose effect was
	// written by an earlier attempt than the one the ledger ended with
	// (applied once, found in the effect log by the reconciler or the
	// re-run).
	AppliedByEarlierAttempt int `json:"applied_by_earlier_attempt"`
}

// check is one verified property. A finding is a check whose failures are
// reported and counted but are no violation of what the run promises (an
// acknowledged job lost in a failover without durable acknowledgements).
type check struct {
	Name       string   `json:"name"`
	OK         bool     `json:"ok"`
	Finding    bool     `json:"finding,omitempty"`
	Detail     string   `json:"detail"`
	Violations int      `json:"violations"`
	Examples   []string `json:"examples,omitempty"`
}

// maxExamples caps the examples kept per check.
const maxExamples = 10

// newReport starts an empty report for a run.
func newReport(mode string, o *options) *report {
	r := &report{
		Mode: mode, Seed: o.Seed,
		Config: map[string]string{
			"duration": o.Duration.String(), "rate": fmt.Sprint(o.Rate), "accounts": fmt.Sprint(o.Accounts),
			"workers": fmt.Sprint(o.Workers), "concurrency": fmt.Sprint(o.Concurrency), "careless": fmt.Sprint(o.Careless),
			"lease_ttl": o.LeaseTTL.String(), "handler_timeout": o.HandlerTimeout.String(),
			"reconcile_interval": o.ReconcileInterval.String(), "dup": fmt.Sprint(o.Dup),
			"priority_copies": fmt.Sprint(o.PriorityCopies), "overdrafts": fmt.Sprint(o.Overdrafts),
			"fault_gap": o.FaultGap.String(), "long_pauses": fmt.Sprint(o.LongPauses),
			"long_pause": o.LongPause.String(), "drain": o.Drain.String(),
		},
		Outcomes: map[string]int{}, Storage: map[string]int64{},
		WorkerCrashes: []string{}, Violations: []string{},
	}
	if o.Failover {
		r.Config["redis"] = "failover"
		r.Config["failover_faults"] = strings.Join(o.FailoverKinds, ",")
		r.Config["failover_gap"] = o.FailoverGap.String()
		r.Config["clock_offset"] = o.ClockOffset.String()
		r.Config["durable"] = fmt.Sprint(o.Durable)
	}
	return r
}

// newCheck adds a passing check; fail turns it into a violation.
func (r *report) newCheck(name, detail string) *check {
	c := &check{Name: name, OK: true, Detail: detail}
	r.Checks = append(r.Checks, c)
	return c
}

// newFinding adds a check whose failures are findings, not violations,
// unless violation says otherwise.
func (r *report) newFinding(name, detail string, violation bool) *check {
	c := r.newCheck(name, detail)
	c.Finding = !violation
	return c
}

// fail records one violation (or finding) of c.
func (r *report) fail(c *check, format string, a ...any) {
	msg := fmt.Sprintf(format, a...)
	c.OK = false
	c.Violations++
	if len(c.Examples) < maxExamples {
		c.Examples = append(c.Examples, msg)
		if c.Finding {
			r.Findings = append(r.Findings, c.Name+": "+msg)
		} else {
			r.Violations = append(r.Violations, c.Name+": "+msg)
		}
	} else if len(c.Examples) == maxExamples {
		c.Examples = append(c.Examples, "...")
	}
}

// violationCount returns the number of violations over all checks
// (Violations keeps only the first examples of each).
func (r *report) violationCount() int {
	n := 0
	for _, c := range r.Checks {
		if !c.Finding {
			n += c.Violations
		}
	}
	return n
}

// violation records a one-off failed check.
func (r *report) violation(name, msg string) {
	r.fail(r.newCheck(name, ""), "%s", msg)
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// joinCounts formats m as "k=v k=v" in key order.
func joinCounts[V int | int64](m map[string]V) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}

// printTable writes the report for a terminal.
func (r *report) printTable(out io.Writer) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	row := func(k string, v any) { fmt.Fprintf(tw, "  %s\t%v\n", k, v) }
	fmt.Fprintf(tw, "fencedq-chaos report (%s, seed %d)\n", r.Mode, r.Seed)
	fmt.Fprintf(tw, "\nrun\n")
	row("config", fmt.Sprintf("%s workers x %s (%s careless), lease TTL %s, handler timeout %s, reconcile every %s, %s accounts",
		r.Config["workers"], r.Config["concurrency"], r.Config["careless"], r.Config["lease_ttl"], r.Config["handler_timeout"],
		r.Config["reconcile_interval"], r.Config["accounts"]))
	row("fault phase / drain", fmt.Sprintf("%s / %s (settled: %v)", r.Timing.FaultPhase, r.Timing.Drain, r.Timing.Settled))
	w := r.Workload
	row("submissions", fmt.Sprintf("%d for %d operations (%d duplicates, %d of them concurrent; %d priority copies; %d overdrafts)",
		w.Submissions, w.Operations, w.DuplicateSubmissions, w.ConcurrentDuplicates, w.PriorityCopies, w.Overdrafts))
	row("submit answers", fmt.Sprintf("%d confirmed, %d deduplicated, %d errors retried, %d never confirmed",
		w.Confirmed, w.Deduplicated, w.EnqueueErrors, w.NeverConfirmed))
	fmt.Fprintf(tw, "\nfaults\n")
	for _, k := range sortedKeys(r.Faults) {
		row(k, r.Faults[k])
	}
	row("worker crashes (by themselves)", len(r.WorkerCrashes))
	fmt.Fprintf(tw, "\noutcomes\n")
	row("operations", joinCounts(r.Outcomes))
	if r.Jobs != nil {
		row("jobs", joinCounts(r.Jobs))
	}
	if r.Ledger != nil {
		row("ledger", joinCounts(r.Ledger))
	}
	if r.Asynq != nil {
		row("asynq", joinCounts(r.Asynq))
	}
	row("storage", joinCounts(r.Storage))
	if u := r.Uncertain; u != nil {
		row("uncertain", fmt.Sprintf("%d jobs, %d episodes; applied by an earlier attempt: %d", u.Jobs, u.Episodes, u.AppliedByEarlierAttempt))
		row("  why", joinCounts(u.Reasons))
		row("  decisions", joinCounts(u.Decisions))
	}
	if b := r.Baseline; b != nil {
		fmt.Fprintf(tw, "\nbaseline findings (unfenced asynq handler)\n")
		row("double applies", fmt.Sprintf("%d extra applications over %d operations (%d across queues, %d by redelivery or retry: %d within 30s, %d later)",
			b.DoubleApplies, b.DoubleAppliedOps, b.DoubleAppliesAcrossQueues, b.DoubleAppliesRedelivery, b.RedeliveredSoon, b.RedeliveredLate))
		row("stale writes", fmt.Sprintf("%d (committed after a newer attempt of the same task had started)", b.StaleWrites))
		row("lost transfers", b.Lost)
		row("unfinished tasks", b.Unfinished)
		row("asynq", joinCounts(b.Asynq))
	}
	if st := r.LongestRefusal; st != nil {
		limit := ""
		if st.Limit != "" {
			limit = ", limit " + st.Limit
		}
		row("longest refusal stretch", fmt.Sprintf("%s: %d stale-fence refusals over %s, no write accepted in between%s", st.Resource, st.Refusals, st.Duration, limit))
	}
	if f := r.Failover; f != nil {
		fmt.Fprintf(tw, "\nfailovers\n")
		row("acknowledged jobs", fmt.Sprintf("%d, lost %d (transfer applied anyway %d, never applied %d; ledger jobs of kept asynq tasks %d); re-submitted after the loss %d; attempts erased from histories %d",
			f.AcknowledgedJobs, f.LostJobs, f.LostApplied, f.LostNeverApplied, f.LedgerJobsLost, f.ResubmittedAfterLoss, f.AttemptsErased))
		row("lost, by the failover that lost them", fmt.Sprintf("%s; acknowledged before every loss window: %d", joinCounts(f.LostByKind), f.LostOutsideWindows))
		if f.Rewinds > 0 || f.LostJobs > 0 {
			row("ledger rewinds recorded", fmt.Sprintf("%d (acknowledged enqueues they counted lost: at least %d)", f.Rewinds, f.RewindLostEnqueues))
		}
		if f.LedgerEnqueued > 0 {
			row("ledger enqueued counter", fmt.Sprintf("%d (client was given %d jobs)", f.LedgerEnqueued, f.ClientJobs))
		}
		for i, fo := range f.Failovers {
			cost := ""
			if i < len(f.Costs) {
				c := f.Costs[i]
				cost = "; work stopped " + c.WorkStopped
				if c.SlowestAccount != "" {
					cost += fmt.Sprintf(", slowest account %s: %s (window %s; its transfers queued %d, applied after the window %d, never %d)",
						c.SlowestAccount, c.SlowestResumed, c.Window, c.SlowestQueued, c.SlowestAppliedLate, c.SlowestNeverRan)
				}
			}
			row(fmt.Sprintf("%d %s", i+1, fo.Kind), fmt.Sprintf("%s -> %s in %s (clock %s)%s", fo.From, fo.To, fo.Failover, fo.ClockOffset, cost))
		}
	}
	fmt.Fprintf(tw, "\nchecks\n")
	for _, c := range r.Checks {
		status := "ok"
		if !c.OK {
			status = fmt.Sprintf("VIOLATED (%d)", c.Violations)
			if r.Mode == modeBaseline || c.Finding {
				status = fmt.Sprintf("found %d", c.Violations)
			}
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", c.Name, status, c.Detail)
		for _, ex := range c.Examples {
			fmt.Fprintf(tw, "  \t\t- %s\n", ex)
		}
	}
	_ = tw.Flush()
	switch {
	case r.Mode == modeBaseline:
		fmt.Fprintf(out, "\nbaseline: %d findings (reported, not failed)\n", r.violationCount())
	case r.violationCount() == 0 && len(r.Findings) > 0:
		fmt.Fprintf(out, "\nresult: no violations; findings reported (see the checks marked found)\n")
	case r.violationCount() == 0:
		fmt.Fprintln(out, "\nresult: clean, no violations")
	default:
		fmt.Fprintf(out, "\nresult: %d VIOLATIONS\n", r.violationCount())
	}
	if r.Schema != "" || r.Dir != "" {
		fmt.Fprintf(out, "kept: schema %s, directory %s\n", r.Schema, r.Dir)
	}
}
