package main

import (
	"context"
	"errors"
	"strconv"

	"github.com/fencedq/fencedq/internal/redisserver"
	"github.com/fencedq/fencedq/jobs"
)

// durableTarget is the target slowdown of durable mode (one replica) at
// concurrency 50 in the no-op drain: at most 15 %.
const durableTarget = 15.0

// benchDurability is the durable mode the section measures: one replica
// must hold every enqueue, claim and completion.
var benchDurability = jobs.Durability{Replicas: 1}

// DurableAt is the no-op drain at one concurrency, default and durable.
type DurableAt struct {
	Concurrency int     `json:"concurrency"`
	Default     Variant `json:"default"`
	Durable     Variant `json:"durable"`
	// SlowerPct is how much slower the durable drain is, in percent of
	// the default's jobs/s (negative: faster).
	SlowerPct float64 `json:"slower_pct"`
	// Target is the largest slowdown aimed for (0: none at this
	// concurrency).
	Target      float64 `json:"target_pct,omitempty"`
	MeetsTarget bool    `json:"meets_target"`
}

// DurableResult is the durable section: the cost of durable
// acknowledgements with one replica the benchmark started.
type DurableResult struct {
	Jobs        int                   `json:"jobs"`
	Repeat      int                   `json:"repeat"`
	Replicas    int                   `json:"replicas"`
	Concurrency []int                 `json:"concurrency"`
	At          map[string]*DurableAt `json:"at"`
	// EnqueueGoroutines is how many goroutines call Enqueue.
	EnqueueGoroutines int `json:"enqueue_goroutines"`
	// EnqueueDefault and EnqueueDurable are Enqueue from EnqueueGoroutines
	// goroutines.
	EnqueueDefault   EnqueueSide `json:"enqueue_default"`
	EnqueueDurable   EnqueueSide `json:"enqueue_durable"`
	EnqueueSlowerPct float64     `json:"enqueue_slower_pct"`
}

func slowerPct(durable, def float64) float64 {
	if def == 0 {
		return 0
	}
	return round(100*(def-durable)/def, 1)
}

// durable runs the durable section: the single server gets a replica, then
// the no-op drain (each concurrency) and Enqueue run in default and
// durable mode, alternating.
func (e *bench) durable(ctx context.Context) (*DurableResult, error) {
	if e.opts.redisAddr != "" {
		return nil, errors.New("the durable section starts its own replica: run it without --redis")
	}
	e.progress("  starting a replica of %s", e.singleAddr)
	replica, err := redisserver.Start(ctx, redisserver.Options{ReplicaOf: e.singleAddr})
	if err != nil {
		return nil, err
	}
	defer replica.Stop()
	if err := redisserver.SyncReplicas(ctx, e.singleAddr, 1); err != nil {
		return nil, err
	}
	o := e.opts
	r := &DurableResult{Jobs: o.jobs, Repeat: o.repeat, Replicas: benchDurability.Replicas, Concurrency: o.concurrencies,
		At: map[string]*DurableAt{}, EnqueueGoroutines: o.enqueueGoroutines}
	durableDrain := func(ctx context.Context, t *target, queues []string, n, conc int, _ *drainOpts) (drainRun, error) {
		return fencedqDrain(ctx, t, queues, n, conc, &drainOpts{durability: benchDurability})
	}
	for _, conc := range o.concurrencies {
		runs, err := compareNamed(ctx, e, e.single, []string{"default"}, o.jobs, conc, nil,
			[]string{"default", "durable"}, fencedqDrain, durableDrain)
		if err != nil {
			return nil, err
		}
		at := &DurableAt{Concurrency: conc, Default: variantOf(runs[0]), Durable: variantOf(runs[1])}
		at.SlowerPct = slowerPct(at.Durable.JobsPerSec, at.Default.JobsPerSec)
		if conc == 50 {
			at.Target = durableTarget
		}
		at.MeetsTarget = at.Target == 0 || at.SlowerPct <= at.Target
		r.At[strconv.Itoa(conc)] = at
		e.progress("  concurrency %d: durable %s", conc, slowerText(at.SlowerPct))
	}
	durableEnqueue := func(ctx context.Context, t *target, n, g, _ int) (enqueueRun, error) {
		ns := uniq("fqd")
		defer deleteMatching(context.WithoutCancel(ctx), t.rdb, ns, nil)
		c := jobs.NewClient(t.rdb, jobs.Config{Namespace: ns, Durability: benchDurability})
		return timedParallel(ctx, t, n, n, g, func(i int) error {
			_, err := c.Enqueue(ctx, noopArgs{N: i})
			return err
		})
	}
	sides, err := e.enqueueSides(ctx, []string{"default Enqueue", "durable Enqueue"},
		[]enqueueFunc{fencedqEnqueue, durableEnqueue}, 1)
	if err != nil {
		return nil, err
	}
	r.EnqueueDefault, r.EnqueueDurable = sides[0], sides[1]
	r.EnqueueSlowerPct = slowerPct(r.EnqueueDurable.JobsPerSec, r.EnqueueDefault.JobsPerSec)
	return r, nil
}
