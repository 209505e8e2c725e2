package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/fencedq/fencedq/internal/cli"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
)

// The demo's checks, by name: one per staged failure, then the global ones.
const (
	checkPaused     = "paused_worker"
	checkLateAnswer = "late_answer"
	checkCrash      = "crash_after_effect"
	checkStray      = "stray_due_entry"
	checkDuplicates = "duplicate_submissions"
	checkLost       = "no_job_lost"
	checkMoney      = "money_conserved"
	checkOnce       = "exactly_once"
)

// Results of a check.
const (
	resultPass   = "pass"
	resultFail   = "fail"
	resultNotRun = "not_run" // the stage was not staged (the run ended first); not a failure
)

// verdict judges one staged failure or one global check.
type verdict struct {
	// Check names it (paused_worker, late_answer, crash_after_effect,
	// stray_due_entry, duplicate_submissions, no_job_lost,
	// money_conserved, exactly_once).
	Check string `json:"check"`
	// JobID is the staged job, when the check is about one.
	JobID string `json:"job_id,omitempty"`
	// Happened is what the ledger and the store show.
	Happened string `json:"happened"`
	// Required is what had to happen.
	Required string `json:"required"`
	// Result is pass, fail or not_run.
	Result string `json:"result"`
}

// failed counts the failed verdicts.
func (s *summary) failed() int {
	n := 0
	for _, v := range s.Verdicts {
		if v.Result == resultFail {
			n++
		}
	}
	return n
}

// stagedJob is the job a stage enqueued.
type stagedJob struct{ queue, id, op string }

// strayResult is what the stray due-entry stage saw.
type strayResult struct {
	id       string
	attempts int
	token    lease.Token
	dropped  bool         // deduplicated_execute went up
	after    *jobs.Record // the job after the drop
}

func passIf(ok bool) string {
	if ok {
		return resultPass
	}
	return resultFail
}

// evidence is what the ledger and the store say about a staged job.
type evidence struct {
	rec      *jobs.Record
	applied  bool
	tokens   []string // attempt tokens, in order
	fenced   []string // stages of the fenced rejections in its history
	wentUnc  bool     // an attempt ended uncertain (or its lease expired)
	resolved string   // the reconciler's or an operator's last decision
	// before lists how each attempt before the one that went uncertain
	// ended (a busy account defers a transfer to a new attempt, applying
	// nothing); after counts the attempts started after it.
	before []string
	after  int
}

// reconciledOnce reports whether the job went uncertain, was marked
// succeeded from its recorded effect and never ran again after that.
func (e *evidence) reconciledOnce() bool {
	return e.rec.State == jobs.Succeeded && e.applied && e.wentUnc && e.after == 0
}

func (d *demo) evidence(ctx context.Context, j stagedJob) (*evidence, error) {
	l := d.client.Inspector()
	rec, err := l.Get(ctx, j.queue, j.id)
	if err != nil {
		return nil, err
	}
	hist, err := l.History(ctx, j.queue, j.id)
	if err != nil {
		return nil, err
	}
	_, applied, err := d.store.Applied(ctx, rec.OperationID)
	if err != nil {
		return nil, err
	}
	e := &evidence{rec: rec, applied: applied}
	for _, h := range hist {
		switch h.Event {
		case "attempt":
			e.tokens = append(e.tokens, h.Token)
			if e.wentUnc {
				e.after++
			}
		case "fenced":
			e.fenced = append(e.fenced, h.Stage)
		case "end":
			switch {
			case h.Outcome == string(jobs.Uncertain):
				e.wentUnc = true
			case !e.wentUnc:
				e.before = append(e.before, h.Outcome)
			}
		case "resolve":
			e.resolved = h.Decision
			if h.From == string(jobs.Uncertain) {
				e.wentUnc = true
			}
		}
	}
	return e, nil
}

// describe says in one line what happened to a staged job.
func (e *evidence) describe() string {
	r := e.rec
	var b strings.Builder
	fmt.Fprintf(&b, "%s after %d attempt(s)", r.State, r.Attempts)
	if len(e.tokens) > 0 {
		fmt.Fprintf(&b, " (tokens %s)", strings.Join(e.tokens, ", "))
	}
	if len(e.before) > 0 {
		fmt.Fprintf(&b, "; before it, attempts ended %s", strings.Join(e.before, ", "))
	}
	if e.wentUnc {
		b.WriteString("; an attempt ended uncertain")
		if e.after > 0 {
			fmt.Fprintf(&b, ", and %d attempt(s) started after it", e.after)
		}
	}
	if e.resolved != "" {
		fmt.Fprintf(&b, "; resolved %s", e.resolved)
	}
	if len(e.fenced) > 0 {
		fmt.Fprintf(&b, "; %d stale write(s) fenced out (%s)", len(e.fenced), strings.Join(e.fenced, ", "))
	} else {
		b.WriteString("; no fenced write")
	}
	if e.applied {
		b.WriteString("; the store recorded its transfer")
	} else {
		b.WriteString("; the store has no record of its transfer")
	}
	return b.String()
}

// verdicts judges every staged failure and the global checks.
func (d *demo) verdicts(ctx context.Context, s *summary, st map[string]int64) ([]verdict, error) {
	d.mu.Lock()
	staged := make(map[string]stagedJob, len(d.staged))
	for k, v := range d.staged {
		staged[k] = v
	}
	var stray *strayResult
	if d.stray != nil {
		c := *d.stray
		stray = &c
	}
	repeated, distinctOps := d.submissions-len(d.ops), len(d.ops)
	d.mu.Unlock()

	var out []verdict
	judge := func(check, required string, pass func(*evidence) bool) error {
		v := verdict{Check: check, Required: required}
		j, ok := staged[check]
		if !ok {
			v.Happened, v.Result = "not staged: the run ended before this stage", resultNotRun
			out = append(out, v)
			return nil
		}
		v.JobID = j.id
		e, err := d.evidence(ctx, j)
		switch {
		case errors.Is(err, jobs.ErrNotFound):
			v.Happened, v.Result = "the job is gone from the ledger", resultFail
		case err != nil:
			return err
		default:
			v.Happened, v.Result = e.describe(), passIf(pass(e))
		}
		out = append(out, v)
		return nil
	}
	if err := judge(checkPaused,
		"the paused attempt's late write is fenced out; the job succeeds under a newer token; its transfer is applied once",
		func(e *evidence) bool {
			return e.rec.State == jobs.Succeeded && e.applied && len(e.tokens) >= 2 && len(e.fenced) >= 1
		}); err != nil {
		return nil, err
	}
	if err := judge(checkLateAnswer,
		"the attempt ends uncertain (a timeout does not prove failure); the reconciler finds the effect and marks the job succeeded without another attempt",
		(*evidence).reconciledOnce); err != nil {
		return nil, err
	}
	if err := judge(checkCrash,
		"the killed attempt's lease expires and the job goes uncertain; the effect log shows the transfer, so the job is marked succeeded without another attempt",
		(*evidence).reconciledOnce); err != nil {
		return nil, err
	}

	sv := verdict{Check: checkStray, Required: "the next claim drops the stray entry (deduplicated_execute +1) without running the handler: the job stays succeeded with the same attempts and token"}
	switch {
	case stray == nil:
		sv.Happened, sv.Result = "not staged: the run ended before this stage, or no transfer had succeeded yet", resultNotRun
	case !stray.dropped:
		sv.JobID, sv.Happened, sv.Result = stray.id, fmt.Sprintf("the stray entry was not dropped within %v", strayWait), resultFail
	default:
		sv.JobID = stray.id
		a := stray.after
		ok := a != nil && a.State == jobs.Succeeded && a.Attempts == stray.attempts && a.Token == stray.token
		if a != nil {
			sv.Happened = fmt.Sprintf("dropped; the job is %s after %d attempt(s) with token %d (before: %d attempt(s), token %d)",
				a.State, a.Attempts, a.Token, stray.attempts, stray.token)
		} else {
			sv.Happened = "dropped, but the job could not be read afterwards"
		}
		sv.Result = passIf(ok)
	}
	out = append(out, sv)

	dv := verdict{Check: checkDuplicates,
		Required: "every submission that repeats an operation id returns the existing job: one job per operation id"}
	if repeated == 0 {
		dv.Happened, dv.Result = "no submission repeated an operation id", resultNotRun
	} else {
		dv.Happened = fmt.Sprintf("%d submission(s) of %d operation id(s), %d of them repeats; %d job(s); deduplicated at enqueue %d time(s)",
			s.Submissions, distinctOps, repeated, s.Enqueued, st["deduplicated_enqueue"])
		dv.Result = passIf(s.Enqueued == distinctOps && st["deduplicated_enqueue"] >= int64(repeated))
	}
	out = append(out, dv)

	out = append(out,
		verdict{Check: checkLost, Required: "every enqueued job is in the ledger, and none succeeded without its effect",
			Happened: fmt.Sprintf("%d lost", s.Lost), Result: passIf(s.Lost == 0)},
		verdict{Check: checkMoney, Required: "the sum of the balances is what it was",
			Happened: map[bool]string{true: "the sum is unchanged", false: "the sum changed"}[s.MoneyConserved], Result: passIf(s.MoneyConserved)},
		verdict{Check: checkOnce, Required: "each balance is what applying every recorded transfer exactly once gives, and no dead job has an effect",
			Happened: fmt.Sprintf("balances match: %v%s; dead jobs with an effect: %d", s.ExactlyOnce, diffText(s.BalanceDiffs), s.AppliedButDead), Result: passIf(s.ExactlyOnce)},
	)
	return out, nil
}

// printVerdicts prints each verdict: result, check, what happened and what
// had to.
func printVerdicts(w io.Writer, vs []verdict) {
	fmt.Fprintln(w, "\nverdicts")
	failed := 0
	for _, v := range vs {
		label := map[string]string{resultPass: "PASS", resultFail: "FAIL", resultNotRun: "NOT RUN"}[v.Result]
		if v.Result == resultFail {
			failed++
		}
		job := ""
		if v.JobID != "" {
			job = " (job " + v.JobID + ")"
		}
		fmt.Fprint(w, cli.Escapef("  %-7s %s%s\n", label, strings.ReplaceAll(v.Check, "_", " "), job))
		fmt.Fprint(w, cli.Escapef("          happened: %s\n", v.Happened))
		fmt.Fprint(w, cli.Escapef("          required: %s\n", v.Required))
	}
	if failed == 0 {
		fmt.Fprintf(w, "every check passed (%d)\n", len(vs))
	} else {
		fmt.Fprintf(w, "%d of %d checks FAILED\n", failed, len(vs))
	}
}

// diffText shows the first accounts whose balance differs, if any.
func diffText(diffs []string) string {
	if len(diffs) == 0 {
		return ""
	}
	if len(diffs) > 3 {
		return fmt.Sprintf(" (%s and %d more)", strings.Join(diffs[:3], "; "), len(diffs)-3)
	}
	return " (" + strings.Join(diffs, "; ") + ")"
}
