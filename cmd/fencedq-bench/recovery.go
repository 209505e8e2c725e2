package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// roleEnv marks a process started as a benchmark worker (the test binary
// checks it in TestMain).
const roleEnv = "FENCEDQ_BENCH_ROLE"

// mode is one recovery variant.
type mode struct {
	name string
	// fencedq is false for plain asynq.
	fencedq bool
	// ttl is the fencedq lease TTL.
	ttl time.Duration
}

func parseMode(s string) (mode, error) {
	if s == "asynq" {
		return mode{name: s}, nil
	}
	if v, ok := strings.CutPrefix(s, "fencedq-"); ok {
		ttl, err := time.ParseDuration(v)
		if err == nil && ttl >= 100*time.Millisecond {
			return mode{name: s, fencedq: true, ttl: ttl}, nil
		}
	}
	return mode{}, fmt.Errorf("recovery mode %q: want asynq or fencedq-<lease TTL ≥ 100ms>, e.g. fencedq-2s", s)
}

func (m mode) timeout(flag time.Duration) time.Duration {
	switch {
	case flag > 0:
		return flag
	case m.fencedq:
		return 10*m.ttl + 10*time.Second
	}
	// asynq: its 30s lease is reclaimed by a recoverer that runs every
	// minute and takes leases that expired 30s ago or more.
	return 150 * time.Second
}

// sleepArgs is the recovery job: it records that it started, then sleeps.
type sleepArgs struct {
	N int `json:"n"`
}

// Kind implements jobs.JobArgs.
func (sleepArgs) Kind() string { return "bench_sleep" }

// sleepWorker records each start in a Redis list ("<job id> <pid> <unix ns>")
// and then sleeps until its context ends.
type sleepWorker struct {
	rdb  *redis.Client
	sink string
}

func (w sleepWorker) started(ctx context.Context, id string) error {
	return w.rdb.RPush(ctx, w.sink, fmt.Sprintf("%s %d %d", id, os.Getpid(), time.Now().UnixNano())).Err()
}

// Work implements jobs.Worker.
func (w sleepWorker) Work(ctx context.Context, j *jobs.Job[sleepArgs]) error {
	if err := w.started(ctx, j.ID); err != nil {
		return err
	}
	<-ctx.Done()
	return ctx.Err()
}

// Reconcile implements jobs.Reconciler: the job has no side effect, so an
// attempt cut short never applied it and the job can run again.
func (w sleepWorker) Reconcile(context.Context, *jobs.Job[sleepArgs]) (jobs.Verdict, error) {
	return jobs.NotApplied, nil
}

// workerMain is the hidden "worker" subcommand: a worker process for the
// recovery section. It prints "ready" once it serves the queue and runs
// until killed (or SIGTERM).
func workerMain(args []string) int {
	fs := flag.NewFlagSet("fencedq-bench worker", flag.ContinueOnError)
	modeName := fs.String("mode", "fencedq", "asynq or fencedq")
	addr := fs.String("redis", "127.0.0.1:6379", "Redis address")
	ns := fs.String("ns", "", "fencedq namespace, or asynq queue name")
	ttl := fs.Duration("ttl", 2*time.Second, "fencedq lease TTL")
	sink := fs.String("sink", "", "Redis list receiving one line per job start")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *ns == "" || *sink == "" {
		fmt.Fprintln(os.Stderr, "worker: --ns and --sink are required")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rdb := redis.NewClient(&redis.Options{Addr: *addr})
	defer rdb.Close()
	w := sleepWorker{rdb: rdb, sink: *sink}
	switch *modeName {
	case "asynq":
		srv := asynq.NewServerFromRedisClient(rdb, asynqConfig(1, []string{*ns}))
		err := srv.Start(asynq.HandlerFunc(func(ctx context.Context, _ *asynq.Task) error {
			id, _ := asynq.GetTaskID(ctx)
			if err := w.started(ctx, id); err != nil {
				return err
			}
			<-ctx.Done()
			return ctx.Err()
		}))
		if err != nil {
			fmt.Fprintln(os.Stderr, "worker:", err)
			return 1
		}
		fmt.Println("ready")
		<-ctx.Done()
		srv.Shutdown()
	case "fencedq":
		pool, err := worker.NewPool(rdb, worker.Config{
			Jobs: jobs.Config{Namespace: *ns}, Concurrency: 1, LeaseTTL: *ttl, HandlerTimeout: time.Hour,
			ShutdownTimeout: time.Second, Logger: discardLogger,
			Maintenance: worker.MaintenanceConfig{Interval: time.Second},
		})
		if err == nil {
			err = worker.Register[sleepArgs](pool, w)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "worker:", err)
			return 1
		}
		ran := make(chan error, 1)
		go func() { ran <- pool.Run(ctx) }()
		select {
		case err := <-ran:
			fmt.Fprintln(os.Stderr, "worker: pool stopped:", err)
			return 1
		case <-time.After(300 * time.Millisecond): // the pool has subscribed and claimed by now
		}
		fmt.Println("ready")
		if err := <-ran; err != nil {
			fmt.Fprintln(os.Stderr, "worker:", err)
			return 1
		}
	default:
		fmt.Fprintf(os.Stderr, "worker: unknown mode %q\n", *modeName)
		return 2
	}
	return 0
}

// workerProc is a running worker process.
type workerProc struct {
	cmd    *exec.Cmd
	ready  chan struct{}
	exited <-chan struct{}
	stderr *tailBuffer
}

// tailBuffer keeps the last 4 KiB written to it.
type tailBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > 4096 {
		t.b = t.b[len(t.b)-4096:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.b))
}

// spawn re-runs this executable as "worker".
func (e *bench) spawn(m mode, ns, sink string) (*workerProc, error) {
	kind := "asynq"
	if m.fencedq {
		kind = "fencedq"
	}
	cmd := exec.Command(e.workerExe, "worker", "--mode", kind, "--redis", e.singleAddr,
		"--ns", ns, "--ttl", m.ttl.String(), "--sink", sink)
	cmd.Env = append(os.Environ(), roleEnv+"=worker")
	p := &workerProc{cmd: cmd, ready: make(chan struct{}), stderr: &tailBuffer{}}
	cmd.Stderr = p.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if p.exited, err = e.kids.start(cmd); err != nil {
		return nil, err
	}
	go func() {
		sc := bufio.NewScanner(out)
		once := sync.Once{}
		for sc.Scan() {
			if sc.Text() == "ready" {
				once.Do(func() { close(p.ready) })
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	return p, nil
}

func (p *workerProc) waitReady(ctx context.Context, within time.Duration) error {
	select {
	case <-p.ready:
		return nil
	case <-p.exited:
		return fmt.Errorf("worker process exited before it was ready: %s", p.stderr)
	case <-time.After(within):
		return fmt.Errorf("worker process not ready within %v: %s", within, p.stderr)
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *workerProc) kill() {
	_ = p.cmd.Process.Kill()
	select {
	case <-p.exited:
	case <-time.After(5 * time.Second):
	}
}

// start is one "started" line from the sink.
type start struct {
	job string
	pid int
	at  time.Time
}

func nextStart(ctx context.Context, rdb redis.UniversalClient, sink string, within time.Duration) (start, error) {
	v, err := rdb.BLPop(ctx, within, sink).Result()
	if err != nil {
		return start{}, err
	}
	f := strings.Fields(v[1])
	if len(f) != 3 {
		return start{}, fmt.Errorf("bad start line %q", v[1])
	}
	pid, _ := strconv.Atoi(f[1])
	ns, _ := strconv.ParseInt(f[2], 10, 64)
	return start{job: f[0], pid: pid, at: time.Unix(0, ns)}, nil
}

// errNoRecovery marks a kill after which the job did not run again in time.
var errNoRecovery = errors.New("no recovery")

// trial is one kill: worker A runs the job, spare worker B is ready, then A
// gets SIGKILL and the trial waits for the job to start again on B. setup
// is signalled once everything up to the kill is in place; the kill waits
// for go.
func (e *bench) trial(ctx context.Context, m mode, setup chan<- error, kill <-chan struct{}) (time.Duration, error) {
	rdb := e.single.rdb
	ns := uniq("rcb")
	sink := ns + ":started"
	defer deleteMatching(context.WithoutCancel(ctx), rdb, ns, []string{ns, ns + "/" + jobs.DefaultQueue})
	var a, b *workerProc
	defer func() {
		for _, p := range []*workerProc{a, b} {
			if p != nil {
				p.kill()
			}
		}
	}()
	err := func() error {
		var err error
		if a, err = e.spawn(m, ns, sink); err != nil {
			return err
		}
		if err := a.waitReady(ctx, 30*time.Second); err != nil {
			return err
		}
		if m.fencedq {
			c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
			_, err = c.Enqueue(ctx, sleepArgs{N: 1})
			_ = c.Close()
		} else {
			payload, _ := json.Marshal(sleepArgs{N: 1})
			_, err = asynq.NewClientFromRedisClient(rdb).EnqueueContext(ctx,
				asynq.NewTask(sleepArgs{}.Kind(), payload), asynq.Queue(ns), asynq.MaxRetry(jobs.DefaultMaxRetries))
		}
		if err != nil {
			return err
		}
		first, err := nextStart(ctx, rdb, sink, 30*time.Second)
		if err != nil {
			return fmt.Errorf("job did not start on the first worker: %w (%s)", err, a.stderr)
		}
		if first.pid != a.cmd.Process.Pid {
			return fmt.Errorf("job started in pid %d, not in the first worker %d", first.pid, a.cmd.Process.Pid)
		}
		if b, err = e.spawn(m, ns, sink); err != nil {
			return err
		}
		return b.waitReady(ctx, 30*time.Second)
	}()
	setup <- err
	if err != nil {
		return 0, err
	}
	select {
	case <-kill:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	t0 := time.Now()
	a.kill()
	timeout := m.timeout(e.opts.recoveryTimeout)
	deadline := time.Now().Add(timeout)
	again, err := nextStart(ctx, rdb, sink, timeout)
	// A start in the first worker from before the kill is a lease that
	// lapsed on a starved machine (the worker took the job again itself):
	// the recovery still to measure is the one after the kill.
	for err == nil && again.pid == a.cmd.Process.Pid && again.at.Before(t0) {
		again, err = nextStart(ctx, rdb, sink, max(time.Until(deadline), time.Millisecond))
	}
	if errors.Is(err, redis.Nil) {
		return 0, fmt.Errorf("%w within %v", errNoRecovery, timeout)
	}
	if err != nil {
		return 0, err
	}
	if again.pid != b.cmd.Process.Pid {
		return 0, fmt.Errorf("job restarted in pid %d, not in the spare worker %d", again.pid, b.cmd.Process.Pid)
	}
	return again.at.Sub(t0), nil
}

// RecoveryVariant is one recovery variant's figures.
type RecoveryVariant struct {
	Mode string `json:"mode"`
	// LeaseTTLSec is fencedq's lease TTL (0 for asynq, whose lease is a
	// fixed 30s).
	LeaseTTLSec float64 `json:"lease_ttl_s"`
	Kills       int     `json:"kills"`
	Recovered   int     `json:"recovered"`
	// MedianSec and WorstSec are over the recovered kills: from SIGKILL of
	// the worker running the job to the job's handler starting on the spare.
	MedianSec  float64   `json:"median_s"`
	WorstSec   float64   `json:"worst_s"`
	SamplesSec []float64 `json:"samples_s"`
	TimeoutSec float64   `json:"timeout_s"`
	// TargetSec is fencedq's target for the worst recovery: lease TTL + 1 s
	// (0 for asynq); MeetsTarget says whether every kill recovered within it.
	TargetSec   float64 `json:"target_s,omitempty"`
	MeetsTarget bool    `json:"meets_target"`
	// Note explains kills that did not recover.
	Note string `json:"note,omitempty"`
}

// RecoveryResult is the recovery section.
type RecoveryResult struct {
	Kills              int                         `json:"kills"`
	ReconcilerInterval float64                     `json:"reconciler_interval_s"`
	Variants           map[string]*RecoveryVariant `json:"variants"`
	// Ratio is each fencedq variant's median ÷ asynq's median (lower is
	// faster recovery); absent where a side did not recover.
	Ratio map[string]float64 `json:"ratio"`
}

func (e *bench) recovery(ctx context.Context) (*RecoveryResult, error) {
	r := &RecoveryResult{Kills: e.opts.kills, ReconcilerInterval: 1, Variants: map[string]*RecoveryVariant{}, Ratio: map[string]float64{}}
	type outcome struct {
		mode mode
		d    time.Duration
		err  error
	}
	var modes []mode
	for _, s := range e.opts.recoveryModes {
		m, _ := parseMode(s)
		modes = append(modes, m)
	}
	n := len(modes) * e.opts.kills
	setup := make(chan error, n)
	kill := make(chan struct{})
	results := make(chan outcome, n)
	for _, m := range modes {
		for range e.opts.kills {
			go func() {
				d, err := e.trial(ctx, m, setup, kill)
				results <- outcome{m, d, err}
			}()
		}
	}
	// Every trial gets its job running on worker A and its spare B ready;
	// then all the As are killed at once.
	var setupErr error
	for range n {
		if err := <-setup; err != nil && setupErr == nil {
			setupErr = err
		}
	}
	e.progress("  %d kills set up (%d worker processes); killing", n, 2*n)
	close(kill)
	samples := map[string][]float64{}
	fails := map[string][]string{}
	for range n {
		o := <-results
		if o.err != nil {
			fails[o.mode.name] = append(fails[o.mode.name], o.err.Error())
			continue
		}
		samples[o.mode.name] = append(samples[o.mode.name], round(o.d.Seconds(), 3))
	}
	if setupErr != nil {
		e.progress("  some kills could not be set up: %v", setupErr)
	}
	for _, m := range modes {
		v := &RecoveryVariant{Mode: m.name, LeaseTTLSec: m.ttl.Seconds(), Kills: e.opts.kills,
			TimeoutSec: m.timeout(e.opts.recoveryTimeout).Seconds()}
		xs := samples[m.name]
		slices.Sort(xs)
		v.SamplesSec, v.Recovered = xs, len(xs)
		if len(xs) > 0 {
			v.MedianSec, v.WorstSec = round(median(xs), 3), xs[len(xs)-1]
		}
		if m.fencedq {
			v.TargetSec = (m.ttl + time.Second).Seconds()
			v.MeetsTarget = v.Recovered == v.Kills && v.WorstSec <= v.TargetSec
		}
		if f := fails[m.name]; len(f) > 0 {
			v.Note = fmt.Sprintf("%d of %d kills: %s", len(f), e.opts.kills, summarize(f))
		}
		e.progress("  %s: %d/%d recovered, median %.2fs, worst %.2fs %s", m.name, v.Recovered, v.Kills, v.MedianSec, v.WorstSec, v.Note)
		r.Variants[m.name] = v
	}
	if base := r.Variants["asynq"]; base != nil && base.Recovered > 0 {
		for name, v := range r.Variants {
			if name != "asynq" && v.Recovered > 0 {
				r.Ratio[name] = ratio(v.MedianSec, base.MedianSec)
			}
		}
	}
	return r, nil
}

// summarize joins distinct error texts, each once.
func summarize(errs []string) string {
	seen := map[string]int{}
	var order []string
	for _, s := range errs {
		if seen[s] == 0 {
			order = append(order, s)
		}
		seen[s]++
	}
	parts := make([]string, len(order))
	for i, s := range order {
		parts[i] = s
		if seen[s] > 1 {
			parts[i] = fmt.Sprintf("%s (×%d)", s, seen[s])
		}
	}
	return strings.Join(parts, "; ")
}
