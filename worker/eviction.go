package worker

import (
	"context"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// evictionEvery is how many heartbeats apart a pool reads Redis's eviction
// policy (a minute at the 5 s heartbeat): an operator's CONFIG SET is
// noticed within a minute.
const evictionEvery = 12

// checkEviction reads Redis's eviction policy (every master's on a Redis
// Cluster). A Redis with a maxmemory and a policy other than noeviction
// deletes keys under memory pressure, a deletion no script can see: a job
// record, a lease or a fence's high-water mark vanishes, and fencing and
// "no job lost" no longer hold. Such a policy is logged at error level
// when first seen (and when it goes away), and exported as
// fencedq_redis_may_evict. A Redis that refuses INFO (an ACL without
// +info) is left unjudged, which is logged at warning level when first
// seen: an evicting policy would go unreported. On a Cluster, a master
// that evicts is reported even when another master's INFO failed.
func (p *Pool) checkEviction(ctx context.Context) {
	policy, err := evictionPolicy(ctx, p.rdb)
	if err != nil && policy == "" {
		if ctx.Err() == nil && !p.evictionUnread {
			p.evictionUnread = true
			p.log.Warn("could not read Redis's eviction policy (INFO memory): a policy that evicts keys would go unreported; "+
				"allow the pool's Redis user +info", "error", err)
		}
		return
	}
	p.evictionUnread = false
	evicting := policy != ""
	if evicting {
		p.metrics.MayEvict.Set(1)
	} else {
		p.metrics.MayEvict.Set(0)
	}
	if evicting == p.evicting {
		return
	}
	p.evicting = evicting
	if evicting {
		p.log.Error("Redis may evict keys under memory pressure: job records, leases and fence marks can vanish, "+
			"and fencing and no-job-lost no longer hold; set maxmemory-policy noeviction",
			"maxmemory_policy", policy)
	} else {
		p.log.Info("Redis no longer evicts keys (maxmemory-policy noeviction, or no maxmemory)")
	}
}

// evictionPolicy returns the eviction policy of the first server of rdb
// (each master of a Cluster) that would evict keys: "" when none would
// (no maxmemory, or maxmemory-policy noeviction).
func evictionPolicy(ctx context.Context, rdb redis.UniversalClient) (string, error) {
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		info, err := rdb.Info(ctx, "memory").Result()
		if err != nil {
			return "", err
		}
		return evicting(info), nil
	}
	var mu sync.Mutex
	found := ""
	err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		info, err := c.Info(ctx, "memory").Result()
		if err != nil {
			return err
		}
		if p := evicting(info); p != "" {
			mu.Lock()
			found = p
			mu.Unlock()
		}
		return nil
	})
	return found, err
}

// evicting reads an INFO memory reply: the eviction policy when the server
// would evict keys, else "".
func evicting(info string) string {
	maxmemory, policy := "", ""
	for line := range strings.SplitSeq(info, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		switch k {
		case "maxmemory":
			maxmemory = v
		case "maxmemory_policy":
			policy = v
		}
	}
	if maxmemory == "" || maxmemory == "0" || policy == "" || policy == "noeviction" {
		return ""
	}
	return policy
}
