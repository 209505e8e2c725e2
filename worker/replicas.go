package worker

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/durable"
)

// checkReplicas reads how many replicas the primary (each master of a
// Redis Cluster) has online, when Config.Jobs.Durability asks for some: at
// the start, and with the eviction policy every evictionEvery heartbeats
// (one INFO replication per master a minute). Fewer than asked for fail
// every durable claim, completion and enqueue of the pool (each waits for
// replicas that are not there). The shortfall (the largest of a Cluster's
// masters) is exported as fencedq_redis_replicas_missing and published in
// the pool's heartbeat (the dashboard's banner shows it); it is logged at
// error level with both counts at the start and whenever it appears, and
// at info level when enough replicas are connected again. The pool starts
// all the same, since replicas may connect later. A Redis that refuses
// INFO (an ACL without +info) is logged at warning level at the start; one
// that does not answer is left to the start's next calls, which name it.
// A check that read nothing leaves the shortfall as it was.
func (p *Pool) checkReplicas(ctx context.Context, starting bool) {
	d := durable.Options(p.cfg.Jobs.Durability)
	if !d.Enabled() {
		return
	}
	short, err := durable.Shortfalls(ctx, p.rdb, d)
	if rerr := redis.Error(nil); starting && err != nil && errors.As(err, &rerr) {
		p.log.Warn("could not read Redis's replicas (INFO replication): a Durability.Replicas above the replicas connected would go unreported; "+
			"allow the pool's Redis user +info", "error", err)
	}
	if err != nil && len(short) == 0 {
		return
	}
	missing := 0
	for _, s := range short {
		missing = max(missing, s.Required-s.Connected)
	}
	p.metrics.ReplicasMissing.Set(float64(missing))
	prev := p.replicasMissing.Swap(int64(missing))
	switch {
	case missing > 0 && (starting || prev == 0):
		for _, s := range short {
			p.log.Error("fewer Redis replicas are connected than Config.Jobs.Durability.Replicas requires: every durable claim, completion and enqueue "+
				"fails (not acknowledged) until enough replicas connect",
				"primary", s.Addr, "replicas_connected", s.Connected, "replicas_required", s.Required)
		}
	case missing == 0 && prev > 0:
		p.log.Info("enough Redis replicas are connected again for Config.Jobs.Durability.Replicas", "replicas_required", d.Replicas)
	}
}
