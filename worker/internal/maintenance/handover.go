package maintenance

import (
	"context"
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
}

func (h *handover) runOnce(ctx context.Context, _ lease.Token) error {
	all, err := h.ledger.Queues(ctx)
	if err != nil {
		return err
	}
	qs, err := h.ledger.WorkflowQueues(ctx, all)
	if err != nil || len(qs) == 0 {
		return err
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
// pass (fencedq_workflows_started_total, _finished_total): each open
// workflow's steps are read once per pass until it is final.
func (h *handover) countWorkflows(ctx context.Context, qs []string) {
	open, err := h.ledger.OpenWorkflows(ctx, qs)
	if err != nil {
		h.failed(ctx, "reading open workflows failed", "error", err)
	}
	for i, q := range qs {
		for _, id := range open[i] {
			started, outcome, err := h.ledger.SettleWorkflow(ctx, q, id)
			if err != nil {
				h.failed(ctx, "reading a workflow failed", "queue", q, "workflow", id, "error", err)
				continue
			}
			if started {
				h.metrics.WorkflowsStarted.WithLabelValues(ledger.Logical(q)).Inc()
			}
			if outcome != "" {
				h.metrics.WorkflowsFinished.WithLabelValues(ledger.Logical(q), outcome).Inc()
				h.log.Info("workflow finished", "queue", q, "workflow", id, "outcome", outcome)
			}
		}
	}
}

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
