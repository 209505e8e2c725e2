package asynqfence

import (
	"context"
	"sync"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/jobs"
)

// layouts caches the queue names holding each ledger queue's jobs, read
// again after jobs.PartitionRefresh, as a native client's partition count
// is: a delivery costs no read of the layout in between.
type layouts struct {
	mu sync.Mutex
	m  map[string]layout
}

type layout struct {
	p     int      // the registered partition count
	names []string // the queue names holding the queue's jobs (ledger.Physical)
	at    time.Time
}

// maxLayouts bounds the layouts a bridge keeps.
const maxLayouts = 4096

// layoutOf returns ledger queue q's partition count and the queue names
// holding its jobs.
func (b *Bridge) layoutOf(ctx context.Context, q string) (layout, error) {
	b.layouts.mu.Lock()
	c, ok := b.layouts.m[q]
	b.layouts.mu.Unlock()
	if ok && time.Since(c.at) <= jobs.PartitionRefresh {
		return c, nil
	}
	ps, err := b.ledger.PartitionsOf(ctx, q)
	if err != nil {
		return layout{}, err
	}
	qs, err := b.ledger.Queues(ctx)
	if err != nil {
		return layout{}, err
	}
	c = layout{p: ps[0], names: ledger.Physical(q, ps[0], qs), at: time.Now()}
	b.layouts.mu.Lock()
	if b.layouts.m == nil || len(b.layouts.m) > maxLayouts {
		b.layouts.m = map[string]layout{}
	}
	b.layouts.m[q] = c
	b.layouts.mu.Unlock()
	return c, nil
}

// jobQueue returns the queue name holding job id of ledger queue q: q
// itself for a queue that never had partitions; else the name that holds
// the job already (a partition, or q from before it had any), and for a
// job not recorded yet the partition a native enqueue of id as its
// operation id goes to, so a task's job and a native job of its operation
// meet in one partition (see jobs.PartitionKey). A partition that cannot
// be read (its master down) does not keep a job found in another from
// its delivery; a job found in none of those read is refused (it may be
// recorded in one not read: recording it again elsewhere would make two).
func (b *Bridge) jobQueue(ctx context.Context, q, id string) (string, error) {
	c, err := b.layoutOf(ctx, q)
	if err != nil || len(c.names) == 1 {
		return q, err
	}
	has, err := b.ledger.HoldJob(ctx, c.names, id)
	for i, n := range c.names {
		if has[i] {
			return n, nil
		}
	}
	if err != nil {
		return "", err
	}
	return ledger.PartitionNames(q, c.p)[ledger.RoutePartition(c.p, "", id, 0)], nil
}
