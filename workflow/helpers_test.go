package workflow_test

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
	"github.com/fencedq/fencedq/workflow"
)

// Step is the one job kind of these tests: it records its run, then its
// output (its name and what it read from its dependencies), and fails when
// told to.
type Step struct {
	Name string   `json:"name"`
	Deps []string `json:"deps,omitempty"`
	Fail bool     `json:"fail,omitempty"`
	// Unknown makes the step end uncertain (until the test fixes it).
	Unknown bool `json:"unknown,omitempty"`
}

func (Step) Kind() string { return "wf_step" }

// StepOut is a Step's output.
type StepOut struct {
	Name string         `json:"name"`
	Seen map[string]int `json:"seen,omitempty"` // dependency → how many it had seen
	N    int            `json:"n"`
}

// runs counts every handler run per step and the order steps started in.
type runs struct {
	mu    sync.Mutex
	n     map[string]int
	order []string
}

func (r *runs) add(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n[name]++
	r.order = append(r.order, name)
	return len(r.order)
}

func (r *runs) count(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n[name]
}

func (r *runs) index(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, n := range r.order {
		if n == name {
			return i
		}
	}
	return -1
}

type env struct {
	t      *testing.T
	rdb    redis.UniversalClient
	ns     string
	client *jobs.Client
	ledger *ledger.Ledger
	runs   *runs
	fixed  atomic.Bool // steps with Fail succeed from now on
	reg    *prometheus.Registry
	// retention is the namespace's jobs.Config.Retention (0: the default).
	retention time.Duration
	// grace is the pools' Maintenance.UncommittedGrace (0: the default).
	grace time.Duration
}

func newEnv(t *testing.T) *env {
	rdb, ns := redistest.New(t)
	return newEnvOn(t, rdb, ns)
}

func newEnvOn(t *testing.T, rdb redis.UniversalClient, ns string) *env {
	return newEnvWith(t, rdb, ns, 0)
}

func newEnvWith(t *testing.T, rdb redis.UniversalClient, ns string, retention time.Duration) *env {
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns, Retention: retention})
	t.Cleanup(func() { _ = c.Close() })
	return &env{t: t, rdb: rdb, ns: ns, client: c, ledger: ledger.New(rdb, ledger.Config{Namespace: ns, Retention: retention}),
		runs: &runs{n: map[string]int{}}, reg: prometheus.NewRegistry(), retention: retention}
}

// work is the Step handler: a step reads every dependency's output and
// records its own.
func (e *env) work(ctx context.Context, j *jobs.Job[Step]) error {
	e.runs.add(j.Args.Name)
	out := StepOut{Name: j.Args.Name, Seen: map[string]int{}}
	for _, d := range j.Args.Deps {
		var o StepOut
		if err := j.DependencyOutput(ctx, d, &o); err != nil {
			return jobs.Permanent(err)
		}
		out.Seen[d] = o.N
	}
	out.N = len(out.Seen) + 1
	if j.Args.Unknown && !e.fixed.Load() {
		return jobs.Unknown(io.ErrUnexpectedEOF)
	}
	if j.Args.Fail && !e.fixed.Load() {
		return jobs.Permanent(io.ErrUnexpectedEOF)
	}
	return jobs.RecordOutput(ctx, out)
}

// start runs a pool over queues until the test ends.
func (e *env) start(queues ...string) func() {
	return e.run(true, e.reg, func(p *worker.Pool) error { return worker.Register(p, jobs.WorkFunc[Step](e.work)) }, queues...)
}

// run runs a pool over queues (default: the default queue), its workers
// added by register, until the test ends or the returned stop is called;
// maintenance false keeps it out of the leader election.
func (e *env) run(maintenance bool, reg prometheus.Registerer, register func(*worker.Pool) error, queues ...string) func() {
	if len(queues) == 0 {
		queues = []string{jobs.DefaultQueue}
	}
	qs := map[string]int{}
	for _, q := range queues {
		qs[q] = 1
	}
	p, err := worker.NewPool(e.rdb, worker.Config{
		Jobs: jobs.Config{Namespace: e.ns, Retention: e.retention}, Queues: qs, Concurrency: 8,
		LeaseTTL: time.Second, HandlerTimeout: 5 * time.Second, ShutdownTimeout: 5 * time.Second,
		RetryDelay: func(int) time.Duration { return 20 * time.Millisecond },
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		Maintenance: worker.MaintenanceConfig{Disabled: !maintenance, Interval: 100 * time.Millisecond,
			MaxReconcileTries: 3, PruneInterval: 200 * time.Millisecond, UncommittedGrace: e.grace},
		Registerer: reg,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	if err := register(p); err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				e.t.Errorf("pool: %v", err)
			}
		})
	}
	e.t.Cleanup(stop)
	return stop
}

// wait waits for step of res to reach state s.
func (e *env) wait(res *workflow.Result, step string, s jobs.State) *jobs.Record {
	e.t.Helper()
	ref := res.Steps[step]
	return jobstest.WaitState(e.t, e.ledger, ref.Queue, ref.JobID, s)
}

// status reads the workflow and fails the test on an error.
func (e *env) status(id string) *workflow.Status {
	e.t.Helper()
	st, err := workflow.Get(context.Background(), e.client, id)
	if err != nil {
		e.t.Fatal(err)
	}
	return st
}

func step(name string, deps ...string) Step { return Step{Name: name, Deps: deps} }

// counter sums the counter name in reg (with outcome, only the series with
// that outcome label).
func counter(t *testing.T, reg *prometheus.Registry, name, outcome string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			if outcome != "" {
				for _, l := range m.GetLabel() {
					if l.GetName() == "outcome" && l.GetValue() != outcome {
						continue series
					}
				}
			}
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

// gauge reads the gauge name in reg whose labels include labels (-1 when
// there is none).
func gauge(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue series
				}
			}
			return m.GetGauge().GetValue()
		}
	}
	return -1
}
