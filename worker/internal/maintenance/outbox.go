package maintenance

import (
	"context"
	"time"

	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
)

// RelayBatch bounds how many outbox rows one relay call moves.
const RelayBatch = 500

// Relay is a transactional outbox whose committed rows the leader moves
// into the queue (package pgfence's Outbox is one).
type Relay interface {
	// Relay moves up to max committed rows into the queue through client,
	// fenced by leader, and returns how many rows it took (relayed, or
	// set aside as impossible to enqueue). Every row is
	// enqueued with an operation id of its own, so a batch relayed twice
	// (a crash between the enqueue and the row's removal, two leaders
	// around a handover) is enqueued once.
	Relay(ctx context.Context, client *jobs.Client, leader lease.Token, max int) (int, error)
	// Listen returns a channel that receives when rows may have been
	// committed, until ctx ends (nil: the relay polls only).
	Listen(ctx context.Context) <-chan struct{}
	// Name names the outbox in logs.
	Name() string
}

// relayServices returns one service per outbox: it relays on every
// wake-up, and polls every Interval in case a wake-up was lost.
func (s *Services) relayServices() []service {
	out := make([]service, 0, len(s.cfg.Relays))
	for _, r := range s.cfg.Relays {
		out = append(out, service{
			name:     "outbox relay " + r.Name(),
			interval: s.cfg.Interval,
			pass:     func(ctx context.Context, leader lease.Token) error { return s.relay(ctx, r, leader) },
			wake:     r.Listen,
		})
	}
	return out
}

// relay moves batches until the outbox is drained.
func (s *Services) relay(ctx context.Context, r Relay, leader lease.Token) error {
	start := time.Now()
	total := 0
	for ctx.Err() == nil {
		n, err := r.Relay(ctx, s.client, leader, RelayBatch)
		total += n
		if err != nil {
			return err
		}
		if n < RelayBatch {
			break
		}
	}
	if total > 0 {
		s.log.Debug("outbox relayed", "outbox", r.Name(), "jobs", total, "took", time.Since(start))
	}
	return nil
}
