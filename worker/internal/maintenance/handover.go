package maintenance

import (
	"context"
	"time"

	"github.com/fencedq/fencedq/lease"
)

// handover delivers the workflow hand-over records left in the queues (a
// completer that crashed or failed between a step's completion and the
// move, a Redis restart in between): one pipelined HLEN per queue per
// pass, then Ledger.MoveHandovers on the queues holding some. Delivery is
// idempotent (see ARCHITECTURE.md, "Workflows"), so it needs no leader
// token: a deposed leader or a completer moving the same record at the
// same time changes nothing twice.
type handover struct {
	service
	interval time.Duration
}

func (h *handover) runOnce(ctx context.Context, _ lease.Token) error {
	qs, err := h.ledger.Queues(ctx)
	if err != nil {
		return err
	}
	busy, err := h.ledger.HandoverQueues(ctx, qs)
	if err != nil {
		return err
	}
	for _, q := range busy {
		n, err := h.ledger.MoveHandovers(ctx, q)
		if err != nil {
			h.failed("moving workflow hand-overs failed", "queue", q, "error", err)
			continue
		}
		if n > 0 {
			h.log.Info("moved workflow hand-overs a completer left", "queue", q, "records", n)
		}
	}
	return nil
}
