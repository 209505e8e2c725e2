package maintenance

import (
	"context"
	"time"

	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
)

// RelayBatch bounds how many outbox rows one relay call moves.
const RelayBatch = 500

// Outbox is one transactional outbox as its relay service runs it: the
// methods of a worker.OutboxRelay (the one declaration of the relay
// contract; package pgfence's Outbox implements it).
type Outbox struct {
	// Name names the outbox in logs.
	Name string
	// Relay moves up to max committed rows into the queue through client,
	// fenced by leader, and returns how many rows it relayed and how many
	// it set aside as impossible to enqueue. Every row is enqueued with an
	// operation id of its own, so a batch relayed twice (a crash between
	// the enqueue and the row's removal, two leaders around a handover) is
	// enqueued once.
	Relay func(ctx context.Context, client *jobs.Client, leader lease.Token, max int) (relayed, setAside int, err error)
	// Listen returns a channel that receives when rows may have been
	// committed, until ctx ends (nil: the relay polls only).
	Listen func(ctx context.Context) <-chan struct{}
}

// relay moves one outbox's committed jobs into the queue: on each wake-up
// from the outbox's Listen, and every interval in case a wake-up was lost.
type relay struct {
	service
	interval time.Duration
	client   *jobs.Client
	outbox   Outbox
	batch    int
}

// runOnce relays batches until the outbox is drained, and counts the rows
// set aside (fencedq_outbox_rows_set_aside_total, by outbox). Every row is
// enqueued with an operation id of its own, so a batch relayed twice (a
// crash between the enqueue and the row's removal, two leaders around a
// handover) is enqueued once.
func (r *relay) runOnce(ctx context.Context, leader lease.Token) error {
	start := time.Now()
	total, aside := 0, 0
	defer func() {
		if total > 0 || aside > 0 {
			r.log.Debug("outbox relayed", "jobs", total, "set_aside", aside, "took", time.Since(start))
		}
	}()
	for ctx.Err() == nil {
		n, bad, err := r.outbox.Relay(ctx, r.client, leader, r.batch)
		total += n
		aside += bad
		if bad > 0 {
			r.metrics.OutboxSetAside.WithLabelValues(r.outbox.Name).Add(float64(bad))
		}
		if err != nil {
			return err
		}
		if n+bad < r.batch {
			break
		}
	}
	return nil
}
