package workflow

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/fencedq/fencedq/internal/clientledger"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
)

// The states of a workflow (Status.State), derived from its steps'.
const (
	// Running: some step is not final yet.
	Running = ledger.WorkflowRunning
	// Succeeded: every step succeeded.
	Succeeded = ledger.WorkflowSucceeded
	// Failed: every step is final and some did not succeed.
	Failed = ledger.WorkflowFailed
	// Cancelled: an operator cancelled it and every step is final.
	Cancelled = ledger.WorkflowCancelled
)

// StepLost is the state of a step whose job record went missing while its
// workflow ran (Step.State): the maintenance leader ended it dead, with
// reason "job record missing".
const StepLost = jobs.State(ledger.StepLost)

// StepUnreachable is the state of a step whose job could not be read (on
// Redis Cluster, its master down; Step.State): it counts, in Done and the
// workflow's State, as the end the maintenance leader recorded for it when
// it recorded one, else as not final.
const StepUnreachable = jobs.State(ledger.StepUnreachable)

// Status is a workflow as read now.
type Status struct {
	// ID is the workflow's id.
	ID string `json:"id"`
	// Name is the name given to New.
	Name string `json:"name,omitempty"`
	// Home is the queue holding the workflow's record (its first step's).
	Home string `json:"home"`
	// OperationID deduplicates the workflow ("" when none was given).
	OperationID string `json:"operation_id,omitempty"`
	// State is Running, Succeeded, Failed or Cancelled.
	State string `json:"state"`
	Done  int    `json:"done"`  // steps in a final state
	Total int    `json:"total"` // steps
	// Created is when the workflow was enqueued.
	Created time.Time `json:"created"`
	// CancelledBy is the operator who cancelled it ("" unless cancelled).
	CancelledBy string `json:"cancelled_by,omitempty"`
	// Steps are its steps, in definition order.
	Steps []Step `json:"steps"`
}

// Step is one step of a Status, in definition order.
type Step struct {
	// Name is the step's name in the workflow.
	Name string `json:"name"`
	// Queue is the queue of the step's job.
	Queue string `json:"queue"`
	// JobID is the id of the step's job.
	JobID string `json:"job_id"`
	// Kind is the kind of the step's job.
	Kind string `json:"kind"`
	// Deps are the steps it runs after (After).
	Deps []string `json:"deps,omitempty"`
	// AllowFail are those of Deps whose failure does not cancel it
	// (AllowFailure).
	AllowFail []string `json:"allow_fail,omitempty"`
	// State is the step's job state: "waiting" until its dependencies
	// succeeded, then a job's states; "missing" when the job expired
	// (the workflow's State counts it as the end the maintenance leader
	// recorded for it); StepLost ("lost") when its job record went
	// missing while the workflow ran (deleted by hand, or lost with a
	// Redis that came back with older data): the maintenance leader ended
	// it dead for its dependents and the workflow, Reason "job record
	// missing"; StepUnreachable ("unreachable") when its job could not be
	// read.
	State jobs.State `json:"state"`
	// Token is the fencing token of the job's latest attempt.
	Token lease.Token `json:"token,string"`
	// Attempts is how many attempts the job had.
	Attempts int `json:"attempts"`
	// Reason is the job record's last reason (why it is in its state,
	// e.g. "dependency charge ended dead").
	Reason string `json:"reason,omitempty"`
	// Output is the step's output, sensitive fields redacted; left out by
	// List, which shows progress (Get shows it).
	Output json.RawMessage `json:"output,omitempty"`
}

// Get reads workflow id: its record and each step's job. A queue that
// could not be read (on Redis Cluster, its master down) does not hide a
// workflow whose home another holds; found in none of those read, the
// error is a *jobs.PartialError naming them, not ErrNotFound. Steps whose
// jobs could not be read are StepUnreachable, and the workflow is
// returned with a *jobs.PartialError naming their queues.
func Get(ctx context.Context, c *jobs.Client, id string) (*Status, error) {
	return find(ctx, c, id, true)
}

// find is Get, reading the steps' outputs with outputs.
func find(ctx context.Context, c *jobs.Client, id string, outputs bool) (*Status, error) {
	l, err := clientledger.Of(c)
	if l == nil {
		return nil, fmt.Errorf("%w: workflow.Get needs a *jobs.Client", jobs.ErrInvalid)
	}
	if err != nil {
		return nil, err
	}
	home, err := l.FindWorkflow(ctx, id)
	switch {
	case home != "":
		return get(ctx, l, home, id, outputs)
	case err != nil:
		return nil, err
	}
	return nil, fmt.Errorf("%w: %q", ErrNotFound, ledger.Clip(id))
}

// get reads workflow id of home queue home, its steps' outputs with
// outputs.
func get(ctx context.Context, l *ledger.Ledger, home, id string, outputs bool) (*Status, error) {
	info, err := l.Workflow(ctx, home, id)
	if err != nil {
		return nil, err
	}
	if info == nil {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, ledger.Clip(id))
	}
	def, err := info.Def()
	if err != nil {
		return nil, err
	}
	st := &Status{ID: id, Name: def.Name, Home: home, OperationID: info.OperationID, Total: len(def.Steps),
		Created: time.UnixMilli(info.Created), CancelledBy: info.CancelledBy}
	refs := make([]ledger.StepRef, len(def.Steps))
	for i, d := range def.Steps {
		refs[i] = ledger.StepRef{Queue: d.Queue, ID: d.ID}
	}
	recs, perr := l.Steps(ctx, refs, outputs)
	var missed ledger.Partial
	if !missed.Add(perr) {
		return nil, perr
	}
	var states []jobs.State
	for i, d := range def.Steps {
		s := Step{Name: d.Name, Queue: d.Queue, JobID: d.ID, Kind: d.Kind, Deps: d.Deps, AllowFail: d.AllowFail}
		if r := recs[i]; r == nil && missed.Missed(d.Queue) {
			s.State = StepUnreachable
		} else if r == nil {
			s.State = "missing"
			if why, ok := info.Lost[d.Name]; ok {
				s.State, s.Reason = StepLost, why
			}
		} else {
			s.State, s.Token, s.Attempts, s.Reason, s.Output = r.State, r.Token, r.Attempts, r.Reason, r.Output
		}
		state := s.State
		if state == StepLost {
			state = "missing" // counts as the end recorded for it: dead
		}
		// an expired step, or one not read, counts as it ended when its end
		// was recorded
		state = info.StepState(d.Name, state)
		if state.Final() || state == "missing" {
			st.Done++
		}
		states = append(states, state)
		st.Steps = append(st.Steps, s)
	}
	st.State = ledger.WorkflowOutcome(states, st.CancelledBy)
	return st, missed.Err()
}

// List returns up to n workflows (at most 1000), newest first, skipping
// offset (offset+n at most jobs.MaxListWindow; jobs.ErrInvalid otherwise).
// It reads the ids of the newest offset+n of every queue (one pipelined
// round trip), then the record and every step's job of the n it returns
// only: the steps' states, not their outputs (up to jobs.MaxOutput each;
// Get reads them), so a page of large workflows carries what it shows.
// When some queues could not be read (on Redis Cluster, their master
// down), it lists the workflows of the others, a step whose job it could
// not read StepUnreachable (as Get), with a *jobs.PartialError naming
// them.
func List(ctx context.Context, c *jobs.Client, offset, n int) ([]*Status, error) {
	l, err := clientledger.Of(c)
	if l == nil {
		return nil, fmt.Errorf("%w: workflow.List needs a *jobs.Client", jobs.ErrInvalid)
	}
	if err != nil {
		return nil, err
	}
	if offset < 0 || n <= 0 || n > 1000 || offset > jobs.MaxListWindow-n {
		return nil, fmt.Errorf("%w: list workflows: offset ≥ 0, 1 ≤ n ≤ 1000 and offset+n ≤ %d", jobs.ErrInvalid, jobs.MaxListWindow)
	}
	qs, err := l.Queues(ctx)
	if err != nil {
		return nil, err
	}
	// the ids first: only the n workflows listed have their steps read
	refs, err := l.NewestWorkflows(ctx, qs, offset+n)
	var missed ledger.Partial
	if !missed.Add(err) || offset >= len(refs) {
		return nil, err
	}
	var out []*Status
	for _, ref := range refs[offset:] {
		st, err := get(ctx, l, ref.Home, ref.ID, false)
		if errors.Is(err, ErrNotFound) {
			continue // pruned since
		}
		if !missed.Add(err) {
			return nil, err
		}
		out = append(out, st)
	}
	return out, missed.Err()
}

// Count returns how many workflows are kept (enqueued and not yet pruned,
// see jobs.Config.Retention): what List pages through. It reads one
// number per queue (one pipelined round trip), no workflow. When some
// queues could not be read (on Redis Cluster, their master down), it
// returns the others' count with a *jobs.PartialError naming them.
func Count(ctx context.Context, c *jobs.Client) (int, error) {
	l, err := clientledger.Of(c)
	if l == nil {
		return 0, fmt.Errorf("%w: workflow.Count needs a *jobs.Client", jobs.ErrInvalid)
	}
	if err != nil {
		return 0, err
	}
	qs, err := l.Queues(ctx)
	if err != nil {
		return 0, err
	}
	return l.CountWorkflows(ctx, qs)
}

// Cancel cancels workflow id on behalf of actor (an operator, with a
// note): every step waiting or pending is cancelled, every running one is
// asked to stop (its handler's context is cancelled at the next renewal;
// its outcome is still committed by its token, and a retry then ends
// cancelled), and finished steps stay as they are. Once a step was
// cancelled with its workflow, it never starts again: a step uncertain or
// in review stays so until it is reconciled (found applied it succeeded;
// found not applied, by the reconciler or an operator's re-run, it ends
// cancelled), and an operator's re-run of a finished step fails with an
// error matching jobs.ErrWrongState. Cancelling again goes over the steps
// again (completing a Cancel that stopped midway) and keeps the first
// operator as CancelledBy. A workflow that finished (succeeded or failed)
// is over: cancelling it fails with jobs.ErrWrongState and leaves it as it
// is (a failed one's steps can still be re-run). A workflow some of whose
// steps could not be read (on Redis Cluster, their master down) is not
// cancelled: the error is the *jobs.PartialError naming their queues. An
// actor or note the client refuses
// fails with jobs.ErrInvalid before anything is written. It returns the
// workflow as it is afterwards. In durable mode (jobs.Config.Durability)
// its writes wait for replicas: when too few acknowledge one in time, the
// cancel still goes over every step, then fails with an error matching
// jobs.ErrActionUnknown (it applied on the primary and may be lost in a
// failover: cancel again once the replicas are back).
func Cancel(ctx context.Context, c *jobs.Client, id, actor, note string) (*Status, error) {
	// the steps' states say what to cancel; their outputs are read once,
	// for the status returned
	st, err := find(ctx, c, id, false)
	if err != nil {
		return nil, err
	}
	who, err := clientledger.Operator(c, st.Home, actor, note)
	if err != nil {
		return nil, err
	}
	if st.State == Succeeded || st.State == Failed {
		return nil, fmt.Errorf("%w: workflow %s %s", jobs.ErrWrongState, id, st.State)
	}
	l, _ := clientledger.Of(c) // Get checked c
	// unacked is the first write too few replicas acknowledged (durable
	// mode): the cancel goes on over every step, then reports it
	var unacked error
	switch err := l.MarkWorkflowCancelled(ctx, st.Home, id, who); {
	case errors.Is(err, ledger.ErrNotFound): // pruned since it was read
		return nil, fmt.Errorf("%w: %q", ErrNotFound, ledger.Clip(id))
	case errors.Is(err, jobs.ErrActionUnknown):
		unacked = err
	case err != nil:
		return nil, err
	}
	// dependents first, so each step's reason names the operator rather
	// than a dependency cancelled a moment earlier; each step is marked in
	// the call that cancels it, so a dependency ending meanwhile never
	// promotes a step already reached
	for _, i := range dependentsFirst(st.Steps) {
		s := st.Steps[i]
		if s.State == "missing" || s.State == StepLost {
			continue
		}
		_, err := l.CancelStep(ctx, s.Queue, s.JobID, who, note)
		switch {
		case errors.Is(err, jobs.ErrActionUnknown):
			unacked = cmp.Or(unacked, err)
		case err != nil && !errors.Is(err, jobs.ErrWrongState) && !errors.Is(err, jobs.ErrNotFound):
			return nil, err
		}
	}
	if unacked != nil {
		return nil, unacked
	}
	return get(ctx, l, st.Home, id, true)
}

// dependentsFirst orders the indexes of steps so that every step comes
// before the steps it depends on (the graph has no cycle: Enqueue checked).
func dependentsFirst(steps []Step) []int {
	index := make(map[string]int, len(steps))
	for i, s := range steps {
		index[s.Name] = i
	}
	// dependents counts, per step, the steps depending on it not yet placed
	dependents := make([]int, len(steps))
	for _, s := range steps {
		for _, d := range s.Deps {
			if k, ok := index[d]; ok {
				dependents[k]++
			}
		}
	}
	var ready, order []int
	for i := len(steps) - 1; i >= 0; i-- {
		if dependents[i] == 0 {
			ready = append(ready, i)
		}
	}
	placed := make([]bool, len(steps))
	for len(ready) > 0 {
		i := ready[0]
		ready = ready[1:]
		order = append(order, i)
		placed[i] = true
		for _, d := range steps[i].Deps {
			k, ok := index[d]
			if !ok {
				continue
			}
			if dependents[k]--; dependents[k] == 0 {
				ready = append(ready, k)
			}
		}
	}
	for i := len(steps) - 1; i >= 0; i-- { // a record read otherwise: the rest, last first
		if !placed[i] {
			order = append(order, i)
		}
	}
	return order
}
