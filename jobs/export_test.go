package jobs

import "context"

// PruneUniqueForTest runs one pass of the maintenance pruner's unique-index
// scan on queue q.
func PruneUniqueForTest(ctx context.Context, c *Client, q string) (int64, error) {
	return c.ledger.PruneUnique(ctx, q)
}
