package maintenance

import (
	"context"
	"crypto/rand"
	"slices"
	"strconv"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/lease"
)

// handover counts workflows started and finished, and delivers the
// workflow hand-over records left in the queues (a
// completer that crashed or failed between a step's completion and the
// move, a Redis restart in between). Each pass first finds the queues
// holding any workflow key it reads (Ledger.WorkflowQueues: one pipelined
// EXISTS per queue), then reads only those: an idle queue costs one
// command per pass. Delivery is
// idempotent (see ARCHITECTURE.md, "Workflows"), so it needs no leader
// token: a deposed leader or a completer moving the same record at the
// same time changes nothing twice.
type handover struct {
	service
	interval time.Duration
	// grace is how long a workflow's steps of other queues wait for its
	// home commit before they are cancelled (ledger.AbandonUncommitted).
	grace time.Duration
	// now reads the clock grace is measured by: the namespace's time
	// (Ledger.ReadTime), which a workflow's parts are scored by.
	now func(context.Context) (time.Time, error)
	// fullAt is when the last pass read every open workflow (zero: none
	// yet); the passes in between read only the workflows the scripts
	// noted changed (Ledger.ChangedWorkflows).
	fullAt time.Time
	// retry holds the changed workflows whose read failed, for the next
	// pass, each with the mark of its failed SettleWorkflow call: the
	// next call reports what that one wrote (a reply lost, a write too few
	// replicas acknowledged). Every one is kept: a call made with another
	// mark would count nothing for it. It holds at most the workflows of
	// one pass, which the pass held already (during an outage the passes
	// read no new ones).
	retry map[ledger.WorkflowRef]string
	// marks are the SettleWorkflow calls' marks: a random base unique to
	// the process, then a sequence number.
	markBase string
	marks    uint64
}

// mark returns a SettleWorkflow mark no other call has.
func (h *handover) mark() string {
	if h.markBase == "" {
		h.markBase = rand.Text()
	}
	h.marks++
	return h.markBase + "." + strconv.FormatUint(h.marks, 36)
}

// fullEvery is how often a pass reads every open workflow, not only those
// the scripts noted changed: the safety net for changes no script notes
// (a step's job deleted by hand, a note lost with a failover).
const fullEvery = time.Minute

func (h *handover) runOnce(ctx context.Context, _ lease.Token) error {
	all, err := h.ledger.Queues(ctx)
	if err != nil {
		return err
	}
	qs, err := h.ledger.WorkflowQueues(ctx, all)
	if err != nil {
		return err
	}
	for r := range h.retry { // settled by a failed call, it may have left every set
		if !slices.Contains(qs, r.Home) {
			qs = append(qs, r.Home)
		}
	}
	if len(qs) == 0 {
		return nil
	}
	h.abandonUncommitted(ctx, qs)
	h.countWorkflows(ctx, qs)
	busy, err := h.ledger.HandoverQueues(ctx, qs)
	if err != nil {
		return err
	}
	for _, q := range busy {
		n, err := h.ledger.MoveHandovers(ctx, q)
		if err != nil {
			h.failed(ctx, "moving workflow hand-overs failed", "queue", q, "error", err)
			continue
		}
		if n > 0 {
			h.log.Info("moved workflow hand-overs a completer left", "queue", q, "records", n)
		}
	}
	return nil
}

// countWorkflows counts the workflows started and finished since the last
// pass (fencedq_workflows_started_total, _finished_total), and ends lost
// the steps of open workflows whose job record is gone (logged at error
// level, fencedq_workflow_steps_lost_total; their dependents hear of it
// through the hand-over records this same pass moves). A pass reads the
// workflows the scripts noted changed (a step ended or re-run, a workflow
// committed, cancelled, reopened or abandoned): a queue of idle open
// workflows costs one command. Every fullEvery, and on a leader's first
// pass, it reads every open workflow, each once.
func (h *handover) countWorkflows(ctx context.Context, qs []string) {
	changed, err := h.ledger.ChangedWorkflows(ctx, qs)
	if err != nil {
		h.failed(ctx, "reading changed workflows failed", "error", err)
	}
	todo := make([]ledger.WorkflowRef, 0, len(changed)+len(h.retry))
	marks := make(map[ledger.WorkflowRef]string, len(changed)+len(h.retry))
	add := func(r ledger.WorkflowRef, mark string) { // mark "": a new one
		r.Created = 0
		if marks[r] == "" {
			if mark == "" {
				mark = h.mark()
			}
			marks[r] = mark
			todo = append(todo, r)
		}
	}
	for r, mark := range h.retry {
		add(r, mark)
	}
	for _, r := range changed {
		add(r, "")
	}
	if now := time.Now(); h.fullAt.IsZero() || now.Sub(h.fullAt) >= fullEvery || err != nil {
		open, oerr := h.ledger.OpenWorkflows(ctx, qs)
		if oerr != nil {
			h.failed(ctx, "reading open workflows failed", "error", oerr)
		} else if err == nil {
			h.fullAt = now
		}
		for i, q := range qs {
			for _, id := range open[i] {
				add(ledger.WorkflowRef{Home: q, ID: id}, "")
			}
		}
	}
	h.retry = nil
	h.settle(ctx, todo, marks)
}

// settle settles each of todo with its mark (SettleWorkflow), and counts
// and logs what the call reports. A workflow whose call failed is kept
// in retry with its mark: the next call reports what this one wrote.
func (h *handover) settle(ctx context.Context, todo []ledger.WorkflowRef, marks map[ledger.WorkflowRef]string) {
	for _, r := range todo {
		started, outcome, lost, err := h.ledger.SettleWorkflow(ctx, r.Home, r.ID, marks[r])
		if err != nil { // the retry, with the same mark, reports what this call wrote
			h.failed(ctx, "reading a workflow failed", "queue", r.Home, "workflow", r.ID, "error", err)
			if h.retry == nil {
				h.retry = map[ledger.WorkflowRef]string{}
			}
			h.retry[r] = marks[r]
			continue
		}
		for _, s := range lost {
			h.metrics.WorkflowStepsLost.WithLabelValues(ledger.Logical(r.Home)).Inc()
			h.log.Error("ended a workflow step lost: its job record is missing", "queue", r.Home, "workflow", r.ID,
				"step", s.Name, "step_queue", s.Queue, "job_id", s.ID, "reason", ledger.LostReason)
		}
		if started {
			h.metrics.WorkflowsStarted.WithLabelValues(ledger.Logical(r.Home)).Inc()
		}
		if outcome != "" {
			h.metrics.WorkflowsFinished.WithLabelValues(ledger.Logical(r.Home), outcome).Inc()
			h.log.Info("workflow finished", "queue", r.Home, "workflow", r.ID, "outcome", outcome)
		}
	}
}

// settleOwed settles, when this pool's leadership ended, the workflows
// whose call failed in one of its passes (retry): such a call may have
// written the workflow's marks, and another leader, reading marks not its
// own, counts nothing for them, so only this pool can count them. Its
// calls are unfenced like the passes' (SettleWorkflow is idempotent, each
// outcome counted by the call whose mark it holds); ctx bounds them. What
// still fails waits in retry for this pool's next leadership.
func (h *handover) settleOwed(ctx context.Context) {
	if len(h.retry) == 0 {
		return
	}
	todo := make([]ledger.WorkflowRef, 0, len(h.retry))
	marks := h.retry
	for r := range marks {
		todo = append(todo, r)
	}
	h.retry = nil
	h.settle(ctx, todo, marks)
	if n := len(h.retry); n > 0 {
		h.log.Warn("workflow counts this pool owes could not be settled after its leadership ended: they are counted if it leads again",
			"workflows", n)
	}
}

// owedTimeout bounds settleOwed when a leadership ends.
const owedTimeout = 5 * time.Second

// abandonUncommitted cancels the steps of workflows whose enqueue wrote
// them in other queues but never committed the workflow, grace ago or
// more, and records each workflow cancelled (counted finished by
// countWorkflows).
func (h *handover) abandonUncommitted(ctx context.Context, qs []string) {
	now, err := h.now(ctx)
	if err != nil {
		h.failed(ctx, "abandoning workflows never committed failed", "error", err)
		return
	}
	ids, err := h.ledger.AbandonUncommitted(ctx, qs, now.Add(-h.grace))
	if err != nil {
		h.failed(ctx, "abandoning workflows never committed failed", "error", err)
	}
	for _, id := range ids {
		h.log.Warn("cancelled the steps of a workflow its enqueue never committed", "workflow", id, "grace", h.grace)
	}
}
