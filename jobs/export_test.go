package jobs

import (
	"context"
	"time"
)

// PruneUniqueForTest runs one pass of the maintenance pruner's unique-index
// scan on queue q.
func PruneUniqueForTest(ctx context.Context, c *Client, q string) (int64, error) {
	return c.ledger.PruneUnique(ctx, q)
}

// AgePartitionCountsForTest makes every partition count c read look read
// by before, so its next enqueue reads the registry again.
func AgePartitionCountsForTest(c *Client, by time.Duration) {
	c.parts.mu.Lock()
	defer c.parts.mu.Unlock()
	for q, cp := range c.parts.counts {
		cp.at = cp.at.Add(-by)
		c.parts.counts[q] = cp
	}
}

// AfterDecisionReadForTest makes c call f after an operator's "not
// applied" decision (Resolve, ResolveSeen: a rerun or dead) read the job
// to fence its last attempt out, before the decision is written.
func AfterDecisionReadForTest(c *Client, f func()) {
	c.afterRead = f
}
