package main

import (
	"context"
	"fmt"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"

	"github.com/fencedq/fencedq/lease"
)

// leaseTTL is the lease duration every library is asked for.
const leaseTTL = 10 * time.Second

// locker is one lock library: pair acquires and releases resource once.
type locker struct {
	name string
	pair func(ctx context.Context, resource string) error
}

func (e *bench) lockers(prefix string) []locker {
	rdb := e.single.rdb
	fq := lease.NewManager(rdb, lease.Config{Namespace: prefix + "-fq"})
	rl := redislock.New(rdb)
	rs := redsync.New(goredis.NewPool(rdb))
	return []locker{
		{"fencedq", func(ctx context.Context, res string) error {
			l, err := fq.Acquire(ctx, res, "bench", leaseTTL)
			if err != nil {
				return err
			}
			return fq.Release(ctx, l)
		}},
		{"redislock", func(ctx context.Context, res string) error {
			l, err := rl.Obtain(ctx, prefix+"-rl:"+res, leaseTTL, nil)
			if err != nil {
				return err
			}
			return l.Release(ctx)
		}},
		{"redsync", func(ctx context.Context, res string) error {
			m := rs.NewMutex(prefix+"-rs:"+res, redsync.WithExpiry(leaseTTL), redsync.WithTries(1))
			if err := m.LockContext(ctx); err != nil {
				return err
			}
			ok, err := m.UnlockContext(ctx)
			if err == nil && !ok {
				err = fmt.Errorf("redsync: unlock of %s reported not held", res)
			}
			return err
		}},
	}
}

// LockFigures is one library's figures.
type LockFigures struct {
	// OpsPerSec is the median of acquire+release pairs per second.
	OpsPerSec float64   `json:"ops_per_s"`
	Runs      []float64 `json:"runs_ops_per_s"`
	// PerOp is the cost of one acquire+release pair, from the median run.
	PerOp PerUnit `json:"per_op"`
}

// LeaseResult is the lease section.
type LeaseResult struct {
	Ops        int                    `json:"ops"`
	Goroutines int                    `json:"goroutines"`
	Resources  int                    `json:"resources"`
	Repeat     int                    `json:"repeat"`
	Libraries  map[string]LockFigures `json:"libraries"`
	// Ratio is fencedq ops/s ÷ each other library's ops/s
	// (target, issue 25: ≥ 1.5 vs both, stable across runs).
	Ratio       map[string]float64 `json:"ratio"`
	Targets     map[string]float64 `json:"targets"`
	MeetsTarget map[string]bool    `json:"meets_target"`
}

func (e *bench) lease(ctx context.Context) (*LeaseResult, error) {
	o := e.opts
	prefix := uniq("lkb")
	defer deleteMatching(context.WithoutCancel(ctx), e.single.rdb, prefix, nil)
	libs := e.lockers(prefix)
	per := o.leaseResources / o.leaseGoroutines
	timed := func(l locker, ops int) (float64, PerUnit, error) {
		p, err := startProbe(ctx, e.single.rdb, e.single.hook)
		if err != nil {
			return 0, PerUnit{}, err
		}
		start := time.Now()
		err = parallelStriped(ctx, ops, o.leaseGoroutines, func(g, k int) error {
			return l.pair(ctx, fmt.Sprintf("res-%d", g*per+k%per))
		})
		el := time.Since(start)
		if err != nil {
			return 0, PerUnit{}, fmt.Errorf("%s: %w", l.name, err)
		}
		cost, err := p.end(ctx, ops)
		return float64(ops) / el.Seconds(), cost, err
	}
	runs := map[string][]float64{}
	costs := map[string][]PerUnit{}
	for _, l := range libs { // warm-up: connections, script cache
		if _, _, err := timed(l, max(o.leaseOps/10, o.leaseGoroutines)); err != nil {
			return nil, err
		}
	}
	for rep := range o.repeat {
		for k := range libs {
			l := libs[(k+rep)%len(libs)] // rotate the order between repetitions
			ops, cost, err := timed(l, o.leaseOps)
			if err != nil {
				return nil, err
			}
			e.progress("  %s run %d: %.0f acquire+release/s", l.name, rep+1, ops)
			runs[l.name] = append(runs[l.name], round(ops, 1))
			costs[l.name] = append(costs[l.name], cost)
		}
	}
	r := &LeaseResult{Ops: o.leaseOps, Goroutines: o.leaseGoroutines, Resources: per * o.leaseGoroutines, Repeat: o.repeat,
		Libraries: map[string]LockFigures{}, Ratio: map[string]float64{}, MeetsTarget: map[string]bool{},
		Targets: map[string]float64{"redislock": 1.5, "redsync": 1.5}}
	for name, xs := range runs {
		r.Libraries[name] = LockFigures{OpsPerSec: round(median(xs), 1), Runs: xs, PerOp: costs[name][medianIndex(xs)]}
	}
	for _, other := range []string{"redislock", "redsync"} {
		r.Ratio[other] = ratio(r.Libraries["fencedq"].OpsPerSec, r.Libraries[other].OpsPerSec)
		r.MeetsTarget[other] = r.Ratio[other] >= r.Targets[other]
	}
	return r, nil
}

// parallelStriped runs n calls of fn over workers goroutines; goroutine g
// makes its k-th call as fn(g, k).
func parallelStriped(ctx context.Context, n, workers int, fn func(g, k int) error) error {
	errs := make(chan error, workers)
	for g := range workers {
		count := n / workers
		if g < n%workers {
			count++
		}
		go func() {
			for k := range count {
				if err := fn(g, k); err != nil {
					errs <- err
					return
				}
				if ctx.Err() != nil {
					errs <- ctx.Err()
					return
				}
			}
			errs <- nil
		}()
	}
	var first error
	for range workers {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}
