package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
	"github.com/fencedq/fencedq/workflow"
)

// wfArgs is a step of the workflows section: it does nothing; the last
// step of a workflow signals its end.
type wfArgs struct {
	Last bool `json:"last,omitempty"`
}

func (wfArgs) Kind() string { return "bench_wf" }

// WorkflowsResult is the workflows section: workflows of no-op steps run
// one at a time through one pool, beside the same number of independent
// no-op jobs enqueued at once.
type WorkflowsResult struct {
	Runs        int             `json:"runs"`
	Concurrency int             `json:"concurrency"`
	Shapes      []WorkflowShape `json:"shapes"`
}

// WorkflowShape is one graph's figures.
type WorkflowShape struct {
	Name  string `json:"name"`
	Steps int    `json:"steps"`
	Edges int    `json:"edges"`
	// EndToEndMS is the median time from workflow.Enqueue to the last
	// step's handler; StepsPerSec the steps run per second over the runs.
	EndToEndMS  float64 `json:"end_to_end_ms"`
	StepsPerSec float64 `json:"steps_per_s"`
	// PerStep is the runs' cost per step (enqueue included).
	PerStep PerUnit `json:"per_step"`
	// IndependentMS is the median time from one EnqueueMany of Steps
	// no-op jobs to the last one's handler; IndependentPerJob their cost.
	IndependentMS     float64 `json:"independent_ms"`
	IndependentPerJob PerUnit `json:"independent_per_job"`
	// PerEdgeRedisCPUMicros is the Redis CPU a workflow costs beyond the
	// same number of independent jobs, per dependency edge.
	PerEdgeRedisCPUMicros float64 `json:"per_edge_redis_cpu_us"`
	// PerEdgeServerCommands is the same for the commands Redis executed.
	PerEdgeServerCommands float64 `json:"per_edge_server_commands"`
}

// workflows runs the workflows section on the single server: a chain of
// 10 steps and a fan-out 1 → 100 → 1.
func (e *bench) workflows(ctx context.Context) (*WorkflowsResult, error) {
	o := e.opts
	r := &WorkflowsResult{Runs: o.workflowRuns, Concurrency: o.concurrency}
	for _, s := range []struct {
		name  string
		build func() (*workflow.Workflow, int, int)
	}{{"chain of 10", func() (*workflow.Workflow, int, int) { return chainWorkflow(10) }},
		{"fan-out 1→100→1", func() (*workflow.Workflow, int, int) { return fanWorkflow(100) }}} {
		w, steps, edges := s.build()
		sh, err := workflowShape(ctx, e.single, w, steps, o.workflowRuns, o.concurrency)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
		sh.Name, sh.Steps, sh.Edges = s.name, steps, edges
		n := float64(steps) / float64(edges)
		sh.PerEdgeRedisCPUMicros = round((sh.PerStep.RedisCPUMicros-sh.IndependentPerJob.RedisCPUMicros)*n, 1)
		sh.PerEdgeServerCommands = round((sh.PerStep.ServerCommands-sh.IndependentPerJob.ServerCommands)*n, 1)
		e.progress("  %s: %.1f ms per workflow, %.0f steps/s, %.1f redis cmds and %.1f µs Redis CPU per step; %d independent jobs %.1f ms",
			s.name, sh.EndToEndMS, sh.StepsPerSec, sh.PerStep.ServerCommands, sh.PerStep.RedisCPUMicros, steps, sh.IndependentMS)
		r.Shapes = append(r.Shapes, sh)
	}
	return r, nil
}

// chainWorkflow is s0 → s1 → ... → s(n-1).
func chainWorkflow(n int) (*workflow.Workflow, int, int) {
	w := workflow.New("chain").Add("s0", wfArgs{})
	for i := 1; i < n; i++ {
		w.Add(fmt.Sprintf("s%d", i), wfArgs{Last: i == n-1}, workflow.After(fmt.Sprintf("s%d", i-1)))
	}
	return w, n, n - 1
}

// fanWorkflow is split → n pages → join.
func fanWorkflow(n int) (*workflow.Workflow, int, int) {
	w := workflow.New("fan").Add("split", wfArgs{})
	pages := make([]string, n)
	for i := range n {
		pages[i] = fmt.Sprintf("p%d", i)
		w.Add(pages[i], wfArgs{}, workflow.After("split"))
	}
	return w.Add("join", wfArgs{Last: true}, workflow.After(pages...)), n + 2, 2 * n
}

// workflowShape runs w (of steps steps) runs times, one at a time, then
// as many rounds of the same number of independent no-op jobs, through
// one pool.
func workflowShape(ctx context.Context, t *target, w *workflow.Workflow, steps, runs, conc int) (WorkflowShape, error) {
	var sh WorkflowShape
	ns := uniq("fqw")
	defer deleteMatching(context.WithoutCancel(ctx), t.rdb, ns, nil)
	client := jobs.NewClient(t.rdb, jobs.Config{Namespace: ns})
	defer func() { _ = client.Close() }()
	pool, err := worker.NewPool(t.rdb, poolConfig(ns, conc, map[string]int{jobs.DefaultQueue: 1}))
	if err != nil {
		return sh, err
	}
	ended := make(chan struct{}, 1)
	var left atomic.Int64
	if err := worker.Register(pool, jobs.WorkFunc[wfArgs](func(_ context.Context, j *jobs.Job[wfArgs]) error {
		if j.Args.Last {
			ended <- struct{}{}
		}
		return nil
	})); err != nil {
		return sh, err
	}
	if err := worker.Register(pool, jobs.WorkFunc[noopArgs](func(context.Context, *jobs.Job[noopArgs]) error {
		if left.Add(-1) == 0 {
			ended <- struct{}{}
		}
		return nil
	})); err != nil {
		return sh, err
	}
	rctx, cancel := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- pool.Run(rctx) }()
	defer func() { cancel(); <-ran }()
	wait := func() error {
		select {
		case <-ended:
			return nil
		case <-time.After(2 * time.Minute):
			return errors.New("a run did not end within 2 minutes")
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	one := func() (float64, error) {
		t0 := time.Now()
		if _, err := workflow.Enqueue(ctx, client, w); err != nil {
			return 0, err
		}
		err := wait()
		return float64(time.Since(t0).Microseconds()) / 1000, err
	}
	if _, err := one(); err != nil { // warm-up: scripts loaded, the pool awake
		return sh, err
	}
	p, err := startProbe(ctx, t.rdb, t.hook)
	if err != nil {
		return sh, err
	}
	var lat []float64
	t0 := time.Now()
	for range runs {
		ms, err := one()
		if err != nil {
			return sh, err
		}
		lat = append(lat, ms)
	}
	total := time.Since(t0)
	if sh.PerStep, err = p.end(ctx, runs*steps); err != nil {
		return sh, err
	}
	sh.EndToEndMS = round(median(lat), 1)
	sh.StepsPerSec = round(float64(runs*steps)/total.Seconds(), 0)

	batch := make([]jobs.Params, steps)
	for i := range batch {
		batch[i] = jobs.Params{Args: noopArgs{N: i}}
	}
	if p, err = startProbe(ctx, t.rdb, t.hook); err != nil {
		return sh, err
	}
	lat = lat[:0]
	for range runs {
		left.Store(int64(steps))
		t0 := time.Now()
		if _, err := client.EnqueueMany(ctx, batch); err != nil {
			return sh, err
		}
		if err := wait(); err != nil {
			return sh, err
		}
		lat = append(lat, float64(time.Since(t0).Microseconds())/1000)
	}
	if sh.IndependentPerJob, err = p.end(ctx, runs*steps); err != nil {
		return sh, err
	}
	sh.IndependentMS = round(median(lat), 1)
	return sh, nil
}

// printWorkflows writes the workflows section's table.
func printWorkflows(w io.Writer, r *WorkflowsResult) {
	fmt.Fprintf(w, "\nworkflows: no-op steps, one workflow at a time, %d runs each, concurrency %d (independent: the same number of no-op jobs in one EnqueueMany)\n",
		r.Runs, r.Concurrency)
	for _, s := range r.Shapes {
		fmt.Fprintf(w, "  %s (%d steps, %d edges): %.1f ms per workflow (independent jobs %.1f ms), %.0f steps/s\n",
			s.Name, s.Steps, s.Edges, s.EndToEndMS, s.IndependentMS, s.StepsPerSec)
		fmt.Fprintf(w, "    per step: %.1f redis cmds, %.1f µs Redis CPU, %.2f scripts (independent job: %.1f cmds, %.1f µs, %.2f scripts); per edge beyond: %.1f cmds, %.1f µs\n",
			s.PerStep.ServerCommands, s.PerStep.RedisCPUMicros, s.PerStep.ScriptCalls,
			s.IndependentPerJob.ServerCommands, s.IndependentPerJob.RedisCPUMicros, s.IndependentPerJob.ScriptCalls,
			s.PerEdgeServerCommands, s.PerEdgeRedisCPUMicros)
	}
}
