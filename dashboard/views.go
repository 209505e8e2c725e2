package dashboard

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/fencedq/fencedq/jobs"
)

// jobView is a job as the API shows it. It is built field by field from a
// jobs.Record so that the raw payload can never reach a response, whatever
// tags the Record carries. It names the attempt's tokens, never its owner
// (the worker id): the pair is the attempt's credential.
type jobView struct {
	ID          string     `json:"id"`
	Queue       string     `json:"queue"`
	Kind        string     `json:"kind"`
	OperationID string     `json:"operation_id"`
	Resource    string     `json:"resource,omitempty"`
	State       jobs.State `json:"state"`
	Token       string     `json:"token"`
	// Fence is the resource lease's token of the last attempt, when the job
	// leased a named resource (the token its side effects carried).
	Fence          string    `json:"fence,omitempty"`
	Deadline       time.Time `json:"deadline,omitzero"`
	Attempts       int       `json:"attempts"`
	MaxRetries     int       `json:"max_retries"`
	Runs           int       `json:"runs"`
	ReconcileTries int       `json:"reconcile_tries"`
	TimeoutMS      int64     `json:"timeout_ms,omitempty"`
	// Args are the redacted args, on the job's own page only; lists carry
	// ArgsPreview (the start of the args' JSON) and ArgsSize (its length
	// in bytes) instead.
	Args        json.RawMessage `json:"args,omitempty"`
	ArgsPreview string          `json:"args_preview,omitempty"`
	ArgsSize    int             `json:"args_size,omitempty"`
	// Headers are the job's headers (jobs.Header), as they are (headers
	// hold no secrets); like Args, lists carry none.
	Headers map[string]string `json:"headers,omitempty"`
	Error   string            `json:"error,omitempty"`
	Reason  string            `json:"reason,omitempty"`
	// CancelRequestedBy names the operator who asked to cancel the job while
	// it ran; its attempt is asked to stop and its outcome is still fenced.
	CancelRequestedBy string `json:"cancel_requested_by,omitempty"`
	// Bridge names the queue system that delivers a bridged job ("asynq",
	// through package asynqfence); empty for native jobs.
	Bridge string `json:"bridge,omitempty"`
	// UniqueKey and UniqueStates: a unique job's key and the states in
	// which it holds it (jobs.Unique); empty for other jobs.
	UniqueKey    string       `json:"unique_key,omitempty"`
	UniqueStates []jobs.State `json:"unique_states,omitempty"`
	// Limit, Rate: the job's concurrency limit and rate limit (jobs.Limiter,
	// jobs.RateLimiter) as text; WaitingFor: what a pending job held back by
	// one waits for.
	Limit string `json:"limit,omitempty"`
	Rate  string `json:"rate,omitempty"`
	// Group is the job's fair group (jobs.Grouper); a pending grouped job's
	// WaitingFor says how many of its group are ahead.
	Group          string    `json:"group,omitempty"`
	WaitingFor     string    `json:"waiting_for,omitempty"`
	Created        time.Time `json:"created,omitzero"`
	Updated        time.Time `json:"updated,omitzero"`
	RunAt          time.Time `json:"run_at,omitzero"`
	Started        time.Time `json:"started,omitzero"`
	Finished       time.Time `json:"finished,omitzero"`
	UncertainSince time.Time `json:"uncertain_since,omitzero"`
	// IndexAt is the job's time in its state's index, which lists sort
	// and filter on: pending: when due; running: the lease deadline;
	// uncertain: the resolver's next look; others: when the state was
	// entered. Only in lists.
	IndexAt time.Time `json:"index_at,omitzero"`
	// OverdueMS is how long ago the lease deadline passed (negative: how
	// soon it passes); only on stuck jobs.
	OverdueMS *int64 `json:"overdue_ms,omitempty"`
	// Progress is the latest progress an attempt reported (jobs.Progress),
	// on the job's own page.
	Progress *jobs.ProgressReport `json:"progress,omitempty"`
	// Output is what the successful attempt recorded (jobs.RecordOutput),
	// sensitive fields redacted.
	Output json.RawMessage `json:"output,omitempty"`
	// Workflow and Step name the workflow a step belongs to and its name.
	Workflow string `json:"workflow,omitempty"`
	Step     string `json:"step,omitempty"`
	// History is the job's latest history entries, when asked for.
	History []jobs.Entry `json:"history,omitempty"`
}

func viewOf(r *jobs.Record) *jobView {
	args := r.Args // the redacted form; never r.Payload
	if len(args) == 0 || !json.Valid(args) {
		b, _ := json.Marshal(string(args))
		args = b
	}
	v := &jobView{
		ID: r.ID, Queue: r.Queue, Kind: r.Kind, OperationID: r.OperationID, Resource: r.Shown(r.Resource),
		State: r.State, Deadline: r.Deadline, Attempts: r.Attempts,
		MaxRetries: r.MaxRetries, Runs: r.Runs, ReconcileTries: r.ReconcileTries,
		TimeoutMS: r.Timeout.Milliseconds(), Args: args, Headers: r.Headers, Error: r.Error, Reason: r.Reason, CancelRequestedBy: r.CancelledBy,
		Bridge: r.Bridge, UniqueKey: r.UniqueKey, UniqueStates: r.UniqueStates,
		Created: r.Created, Updated: r.Updated, RunAt: r.RunAt, Started: r.Started,
		Finished: r.Finished, UncertainSince: r.UncertainSince, Progress: r.Progress,
		Output: r.Output, Workflow: r.Workflow, Step: r.Step,
	}
	if r.LimitKey != "" {
		v.Limit = fmt.Sprintf("%s, at most %d at once", r.Shown(r.LimitKey), r.LimitMax)
	}
	if r.RateKey != "" {
		v.Rate = fmt.Sprintf("%s, at most %d starts per %v", r.Shown(r.RateKey), r.RateMax, r.RatePer)
	}
	// the resource, keys and group may be built from sensitive values:
	// shown as the args are
	v.WaitingFor = r.Shown(r.WaitingFor)
	v.Group = r.Shown(r.Group)
	if r.Token > 0 {
		v.Token = r.Token.String()
	}
	if r.Fence > 0 {
		v.Fence = r.Fence.String()
	}
	return v
}

// attempt is one attempt assembled from a job's history: its claim, its
// end, and any write of it that was fenced off.
type attempt struct {
	Attempt int    `json:"attempt"`
	Token   string `json:"token"`
	// Fence is the resource lease's token, when the attempt leased a named
	// resource.
	Fence   string    `json:"fence,omitempty"`
	Started time.Time `json:"started,omitzero"`
	Ended   time.Time `json:"ended,omitzero"`
	// Outcome is the state the attempt's commit reached (succeeded, pending
	// for a retry, dead, uncertain, cancelled), "running" while none was
	// recorded, or
	// "fenced" when its commit was rejected for a stale token.
	Outcome string `json:"outcome"`
	Error   string `json:"error,omitempty"`
	Reason  string `json:"reason,omitempty"`
	// Fenced lists this attempt's writes rejected after a newer token took
	// over (stage and the outcome it wanted).
	Fenced []fencedWrite `json:"fenced,omitempty"`
}

type fencedWrite struct {
	At      time.Time `json:"at"`
	Stage   string    `json:"stage"`
	Outcome string    `json:"outcome,omitempty"`
	Error   string    `json:"error,omitempty"`
}

// attemptsOf pairs history entries into attempts, oldest first. Entries are
// matched by token; an end without a known claim (the history is capped)
// still gets its own attempt.
func attemptsOf(history []jobs.Entry) []*attempt {
	var out []*attempt
	byToken := map[string]*attempt{}
	get := func(e jobs.Entry) *attempt {
		if a, ok := byToken[e.Token]; ok && e.Token != "" {
			return a
		}
		a := &attempt{Attempt: e.Attempt, Token: e.Token, Outcome: "running"}
		out = append(out, a)
		if e.Token != "" {
			byToken[e.Token] = a
		}
		return a
	}
	for _, e := range history {
		switch e.Event {
		case "attempt":
			a := get(e)
			a.Attempt, a.Started = e.Attempt, e.At
			if e.Fence != "" {
				a.Fence = e.Fence
			}
		case "end":
			a := get(e)
			if a.Attempt == 0 {
				a.Attempt = e.Attempt
			}
			a.Ended, a.Outcome, a.Error, a.Reason = e.At, e.Outcome, e.Error, e.Reason
			if e.Fence != "" {
				a.Fence = e.Fence
			}
		case "fenced":
			a := get(e)
			if a.Outcome == "running" && a.Started.IsZero() {
				a.Outcome = "fenced"
			}
			a.Fenced = append(a.Fenced, fencedWrite{At: e.At, Stage: e.Stage, Outcome: e.Outcome, Error: e.Error})
		}
	}
	return out
}

// decisionsFor lists what an operator may decide for a job in state s
// (mirroring jobs.Client.Resolve).
func decisionsFor(s jobs.State) []jobs.Decision {
	switch s {
	case jobs.Review, jobs.Uncertain:
		return []jobs.Decision{jobs.DecideSucceeded, jobs.DecideRerun, jobs.DecideDead}
	case jobs.Dead, jobs.Cancelled:
		return []jobs.Decision{jobs.DecideRerun}
	}
	return nil
}

// eventView is one entry of a queue's event feed.
type eventView struct {
	Queue   string    `json:"queue"`
	Type    string    `json:"type"` // deduplicated, fenced, cancel, run_now, resolve, pause or resume
	Stage   string    `json:"stage,omitempty"`
	At      time.Time `json:"at"`
	Job     string    `json:"job,omitempty"`
	Op      string    `json:"op,omitempty"`
	Token   string    `json:"token,omitempty"`
	Current string    `json:"current,omitempty"`
	Actor   string    `json:"actor,omitempty"`
	Note    string    `json:"note,omitempty"`
	// Decision is an operator's resolution (type resolve).
	Decision string `json:"decision,omitempty"`
}
