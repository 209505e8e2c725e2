package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/asynqfence"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// noopArgs is the no-op job.
type noopArgs struct {
	N int `json:"n"`
}

// Kind implements jobs.JobArgs.
func (noopArgs) Kind() string { return "bench_noop" }

// target is one Redis deployment under test: a single server or a cluster.
type target struct {
	name    string
	rdb     redis.UniversalClient
	hook    *commandHook
	masters []string // master addresses
	// slotMaster maps a hash slot to the index of its master in masters.
	slotMaster func(slot int) int
}

// newTarget wraps rdb (a *redis.Client or *redis.ClusterClient) with a
// command-counting hook and learns which master serves which slot.
func newTarget(ctx context.Context, name string, rdb redis.UniversalClient, masters []string) (*target, error) {
	t := &target{name: name, rdb: rdb, hook: &commandHook{}, masters: masters, slotMaster: func(int) int { return 0 }}
	rdb.AddHook(t.hook)
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		return t, nil
	}
	//lint:ignore SA1019 CLUSTER SLOTS answers on every Redis the benchmark runs against; CLUSTER SHARDS needs 7.0.
	slots, err := cc.ClusterSlots(ctx).Result()
	if err != nil {
		return nil, err
	}
	index := map[string]int{}
	for i, a := range masters {
		index[a] = i
	}
	owner := make([]int, 16384)
	for _, s := range slots {
		if len(s.Nodes) == 0 {
			continue
		}
		i, ok := index[s.Nodes[0].Addr]
		if !ok {
			i = len(t.masters)
			index[s.Nodes[0].Addr] = i
			t.masters = append(t.masters, s.Nodes[0].Addr)
		}
		for slot := s.Start; slot <= s.End && slot < len(owner); slot++ {
			owner[slot] = i
		}
	}
	t.slotMaster = func(slot int) int { return owner[slot] }
	return t, nil
}

// balanced reports whether the hash tags spread evenly over the masters:
// no master holds more than its share, rounded up.
func (t *target) balanced(tags []string) bool {
	m := max(len(t.masters), 1)
	limit := (len(tags) + m - 1) / m
	load := make([]int, m)
	for _, tag := range tags {
		i := t.slotMaster(keySlot(tag))
		if load[i]++; load[i] > limit {
			return false
		}
	}
	return true
}

// uniqBalanced returns a fresh id (see uniq) for which tags(id) spread
// evenly over the masters, so that every run of a cluster benchmark loads
// every master alike.
func (t *target) uniqBalanced(prefix string, tags func(id string) []string) string {
	for range 10000 {
		id := uniq(prefix)
		if t.balanced(tags(id)) {
			return id
		}
	}
	return uniq(prefix)
}

// crc16 is the CRC16-XMODEM Redis Cluster hashes keys with.
func crc16(b []byte) uint16 {
	var crc uint16
	for _, c := range b {
		crc ^= uint16(c) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// keySlot returns the cluster hash slot of key, honouring {hash tags}.
func keySlot(key string) int {
	if s := strings.IndexByte(key, '{'); s >= 0 {
		if e := strings.IndexByte(key[s+1:], '}'); e > 0 {
			key = key[s+1 : s+1+e]
		}
	}
	return int(crc16([]byte(key)) % 16384)
}

// pickQueues returns n queue names ("q0", "q3", ...) whose hash tags spread
// evenly over the target's masters.
func pickQueues(t *target, n int) []string {
	var out []string
	for i := 0; len(out) < n; i++ {
		q := fmt.Sprintf("q%d", i)
		if t.balanced(append(slices.Clone(out), q)) || i > 10000 {
			out = append(out, q)
		}
	}
	return out
}

// uniq returns prefix plus a random suffix: a namespace no earlier run used.
func uniq(prefix string) string {
	return fmt.Sprintf("%s-%08x", prefix, rand.Uint32())
}

// deleteMatching deletes every key containing part (on every master) and
// removes the run's queues from asynq's queue set.
func deleteMatching(ctx context.Context, rdb redis.UniversalClient, part string, asynqQueues []string) {
	_ = forEachMaster(ctx, rdb, func(ctx context.Context, c *redis.Client) error {
		iter := c.Scan(ctx, 0, "*"+part+"*", 1000).Iterator()
		pipe := c.Pipeline()
		n := 0
		for iter.Next(ctx) {
			pipe.Del(ctx, iter.Val()) // one key per DEL: keys of a cluster node span slots
			if n++; n%1000 == 0 {
				_, _ = pipe.Exec(ctx)
			}
		}
		_, _ = pipe.Exec(ctx)
		return nil
	})
	if len(asynqQueues) > 0 {
		m := make([]any, len(asynqQueues))
		for i, q := range asynqQueues {
			m[i] = q
		}
		_ = rdb.SRem(ctx, "asynq:queues", m...).Err()
	}
}

// parallel calls fn(i) for i in [0, n) from workers goroutines.
func parallel(ctx context.Context, n, workers int, fn func(i int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}

// enqueuers is how many goroutines enqueue before a drain.
const enqueuers = 8

// drainRun is one timed drain of n pre-enqueued jobs.
type drainRun struct {
	jobsPerSec    float64
	enqueuePerSec float64
	enqueue       PerUnit
	drain         PerUnit
}

// asynqConfig is the plain asynq server every comparison runs: asynq's
// defaults but for a 100 ms task check interval (default 1 s; an idle asynq
// worker sleeps 0.5 to 1.5 times it between polls), a 1 s delayed-task
// check (default 5 s), a 10 s shutdown timeout and fencedq's retry delays.
func asynqConfig(conc int, queues []string) asynq.Config {
	qm := map[string]int{}
	for _, q := range queues {
		qm[q] = 1
	}
	return asynq.Config{
		Concurrency:              conc,
		Queues:                   qm,
		ShutdownTimeout:          10 * time.Second,
		TaskCheckInterval:        100 * time.Millisecond,
		DelayedTaskCheckInterval: time.Second,
		RetryDelayFunc: func(n int, _ error, _ *asynq.Task) time.Duration {
			d := min(time.Second<<min(n, 9), 5*time.Minute)
			return d/2 + rand.N(d/2+1)
		},
		Logger:   discardAsynq{},
		LogLevel: asynq.ErrorLevel,
	}
}

// poolConfig is the worker.Config of every fencedq pool the benchmark
// times: the defaults (maintenance on, lease TTL, fetch and completion
// batches) with the concurrency and queues under test and a quiet logger.
func poolConfig(ns string, conc int, queues map[string]int) worker.Config {
	return worker.Config{Jobs: jobs.Config{Namespace: ns}, Concurrency: conc, Queues: queues, Logger: discardLogger}
}

// discardAsynq is an asynq.Logger that drops everything.
type discardAsynq struct{}

func (discardAsynq) Debug(...any) {}
func (discardAsynq) Info(...any)  {}
func (discardAsynq) Warn(...any)  {}
func (discardAsynq) Error(...any) {}
func (discardAsynq) Fatal(...any) {}

// drainTimeout bounds one drain of n jobs.
func drainTimeout(n int) time.Duration { return 2*time.Minute + time.Duration(n)*20*time.Millisecond }

// drainOpts changes what a drain's handlers do and lets a caller look at
// Redis before the run's keys are deleted.
type drainOpts struct {
	// asynqWork and fencedqWork are the handlers' work (nil: nothing).
	asynqWork   func(ctx context.Context, a noopArgs) error
	fencedqWork func(ctx context.Context, j *jobs.Job[noopArgs]) error
	// bridgeWork is the work under the asynq bridge (nil: asynqWork).
	bridgeWork func(ctx context.Context, a noopArgs) error
	// asynqRetention keeps plain asynq's completed tasks (asynq.Retention).
	asynqRetention time.Duration
	// fencedqOptions gives job i's enqueue options (nil: none but the queue).
	fencedqOptions func(i int) []jobs.Option
	// durability is the fencedq client's and pool's (zero: off).
	durability jobs.Durability
	// partitions declares the (single) queue with this many partitions
	// (0 or 1: none).
	partitions int
	// before runs just before the enqueue.
	before func(ctx context.Context) error
	// after runs once the drain finished and the server or pool stopped,
	// before the run's keys are deleted.
	after func(ctx context.Context, d *drained) error
}

// drained names what one drain wrote.
type drained struct {
	ns     string            // fencedq namespace ("" for plain asynq)
	queues []string          // ledger queues (fencedq) or asynq queues (plain asynq)
	jobs   []*jobs.Result    // fencedq enqueue results
	tasks  []*asynq.TaskInfo // plain asynq enqueue results
	// bridgeNS is the ledger namespace of a drain through the asynq bridge
	// ("" otherwise); tasks holds its enqueue results.
	bridgeNS string
}

// completions counts a drain's handler calls until n have succeeded, and
// keeps the first failure.
type completions struct {
	n      int64
	ok     atomic.Int64
	failed atomic.Int64
	first  atomic.Value
	done   chan struct{}
}

func newCompletions(n int) *completions {
	return &completions{n: int64(n), done: make(chan struct{})}
}

// record notes one handler call's result and returns it.
func (c *completions) record(err error) error {
	if err != nil {
		if c.failed.Add(1) == 1 {
			c.first.Store(err)
		}
		return err
	}
	if c.ok.Add(1) == c.n {
		close(c.done)
	}
	return nil
}

// wait waits until n calls succeeded, then reports any failure.
func (c *completions) wait(ctx context.Context) error {
	timeout := drainTimeout(int(c.n))
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-c.done:
	case <-t.C:
		return fmt.Errorf("only %d of %d jobs ran within %v", c.ok.Load(), c.n, timeout)
	case <-ctx.Done():
		return ctx.Err()
	}
	if n := c.failed.Load(); n > 0 {
		return fmt.Errorf("%d handler calls failed, the first with: %v", n, c.first.Load())
	}
	return nil
}

// timedEnqueue runs enqueue(i) for i in [0, n) from enqueuers goroutines
// between two probe readings: the enqueue rate and cost per job.
func timedEnqueue(ctx context.Context, t *target, n int, enqueue func(i int) error) (float64, PerUnit, error) {
	p, err := startProbe(ctx, t.rdb, t.hook)
	if err != nil {
		return 0, PerUnit{}, err
	}
	start := time.Now()
	if err := parallel(ctx, n, enqueuers, enqueue); err != nil {
		return 0, PerUnit{}, err
	}
	rate := float64(n) / time.Since(start).Seconds()
	cost, err := p.end(ctx, n)
	return rate, cost, err
}

// asynqDrain enqueues n no-op tasks over queues with a plain asynq client,
// then times a plain asynq server of concurrency conc draining them.
func asynqDrain(ctx context.Context, t *target, queues []string, n, conc int, o *drainOpts) (drainRun, error) {
	return asynqDrainWith(ctx, t, queues, n, conc, o, false)
}

// bridgeDrain is asynqDrain with the asynq server's handler wrapped in the
// asynqfence bridge's middleware, over a ledger namespace of its own: each
// delivery claims a fenced attempt and commits its outcome by token. A
// handler call counts once the middleware returned (its outcome committed).
func bridgeDrain(ctx context.Context, t *target, queues []string, n, conc int, o *drainOpts) (drainRun, error) {
	return asynqDrainWith(ctx, t, queues, n, conc, o, true)
}

func asynqDrainWith(ctx context.Context, t *target, queues []string, n, conc int, o *drainOpts, bridged bool) (drainRun, error) {
	var r drainRun
	if o == nil {
		o = &drainOpts{}
	}
	asynqNames := func(id string) []string {
		names := make([]string, len(queues))
		for i, q := range queues {
			names[i] = id + "-" + q
		}
		return names
	}
	id := t.uniqBalanced("aqb", asynqNames)
	names := asynqNames(id)
	defer deleteMatching(context.WithoutCancel(ctx), t.rdb, id, names)
	ac := asynq.NewClientFromRedisClient(t.rdb)
	d := &drained{queues: names, tasks: make([]*asynq.TaskInfo, n)}
	var lg *ledger.Ledger
	if bridged {
		// The ledger namespace is the run's id, so deleteMatching removes
		// its keys with asynq's; ledger queues take asynq's queue names.
		d.bridgeNS = id
		lg = ledger.New(t.rdb, ledger.Config{Namespace: id})
	}
	if o.before != nil {
		if err := o.before(ctx); err != nil {
			return r, err
		}
	}
	var err error
	r.enqueuePerSec, r.enqueue, err = timedEnqueue(ctx, t, n, func(i int) error {
		payload, _ := json.Marshal(noopArgs{N: i})
		opts := []asynq.Option{asynq.Queue(names[i%len(names)]), asynq.MaxRetry(jobs.DefaultMaxRetries)}
		if o.asynqRetention > 0 {
			opts = append(opts, asynq.Retention(o.asynqRetention))
		}
		info, err := ac.EnqueueContext(ctx, asynq.NewTask(noopArgs{}.Kind(), payload), opts...)
		d.tasks[i] = info
		return err
	})
	if err != nil {
		return r, fmt.Errorf("asynq enqueue: %w", err)
	}

	pd, err := startProbe(ctx, t.rdb, t.hook)
	if err != nil {
		return r, err
	}
	c := newCompletions(n)
	srv := asynq.NewServerFromRedisClient(t.rdb, asynqConfig(conc, names))
	t0 := time.Now()
	work := o.asynqWork
	if bridged && o.bridgeWork != nil {
		work = o.bridgeWork
	}
	var h asynq.Handler = asynq.HandlerFunc(func(ctx context.Context, task *asynq.Task) error {
		if work == nil {
			return nil
		}
		var a noopArgs
		if err := json.Unmarshal(task.Payload(), &a); err != nil {
			return err
		}
		return work(ctx, a)
	})
	if bridged {
		h = asynqfence.Middleware(t.rdb, jobs.Config{Namespace: id}, asynqfence.Options{Logger: discardLogger})(h)
	}
	if err := srv.Start(asynq.HandlerFunc(func(ctx context.Context, task *asynq.Task) error {
		return c.record(h.ProcessTask(ctx, task))
	})); err != nil {
		return r, fmt.Errorf("asynq server: %w", err)
	}
	err = c.wait(ctx)
	elapsed := time.Since(t0)
	srv.Shutdown()
	if err != nil {
		return r, fmt.Errorf("asynq drain: %w", err)
	}
	r.jobsPerSec = float64(n) / elapsed.Seconds()
	if r.drain, err = pd.end(ctx, n); err != nil {
		return r, err
	}
	if bridged {
		// Sanity: every bridged job must have reached succeeded in the ledger.
		var ok int64
		for _, q := range names {
			st, err := lg.Stats(ctx, q)
			if err != nil {
				return r, err
			}
			ok += st["succeeded"]
		}
		if ok != int64(n) {
			return r, fmt.Errorf("bridge drain: ledger shows %d of %d jobs succeeded", ok, n)
		}
	}
	if o.after != nil {
		err = o.after(ctx, d)
	}
	return r, err
}

// fencedqDrain enqueues n no-op jobs over queues with jobs.Client, then
// times a fencedq worker.Pool of concurrency conc draining them.
func fencedqDrain(ctx context.Context, t *target, queues []string, n, conc int, o *drainOpts) (drainRun, error) {
	var r drainRun
	if o == nil {
		o = &drainOpts{}
	}
	asynqNames := func(ns string) []string {
		names := make([]string, len(queues))
		for i, q := range queues {
			names[i] = ns + "/" + q
		}
		return names
	}
	ns := t.uniqBalanced("fqb", asynqNames)
	aqs := asynqNames(ns)
	qm := map[string]int{}
	for _, q := range queues {
		qm[q] = 1
	}
	defer deleteMatching(context.WithoutCancel(ctx), t.rdb, ns, aqs)
	client := jobs.NewClient(t.rdb, jobs.Config{Namespace: ns, Durability: o.durability})
	defer func() { _ = client.Close() }()
	d := &drained{ns: ns, queues: queues, jobs: make([]*jobs.Result, n)}
	if o.partitions > 1 {
		if _, err := client.SetPartitions(ctx, queues[0], o.partitions, "bench", "benchmark run: partitioned queue"); err != nil {
			return r, err
		}
	}
	if o.before != nil {
		if err := o.before(ctx); err != nil {
			return r, err
		}
	}
	var err error
	r.enqueuePerSec, r.enqueue, err = timedEnqueue(ctx, t, n, func(i int) error {
		opts := []jobs.Option{jobs.Queue(queues[i%len(queues)])}
		if o.fencedqOptions != nil {
			opts = append(opts, o.fencedqOptions(i)...)
		}
		res, err := client.Enqueue(ctx, noopArgs{N: i}, opts...)
		d.jobs[i] = res
		return err
	})
	if err != nil {
		return r, fmt.Errorf("fencedq enqueue: %w", err)
	}

	pd, err := startProbe(ctx, t.rdb, t.hook)
	if err != nil {
		return r, err
	}
	c := newCompletions(n)
	pcfg := poolConfig(ns, conc, qm)
	pcfg.Jobs.Durability = o.durability
	pool, err := worker.NewPool(t.rdb, pcfg)
	if err != nil {
		return r, err
	}
	if err := worker.Register(pool, jobs.WorkFunc[noopArgs](func(ctx context.Context, j *jobs.Job[noopArgs]) error {
		var err error
		if o.fencedqWork != nil {
			err = o.fencedqWork(ctx, j)
		}
		return c.record(err)
	})); err != nil {
		return r, err
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ran := make(chan error, 1)
	t0 := time.Now()
	go func() { ran <- pool.Run(rctx) }()
	err = c.wait(ctx)
	elapsed := time.Since(t0)
	cancel()
	if rerr := <-ran; rerr != nil && err == nil {
		err = rerr
	}
	if err != nil {
		return r, fmt.Errorf("fencedq drain: %w", err)
	}
	r.jobsPerSec = float64(n) / elapsed.Seconds()
	if r.drain, err = pd.end(ctx, n); err != nil {
		return r, err
	}
	// Sanity: every job must have reached succeeded in the ledger.
	var ok int64
	for _, q := range queues {
		st, err := client.Inspector().Stats(ctx, q)
		if err != nil {
			return r, err
		}
		ok += st["succeeded"]
	}
	if ok != int64(n) {
		return r, fmt.Errorf("fencedq drain: ledger shows %d of %d jobs succeeded", ok, n)
	}
	if o.after != nil {
		err = o.after(ctx, d)
	}
	return r, err
}

// Variant is one system's figures in a throughput comparison.
type Variant struct {
	// JobsPerSec is the median drain throughput.
	JobsPerSec float64 `json:"jobs_per_s"`
	// Runs lists every repetition's throughput.
	Runs []float64 `json:"runs_jobs_per_s"`
	// EnqueuePerSec is the median enqueue throughput (enqueuers goroutines).
	EnqueuePerSec float64 `json:"enqueue_jobs_per_s"`
	// PerJob is the drain's cost per job, from the median run.
	PerJob PerUnit `json:"per_job"`
	// EnqueuePerJob is the enqueue's cost per job, from the median run.
	EnqueuePerJob PerUnit `json:"enqueue_per_job"`
}

func variantOf(runs []drainRun) Variant {
	tp := make([]float64, len(runs))
	eq := make([]float64, len(runs))
	for i, r := range runs {
		tp[i] = round(r.jobsPerSec, 1)
		eq[i] = r.enqueuePerSec
	}
	m := runs[medianIndex(tp)]
	return Variant{JobsPerSec: round(median(tp), 1), Runs: tp, EnqueuePerSec: round(median(eq), 1), PerJob: m.drain, EnqueuePerJob: m.enqueue}
}

type drainFunc func(ctx context.Context, t *target, queues []string, n, conc int, o *drainOpts) (drainRun, error)

// compare runs each drain repeat times at concurrency conc, alternating
// which goes first, after one untimed warm-up of each.
func compare(ctx context.Context, e *bench, t *target, queues []string, n, conc int, o *drainOpts, fns ...drainFunc) ([][]drainRun, error) {
	return compareNamed(ctx, e, t, queues, n, conc, o, nil, fns...)
}

// compareNamed is compare with the sides' names for progress lines (nil:
// asynq and fencedq).
func compareNamed(ctx context.Context, e *bench, t *target, queues []string, n, conc int, o *drainOpts, names []string, fns ...drainFunc) ([][]drainRun, error) {
	warm := max(n/10, 20)
	for _, fn := range fns {
		if _, err := fn(ctx, t, queues, warm, conc, o); err != nil {
			return nil, err
		}
	}
	out := make([][]drainRun, len(fns))
	for rep := range e.opts.repeat {
		for k := range fns {
			i := k
			if rep%2 == 1 {
				i = len(fns) - 1 - k
			}
			r, err := fns[i](ctx, t, queues, n, conc, o)
			if err != nil {
				return nil, err
			}
			name := drainName(i, len(fns))
			if i < len(names) {
				name = names[i]
			}
			e.progress("  %s %s concurrency %d run %d: %.0f jobs/s", t.name, name, conc, rep+1, r.jobsPerSec)
			out[i] = append(out[i], r)
		}
	}
	return out, nil
}

func drainName(i, n int) string {
	if n == 2 {
		return []string{"asynq", "fencedq"}[i]
	}
	return fmt.Sprint(i)
}

// noopTargets are the noop ratio targets by concurrency (the performance
// issue's: 3x asynq at concurrency 10, 6x at 50).
var noopTargets = map[int]float64{10: 3.0, 50: 6.0}

// NoopAt is the noop comparison at one concurrency.
type NoopAt struct {
	Concurrency int     `json:"concurrency"`
	Asynq       Variant `json:"asynq"`
	Fencedq     Variant `json:"fencedq"`
	// Ratio is fencedq jobs/s ÷ asynq jobs/s (target ≥ Target; 0: none).
	Ratio       float64 `json:"ratio"`
	Target      float64 `json:"target,omitempty"`
	MeetsTarget bool    `json:"meets_target"`
}

// NoopResult is the noop section: one comparison per concurrency.
type NoopResult struct {
	Jobs        int   `json:"jobs"`
	Repeat      int   `json:"repeat"`
	Concurrency []int `json:"concurrency"`
	// At holds each concurrency's comparison, keyed by the concurrency.
	At map[string]*NoopAt `json:"at"`
	// ScriptServerMicros is each script's execution time on the server
	// (SLOWLOG, threshold 0) during one extra untimed drain of each side at
	// the first concurrency; absent with --redis.
	ScriptServerMicros map[string]ScriptTime `json:"script_server_us,omitempty"`
}

func (e *bench) noop(ctx context.Context) (*NoopResult, error) {
	r := &NoopResult{Jobs: e.opts.jobs, Repeat: e.opts.repeat, Concurrency: e.opts.concurrencies, At: map[string]*NoopAt{}}
	for _, conc := range e.opts.concurrencies {
		runs, err := compare(ctx, e, e.single, []string{"default"}, e.opts.jobs, conc, nil, asynqDrain, fencedqDrain)
		if err != nil {
			return nil, err
		}
		at := &NoopAt{Concurrency: conc, Asynq: variantOf(runs[0]), Fencedq: variantOf(runs[1]), Target: noopTargets[conc]}
		at.Ratio = ratio(at.Fencedq.JobsPerSec, at.Asynq.JobsPerSec)
		at.MeetsTarget = at.Target == 0 || at.Ratio >= at.Target
		r.At[strconv.Itoa(conc)] = at
		e.progress("  concurrency %d: ratio fencedq/asynq %.3f", conc, at.Ratio)
	}
	var err error
	if r.ScriptServerMicros, err = e.scriptTimes(ctx, min(max(e.opts.jobs/4, 20), 2000), asynqDrain, fencedqDrain); err != nil {
		return nil, fmt.Errorf("script timing: %w", err)
	}
	return r, nil
}

// ClusterResult is the cluster section: the noop benchmark with jobs
// spread over several queues, on a 3-master cluster and on the single server.
type ClusterResult struct {
	Jobs        int `json:"jobs"`
	Repeat      int `json:"repeat"`
	Concurrency int `json:"concurrency"`
	Queues      int `json:"queues"`
	Masters     int `json:"masters"`
	// Single and Cluster hold asynq and fencedq on each deployment.
	Single  map[string]Variant `json:"single"`
	Cluster map[string]Variant `json:"cluster"`
	// Ratio is fencedq jobs/s on the cluster ÷ fencedq jobs/s on the single server.
	Ratio float64 `json:"ratio"`
	// AsynqRatio is the same for plain asynq.
	AsynqRatio float64 `json:"asynq_ratio"`
	// FencedqVsAsynq is fencedq ÷ asynq on the cluster.
	FencedqVsAsynq float64 `json:"fencedq_vs_asynq_on_cluster"`
}

func (e *bench) cluster(ctx context.Context) (*ClusterResult, error) {
	if e.clusterT == nil {
		if err := e.setupCluster(ctx); err != nil {
			return nil, err
		}
	}
	nq := e.opts.clusterQueues
	r := &ClusterResult{Jobs: e.opts.clusterJobs, Repeat: e.opts.repeat, Concurrency: e.opts.concurrency, Queues: nq,
		Masters: len(e.clusterT.masters), Single: map[string]Variant{}, Cluster: map[string]Variant{}}
	for _, t := range []*target{e.single, e.clusterT} {
		// Ledger keys are tagged {queue}: spread those evenly here; each run
		// picks a namespace that spreads its asynq keys ({ns/queue}) too.
		queues := pickQueues(t, nq)
		runs, err := compare(ctx, e, t, queues, e.opts.clusterJobs, e.opts.concurrency, nil, asynqDrain, fencedqDrain)
		if err != nil {
			return nil, err
		}
		dst := r.Single
		if t == e.clusterT {
			dst = r.Cluster
		}
		dst["asynq"], dst["fencedq"] = variantOf(runs[0]), variantOf(runs[1])
	}
	r.Ratio = ratio(r.Cluster["fencedq"].JobsPerSec, r.Single["fencedq"].JobsPerSec)
	r.AsynqRatio = ratio(r.Cluster["asynq"].JobsPerSec, r.Single["asynq"].JobsPerSec)
	r.FencedqVsAsynq = ratio(r.Cluster["fencedq"].JobsPerSec, r.Cluster["asynq"].JobsPerSec)
	return r, nil
}
