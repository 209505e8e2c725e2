package worker

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/ledger"
)

// partitions is what a pool knows of its queues' partitions (see
// jobs.Client.SetPartitions): the queue names it claims from for each of
// its queues, where each fetch starts among them, and which are idle.
//
// A queue without partitions is served as before: one name, never skipped.
// For a partitioned queue, each fetch visits its partitions in turn from a
// cursor that starts at a random partition in each pool and moves one on
// at every fetch, so pools start at different partitions and no partition
// is everyone's first; the fetch goes on to the next partition while slots
// are free. A partition whose claim found nothing due is skipped until a
// wake-up reaches the pool, its next job is due, or FetchPollInterval
// passed, so an idle partition costs no claim while its siblings are busy.
type partitions struct {
	mu     sync.Mutex
	names  map[string][]string  // queue → the names holding its jobs
	layout []string             // the current layouts' names, which the pool registers
	cursor map[string]int       // queue → the partition the next fetch starts at
	idle   map[string]time.Time // a partition's name → skipped until
	sub    *redis.PubSub        // the pool's wake-up subscription (nil before produce)
	subbed map[string]bool      // the names subscribed to
}

// refresh reads the partition registry and the queue registry and updates
// the names served; newly served names are subscribed to.
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
	names := make(map[string][]string, len(qs))
	var layout []string
	for i, q := range qs {
		names[q] = ledger.Physical(q, counts[i], registered)
		layout = append(layout, ledger.PartitionNames(q, counts[i])...)
	}
	pt := &p.parts
	pt.mu.Lock()
	pt.names, pt.layout = names, layout
	if pt.cursor == nil {
		pt.cursor = map[string]int{}
		pt.idle = map[string]time.Time{}
	}
	var add []string
	if pt.sub != nil {
		for _, ns := range names {
			for _, n := range ns {
				if !pt.subbed[n] {
					pt.subbed[n] = true
					add = append(add, p.ledger.NotifyChannel(n))
				}
			}
		}
	}
	sub := pt.sub
	pt.mu.Unlock()
	if len(add) > 0 {
		return sub.Subscribe(ctx, add...)
	}
	return nil
}

// current returns the names of the queues' current layouts: each queue's
// own name, or its partitions'.
func (pt *partitions) current() []string {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	return slices.Clone(pt.layout)
}

// all returns every name served.
func (pt *partitions) all() []string {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	var out []string
	for _, ns := range pt.names {
		out = append(out, ns...)
	}
	return out
}

// expand replaces each queue of order by the names holding its jobs, from
// the queue's cursor on, leaving out idle partitions, and moves each
// cursor one on. next is the earliest time a partition left out stops
// being idle (zero: none left out).
func (pt *partitions) expand(order []string) (out []string, next time.Time) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	now := time.Now()
	for _, q := range order {
		ns := pt.names[q]
		if len(ns) <= 1 {
			out = append(out, q)
			continue
		}
		c, ok := pt.cursor[q]
		if !ok {
			c = rand.N(len(ns))
		}
		pt.cursor[q] = (c + 1) % len(ns)
		for i := range ns {
			n := ns[(c+i)%len(ns)]
			if until, ok := pt.idle[n]; ok {
				if now.Before(until) {
					if next.IsZero() || until.Before(next) {
						next = until
					}
					continue
				}
				delete(pt.idle, n)
			}
			out = append(out, n)
		}
	}
	return out, next
}

// claimed records what a claim of name found: a partition that had
// nothing due is idle until its next job is due (dueIn ≥ 0) or poll
// passed; one paused, until poll passed.
func (pt *partitions) claimed(name string, got int, paused bool, dueIn, poll time.Duration) {
	if got > 0 || !ledger.IsPartition(name) && !pt.served(name) {
		return
	}
	wait := poll
	if !paused && dueIn >= 0 && dueIn < wait {
		wait = dueIn
	}
	pt.mu.Lock()
	pt.idle[name] = time.Now().Add(wait)
	pt.mu.Unlock()
}

// served reports whether a queue's own name is one of several holding its
// jobs (a queue given partitions, its own jobs draining).
func (pt *partitions) served(name string) bool {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	return len(pt.names[name]) > 1 && slices.Contains(pt.names[name], name)
}

// woken forgets every idle mark: a wake-up, or the pool's sleep ended.
func (pt *partitions) woken() {
	pt.mu.Lock()
	clear(pt.idle)
	pt.mu.Unlock()
}
