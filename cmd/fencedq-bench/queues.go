package main

import (
	"context"
	"fmt"
	"strconv"
)

// manyQueues is how many queues the queues section spreads jobs over.
const manyQueues = 100

// queuesTarget is the smallest ratio (one pool over manyQueues queues ÷
// the same pool over one queue) aimed for.
const queuesTarget = 0.9

// QueuesAt is the queues section at one concurrency.
type QueuesAt struct {
	Concurrency int     `json:"concurrency"`
	One         Variant `json:"one_queue"`
	Many        Variant `json:"many_queues"`
	// Ratio is Many's jobs/s ÷ One's.
	Ratio       float64 `json:"ratio"`
	Target      float64 `json:"target"`
	MeetsTarget bool    `json:"meets_target"`
}

// QueuesResult is the queues section: the no-op drain of one pool over
// one queue and over Queues queues (jobs spread evenly, equal weights).
type QueuesResult struct {
	Jobs        int                  `json:"jobs"`
	Repeat      int                  `json:"repeat"`
	Queues      int                  `json:"queues"`
	Concurrency []int                `json:"concurrency"`
	At          map[string]*QueuesAt `json:"at"`
}

// queues runs the queues section at every concurrency, the two variants
// alternating.
func (e *bench) queues(ctx context.Context) (*QueuesResult, error) {
	o := e.opts
	many := make([]string, manyQueues)
	for i := range many {
		many[i] = "q" + strconv.Itoa(i)
	}
	r := &QueuesResult{Jobs: o.jobs, Repeat: o.repeat, Queues: manyQueues, Concurrency: o.concurrencies, At: map[string]*QueuesAt{}}
	overMany := func(ctx context.Context, t *target, _ []string, n, conc int, o *drainOpts) (drainRun, error) {
		return fencedqDrain(ctx, t, many, n, conc, o)
	}
	for _, conc := range o.concurrencies {
		runs, err := compareNamed(ctx, e, e.single, []string{"default"}, o.jobs, conc, nil,
			[]string{"one queue", fmt.Sprintf("%d queues", manyQueues)}, fencedqDrain, overMany)
		if err != nil {
			return nil, err
		}
		at := &QueuesAt{Concurrency: conc, One: variantOf(runs[0]), Many: variantOf(runs[1]), Target: queuesTarget}
		at.Ratio = round(ratio(at.Many.JobsPerSec, at.One.JobsPerSec), 3)
		at.MeetsTarget = at.Ratio >= at.Target
		r.At[strconv.Itoa(conc)] = at
		e.progress("  concurrency %d: %d queues ÷ one queue = %.3f", conc, manyQueues, at.Ratio)
	}
	return r, nil
}
