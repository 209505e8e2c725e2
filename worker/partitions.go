package worker

import (
	"context"
	"slices"
	"sync"

	"github.com/fencedq/fencedq/internal/ledger"
)

// partitions is what a pool knows of its queues' partitions (see
// jobs.Client.SetPartitions): the queue names it claims from for each of
// its queues. A partitioned queue enters the producer's queue set
// (queues.go) as its partitions, each with the queue's priority, so the
// weighted order starts each fetch at a random partition and goes on to
// the next while slots are free, and an idle partition costs what an idle
// queue costs (no claim). The names are read again at every heartbeat; a
// change rebuilds the set.
type partitions struct {
	mu      sync.Mutex
	names   map[string][]string // queue → the names holding its jobs
	layout  []string            // the current layouts' names, which the pool registers
	changed bool                // names changed since takeChanged
}

// refreshPartitions reads the partition registry and the queue registry
// and updates the names served.
func (p *Pool) refreshPartitions(ctx context.Context) error {
	qs := p.queueNames()
	counts, err := p.ledger.PartitionsOf(ctx, qs...)
	if err != nil {
		return err
	}
	registered, err := p.ledger.Queues(ctx)
	if err != nil {
		return err
	}
	// The registry's names by logical queue, so each queue's layout reads
	// its own (Physical over the whole registry per queue is quadratic:
	// seconds over thousands of queues).
	byLogical := make(map[string][]string, len(qs))
	for _, n := range registered {
		l := ledger.Logical(n)
		byLogical[l] = append(byLogical[l], n)
	}
	names := make(map[string][]string, len(qs))
	var layout []string
	for i, q := range qs {
		names[q] = ledger.Physical(q, counts[i], byLogical[q])
		layout = append(layout, ledger.PartitionNames(q, counts[i])...)
	}
	pt := &p.parts
	pt.mu.Lock()
	defer pt.mu.Unlock()
	for q, ns := range names {
		if !slices.Equal(pt.names[q], ns) {
			pt.changed = true
		}
	}
	pt.names, pt.layout = names, layout
	return nil
}

// current returns the names of the queues' current layouts: each queue's
// own name, or its partitions'.
func (pt *partitions) current() []string {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	return slices.Clone(pt.layout)
}

// weights returns the queue set's names and priorities: each queue's
// names holding its jobs, with the queue's priority.
func (pt *partitions) weights(queues map[string]int) map[string]int {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	out := make(map[string]int, len(queues))
	for q, w := range queues {
		ns := pt.names[q]
		if len(ns) == 0 {
			ns = []string{q}
		}
		for _, n := range ns {
			out[n] = w
		}
	}
	return out
}

// takeChanged reports whether the names changed since the last call.
func (pt *partitions) takeChanged() bool {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	c := pt.changed
	pt.changed = false
	return c
}
