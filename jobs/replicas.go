package jobs

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/durable"
)

// checkReplicas reads, at the client's first durable write, how many
// replicas the primary (each master of a Redis Cluster) has online. Fewer
// than Config.Durability.Replicas fail every durable enqueue (each waits
// for replicas that are not there): that is logged at error level, once
// per client, with both counts and the primary's address. A check Redis
// refused (a Redis user without +info) is logged at warning level; one
// that read nothing because Redis did not answer (down, unreachable, or
// the write's context cut it short) is left to the next write. The write
// goes on either way: its wait for replicas decides its fate.
func (c *Client) checkReplicas(ctx context.Context) {
	if !c.durability.Enabled() || !c.replicasRead.CompareAndSwap(false, true) {
		return
	}
	short, err := durable.Shortfalls(ctx, c.rdb, c.durability)
	switch {
	case err != nil && len(short) == 0 && (ctx.Err() != nil || !errors.As(err, new(redis.Error))):
		c.replicasRead.Store(false)
	case err != nil:
		c.log.Warn("could not read Redis's replicas (INFO replication): a Durability.Replicas above the replicas connected would go unreported; "+
			"allow the client's Redis user +info", "error", err)
	}
	for _, s := range short {
		c.log.Error("fewer Redis replicas are connected than Config.Durability.Replicas requires: every durable enqueue "+
			"fails (not acknowledged) until enough replicas connect",
			"primary", s.Addr, "replicas_connected", s.Connected, "replicas_required", s.Required)
	}
}
