package redisserver

import (
	"context"
	"errors"
	"time"
)

// CoordinatedFailover promotes the cluster replica at addr with a
// coordinated CLUSTER FAILOVER (it catches up with its live master first:
// nothing is lost). Redis aborts a manual failover that is not done within
// 5 s (a slow election on a loaded machine), so it asks up to three times,
// waiting wait each time for the master role.
func CoordinatedFailover(ctx context.Context, addr string, wait time.Duration) error {
	var err error
	for range 3 {
		err = ClusterFailover(ctx, addr, FailoverCoordinated, wait)
		if !errors.Is(err, ErrNotPromoted) {
			return err
		}
	}
	return err
}

// PromoteReplica promotes the cluster replica at addr whose master is dead:
// CLUSTER FAILOVER FORCE (an election among the other masters) at once,
// rather than waiting node-timeout for the automatic failover, and TAKEOVER
// when the election does not promote it within forceWait. Writes the
// replica had not received are lost.
func PromoteReplica(ctx context.Context, addr string, forceWait, takeoverWait time.Duration) error {
	err := ClusterFailover(ctx, addr, FailoverForce, forceWait)
	if errors.Is(err, ErrNotPromoted) {
		err = ClusterFailover(ctx, addr, FailoverTakeover, takeoverWait)
	}
	return err
}
