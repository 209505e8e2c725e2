package worker

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/durable"
)

// checkReplicas reads, once at the start, how many replicas the primary
// (each master of a Redis Cluster) has online, when Config.Jobs.Durability
// asks for some. Fewer than asked for fail every durable claim, completion
// and enqueue of the pool (each waits for replicas that are not there),
// which is logged at error level with both counts; the pool starts all the
// same, since replicas may connect later. A Redis that refuses INFO (an
// ACL without +info) is logged at warning level; one that does not answer
// is left to the start's next calls, which name it.
func (p *Pool) checkReplicas(ctx context.Context) {
	d := durable.Options(p.cfg.Jobs.Durability)
	short, err := durable.Shortfalls(ctx, p.rdb, d)
	if rerr := redis.Error(nil); err != nil && errors.As(err, &rerr) {
		p.log.Warn("could not read Redis's replicas (INFO replication): a Durability.Replicas above the replicas connected would go unreported; "+
			"allow the pool's Redis user +info", "error", err)
	}
	for _, s := range short {
		p.log.Error("fewer Redis replicas are connected than Config.Jobs.Durability.Replicas requires: every durable claim, completion and enqueue "+
			"fails (not acknowledged) until enough replicas connect",
			"primary", s.Addr, "replicas_connected", s.Connected, "replicas_required", s.Required)
	}
}
