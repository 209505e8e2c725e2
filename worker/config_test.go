package worker_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// TestNewPoolRefusesTheJobsConfigTheClientRefuses: NewPool checks the
// jobs.Config it is given before filling defaults, so a retention the
// client refuses (negative, or under a second) is refused by the pool too,
// with the same error, instead of being replaced by the default.
func TestNewPoolRefusesTheJobsConfigTheClientRefuses(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	for name, jc := range map[string]jobs.Config{
		"negative retention":   {Namespace: ns, Retention: -time.Hour},
		"sub-second retention": {Namespace: ns, Retention: time.Millisecond},
		"negative replicas":    {Namespace: ns, Durability: jobs.Durability{Replicas: -1}},
		// Sentinel options no claim could take an epoch from: the pool
		// would start and fail every claim and leader election for ever.
		"no Sentinel address": {Namespace: ns, Sentinel: &redis.FailoverOptions{MasterName: "fq"}},
		"no master name":      {Namespace: ns, Sentinel: &redis.FailoverOptions{SentinelAddrs: []string{"127.0.0.1:26379"}}},
		"empty address":       {Namespace: ns, Sentinel: &redis.FailoverOptions{MasterName: "fq", SentinelAddrs: []string{""}}},
	} {
		want := jc.Validate()
		if !errors.Is(want, jobs.ErrInvalid) {
			t.Fatalf("%s: jobs.Config.Validate: %v, want ErrInvalid", name, want)
		}
		if _, err := jobs.NewClient(rdb, jc).Enqueue(ctx, panicArgs{}); err == nil || err.Error() != want.Error() {
			t.Errorf("%s: the client's enqueue: %v, want %v", name, err, want)
		}
		p, err := worker.NewPool(rdb, worker.Config{Jobs: jc})
		if p != nil || !errors.Is(err, jobs.ErrInvalid) || err.Error() != want.Error() {
			t.Errorf("%s: NewPool: %v, %v; want the client's error %v", name, p, err, want)
		}
	}
	if _, err := worker.NewPool(rdb, worker.Config{Jobs: jobs.Config{Namespace: ns, Retention: time.Hour}}); err != nil {
		t.Fatalf("a valid retention: %v", err)
	}
}

// TestNewPoolRefusesAbsurdConcurrencyAndWorkerIDs: a concurrency no
// process can hold is refused with an error instead of panicking (or
// exhausting memory) while the pool is built; a poll or maintenance
// interval so short its loop would spin on Redis calls (1 ns: tens of
// thousands of commands a second from one idle pool) is refused; a worker
// id that cannot
// name a lease owner (a line break: every resource lease and the leader
// election would fail at run time, leaving jobs put back forever) or
// reach a terminal or an HTTP header as it is (control characters) is
// refused before anything runs.
func TestNewPoolRefusesAbsurdConcurrencyAndWorkerIDs(t *testing.T) {
	rdb, ns := redistest.New(t)
	for name, cfg := range map[string]worker.Config{
		"concurrency 2^50":       {Concurrency: 1 << 50},
		"concurrency over max":   {Concurrency: worker.MaxConcurrency + 1},
		"worker id line break":   {WorkerID: "pool\n1"},
		"worker id escape":       {WorkerID: "pool\x1b[2J"},
		"worker id tab":          {WorkerID: "pool\t1"},
		"worker id not UTF-8":    {WorkerID: "pool\xff"},
		"worker id too long":     {WorkerID: strings.Repeat("w", worker.MaxWorkerIDLen+1)},
		"worker id blank spaces": {WorkerID: "   "},
		"poll interval 1ns":      {FetchPollInterval: time.Nanosecond},
		"maintenance 1µs":        {Maintenance: worker.MaintenanceConfig{Interval: time.Microsecond}},
		"prune interval 1ms":     {Maintenance: worker.MaintenanceConfig{PruneInterval: time.Millisecond}},
	} {
		cfg.Jobs = jobs.Config{Namespace: ns}
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s: NewPool panicked: %v", name, r)
				}
			}()
			p, err := worker.NewPool(rdb, cfg)
			if p != nil || err == nil {
				t.Errorf("%s: NewPool accepted it", name)
			}
		}()
	}
	for _, cfg := range []worker.Config{{Concurrency: worker.MaxConcurrency}, {WorkerID: "host-1/päckchen.42"},
		{FetchPollInterval: worker.MinPollInterval, Maintenance: worker.MaintenanceConfig{Interval: worker.MinPollInterval, PruneInterval: worker.MinPollInterval}}} {
		cfg.Jobs = jobs.Config{Namespace: ns}
		if _, err := worker.NewPool(rdb, cfg); err != nil {
			t.Errorf("%+v: %v", cfg, err)
		}
	}
}

// A pool whose context ends while it starts returns nil, as one stopped
// later does, not the start's "context canceled".
func TestRunStoppedWhileStartingReturnsNil(t *testing.T) {
	e := newEnv(t)
	p := e.pool(e.config())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.Run(ctx); err != nil {
		t.Fatalf("Run with an ended context: %v, want nil", err)
	}
}

// TestNewPoolErrorsMatchErrConfig: every refusal of NewPool's arguments
// matches worker.ErrConfig, so a caller can tell a configuration mistake
// from a Redis error with errors.Is; a nil Redis client (an interface or a
// typed nil pointer) is refused there instead of panicking at Run; the
// refusals of the jobs config and queue names still match jobs.ErrInvalid.
func TestNewPoolErrorsMatchErrConfig(t *testing.T) {
	rdb, ns := redistest.New(t)
	var nilClient *redis.Client
	for _, c := range []struct {
		name    string
		rdb     redis.UniversalClient
		cfg     worker.Config
		invalid bool // matches jobs.ErrInvalid too
	}{
		{name: "nil client", cfg: worker.Config{}},
		{name: "typed nil client", rdb: nilClient, cfg: worker.Config{}},
		{name: "jobs config", rdb: rdb, cfg: worker.Config{Jobs: jobs.Config{Namespace: "bad ns"}}, invalid: true},
		{name: "queue name", rdb: rdb, cfg: worker.Config{Queues: map[string]int{"bad queue": 1}}, invalid: true},
		{name: "queue priority", rdb: rdb, cfg: worker.Config{Queues: map[string]int{"q": 0}}},
		{name: "negative duration", rdb: rdb, cfg: worker.Config{HandlerTimeout: -time.Second}},
		{name: "worker id", rdb: rdb, cfg: worker.Config{WorkerID: "a\nb"}},
		{name: "nil middleware", rdb: rdb, cfg: worker.Config{Middleware: []worker.Middleware{nil}}},
		{name: "nil enqueue middleware", rdb: rdb, cfg: worker.Config{Jobs: jobs.Config{EnqueueMiddleware: []jobs.EnqueueMiddleware{nil}}}, invalid: true},
		{name: "nil outbox", rdb: rdb, cfg: worker.Config{Maintenance: worker.MaintenanceConfig{Outboxes: []worker.OutboxRelay{nil}}}},
		{name: "poll interval", rdb: rdb, cfg: worker.Config{FetchPollInterval: time.Nanosecond}},
		{name: "maintenance interval", rdb: rdb, cfg: worker.Config{Maintenance: worker.MaintenanceConfig{Interval: 200 * 24 * time.Hour}}},
		{name: "negative concurrency", rdb: rdb, cfg: worker.Config{Concurrency: -1}},
		{name: "concurrency", rdb: rdb, cfg: worker.Config{Concurrency: worker.MaxConcurrency + 1}},
		{name: "lease TTL", rdb: rdb, cfg: worker.Config{LeaseTTL: time.Millisecond}},
		{name: "effect retention", rdb: rdb, cfg: worker.Config{Maintenance: worker.MaintenanceConfig{EffectRetention: time.Second}}},
		{name: "unknown kind defers", rdb: rdb, cfg: worker.Config{UnknownKindDefers: -2}},
		{name: "fetch batch", rdb: rdb, cfg: worker.Config{FetchBatch: -1}},
	} {
		if c.cfg.Jobs.Namespace == "" {
			c.cfg.Jobs.Namespace = ns
		}
		p, err := worker.NewPool(c.rdb, c.cfg)
		if p != nil || !errors.Is(err, worker.ErrConfig) {
			t.Errorf("%s: NewPool: %v, %v; want an error matching ErrConfig", c.name, p, err)
			continue
		}
		if c.invalid != errors.Is(err, jobs.ErrInvalid) {
			t.Errorf("%s: %v: matches jobs.ErrInvalid %v, want %v", c.name, err, !c.invalid, c.invalid)
		}
		if strings.TrimSpace(err.Error()) == "" || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error text %q", c.name, err)
		}
	}
	if _, err := worker.NewPool(rdb, worker.Config{Jobs: jobs.Config{Namespace: ns}}); err != nil {
		t.Fatalf("the zero config: %v", err)
	}
}

// TestNilPoolFailsWithErrConfig: the pool of a NewPool call whose error
// was dropped (pool, _ := worker.NewPool(...), as short snippets do) is
// nil; Register, AddPeriodic and Run on it return an error matching
// ErrConfig instead of panicking with a nil dereference.
func TestNilPoolFailsWithErrConfig(t *testing.T) {
	rdb, _ := redistest.New(t)
	p, err := worker.NewPool(rdb, worker.Config{Jobs: jobs.Config{Namespace: "bad ns"}})
	if p != nil || !errors.Is(err, worker.ErrConfig) {
		t.Fatalf("NewPool: %v, %v; want a nil pool and ErrConfig", p, err)
	}
	work := jobs.WorkFunc[effectArgs](func(context.Context, *jobs.Job[effectArgs]) error { return nil })
	if err := worker.Register(p, work); !errors.Is(err, worker.ErrConfig) {
		t.Errorf("Register on a nil pool: %v, want ErrConfig", err)
	}
	if err := p.AddPeriodic(worker.Periodic(worker.Every(time.Minute), effectArgs{Name: "tick"})); !errors.Is(err, worker.ErrConfig) {
		t.Errorf("AddPeriodic on a nil pool: %v, want ErrConfig", err)
	}
	if err := p.Run(t.Context()); !errors.Is(err, worker.ErrConfig) {
		t.Errorf("Run on a nil pool: %v, want ErrConfig", err)
	}
	if id := p.ID(); id != "" {
		t.Errorf("ID of a nil pool: %q", id)
	}
}

// TestZeroPoolFailsWithErrConfig: a Pool NewPool did not make (var p
// worker.Pool, or &worker.Pool{}) is refused by Register, AddPeriodic and
// Run with an error matching ErrConfig that says to use NewPool, instead of
// panicking; the pool NewPool makes over the same Redis runs.
func TestZeroPoolFailsWithErrConfig(t *testing.T) {
	rdb, ns := redistest.New(t)
	p := &worker.Pool{}
	work := jobs.WorkFunc[effectArgs](func(context.Context, *jobs.Job[effectArgs]) error { return nil })
	calls := map[string]func() error{
		"Register": func() error { return worker.Register(p, work) },
		"AddPeriodic": func() error {
			return p.AddPeriodic(worker.Periodic(worker.Every(time.Minute), effectArgs{Name: "tick"}))
		},
		"Run": func() error { return p.Run(t.Context()) },
	}
	for name, call := range calls {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s on a zero pool panicked: %v", name, r)
				}
			}()
			if err := call(); !errors.Is(err, worker.ErrConfig) || !strings.Contains(err.Error(), "NewPool") {
				t.Errorf("%s on a zero pool: %v, want ErrConfig saying to use NewPool", name, err)
			}
		}()
	}
	made, err := worker.NewPool(rdb, worker.Config{Jobs: jobs.Config{Namespace: ns}})
	if err != nil {
		t.Fatal(err)
	}
	if err := worker.Register(made, work); err != nil {
		t.Fatalf("Register on the pool NewPool made: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := made.Run(ctx); err != nil {
		t.Fatalf("Run of the pool NewPool made, its context ended: %v", err)
	}
}

// TestNilPeriodicOptionsAreRefused: a nil PeriodicOption, or a nil
// jobs.Option given to EnqueueOptions, makes AddPeriodic refuse the job
// (nothing registered) instead of panicking in Periodic.
func TestNilPeriodicOptionsAreRefused(t *testing.T) {
	rdb, ns := redistest.New(t)
	p, err := worker.NewPool(rdb, worker.Config{Jobs: jobs.Config{Namespace: ns}})
	if err != nil {
		t.Fatal(err)
	}
	var (
		popt worker.PeriodicOption
		jopt jobs.Option
	)
	if err := p.AddPeriodic(worker.Periodic(worker.Every(time.Minute), effectArgs{Name: "tick"}, popt)); !errors.Is(err, worker.ErrSchedule) {
		t.Errorf("a nil PeriodicOption: %v, want ErrSchedule", err)
	}
	if err := p.AddPeriodic(worker.Periodic(worker.Every(time.Minute), effectArgs{Name: "tick"}, worker.EnqueueOptions(jopt))); !errors.Is(err, jobs.ErrInvalid) {
		t.Errorf("a nil jobs.Option: %v, want ErrInvalid", err)
	}
	if err := p.AddPeriodic(worker.Periodic(worker.Every(time.Minute), effectArgs{Name: "tick"}, worker.ScheduleID("tick"))); err != nil {
		t.Errorf("the schedule without the nil options (nothing registered before): %v", err)
	}
}

// TestRunAfterStopSaysThePoolRanOnce: a pool that ran and stopped is not
// run again; Run and Register say so (ErrRunning, "has run") instead of
// claiming the stopped pool is running.
func TestRunAfterStopSaysThePoolRanOnce(t *testing.T) {
	e := newEnv(t)
	p := e.pool(e.config())
	ran := make(chan struct{}, 1)
	if err := worker.Register(p, jobs.WorkFunc[effectArgs](func(context.Context, *jobs.Job[effectArgs]) error {
		ran <- struct{}{}
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	stop := e.start(p)
	e.enqueue(effectArgs{Name: "once"})
	select {
	case <-ran:
	case <-time.After(30 * time.Second):
		t.Fatal("the job did not run")
	}
	stop()
	err := p.Run(context.Background())
	if !errors.Is(err, worker.ErrRunning) || !strings.Contains(err.Error(), "has run") || !strings.Contains(err.Error(), "NewPool") {
		t.Fatalf("Run after stop: %v, want ErrRunning saying the pool has run and to build another with NewPool", err)
	}
	if err := worker.Register(p, jobs.WorkFunc[panicArgs](func(context.Context, *jobs.Job[panicArgs]) error { return nil })); !errors.Is(err, worker.ErrRunning) {
		t.Fatalf("Register after stop: %v, want ErrRunning", err)
	}
}

// TestRunStoppedWhileStartingHasRun: a Run whose context ended before the
// pool started returns nil, and the pool has run, as one stopped later
// has: a second Run and a Register get ErrRunning, instead of the answer
// depending on whether the stop came before or after the start.
func TestRunStoppedWhileStartingHasRun(t *testing.T) {
	e := newEnv(t)
	p := e.pool(e.config())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.Run(ctx); err != nil {
		t.Fatalf("Run with its context ended: %v, want nil", err)
	}
	if err := worker.Register(p, jobs.WorkFunc[panicArgs](func(context.Context, *jobs.Job[panicArgs]) error { return nil })); !errors.Is(err, worker.ErrRunning) {
		t.Fatalf("Register after a Run stopped while starting: %v, want ErrRunning", err)
	}
	if err := p.Run(ctx); !errors.Is(err, worker.ErrRunning) {
		t.Fatalf("Run after a Run stopped while starting: %v, want ErrRunning", err)
	}
}

// TestSafetyMarginAboveHalfTheTTLIsRefused: a SafetyMargin above half the
// LeaseTTL (which was capped at half, silently) is refused by NewPool with
// an error matching ErrConfig that names both; half the TTL, and the
// default margin with the shortest TTL, are accepted.
func TestSafetyMarginAboveHalfTheTTLIsRefused(t *testing.T) {
	rdb, ns := redistest.New(t)
	for _, cfg := range []worker.Config{
		{LeaseTTL: time.Second, SafetyMargin: 2 * time.Second},
		{LeaseTTL: time.Second, SafetyMargin: 501 * time.Millisecond},
		{SafetyMargin: worker.DefaultLeaseTTL}, // the default TTL
	} {
		cfg.Jobs.Namespace = ns
		p, err := worker.NewPool(rdb, cfg)
		if p != nil || !errors.Is(err, worker.ErrConfig) || !strings.Contains(err.Error(), "safety margin") {
			t.Errorf("TTL %v, margin %v: NewPool: %v, %v; want an error matching ErrConfig naming the safety margin", cfg.LeaseTTL, cfg.SafetyMargin, p, err)
		}
	}
	for _, cfg := range []worker.Config{
		{LeaseTTL: time.Second, SafetyMargin: 500 * time.Millisecond},
		{LeaseTTL: worker.MinLeaseTTL},
	} {
		cfg.Jobs.Namespace = ns
		if _, err := worker.NewPool(rdb, cfg); err != nil {
			t.Errorf("TTL %v, margin %v: %v", cfg.LeaseTTL, cfg.SafetyMargin, err)
		}
	}
}

// TestNewPoolNamesTheWrongField: NewPool's error names the one field it
// refuses and its value, as ErrConfig promises, for each count and
// duration that must not be negative; with several fields wrong, the same
// one is named every time (the first in the Config's order).
func TestNewPoolNamesTheWrongField(t *testing.T) {
	rdb, ns := redistest.New(t)
	for want, cfg := range map[string]worker.Config{
		"fetch batch -1 is negative":                     {FetchBatch: -1},
		"lease TTL 24h0m0.001s above 24h0m0s":            {LeaseTTL: worker.MaxLeaseTTL + time.Millisecond},
		"complete batch -2 is negative":                  {CompleteBatch: -2},
		"maintenance max reconcile tries -3 is negative": {Maintenance: worker.MaintenanceConfig{MaxReconcileTries: -3}},
		"shutdown timeout -1s is negative":               {ShutdownTimeout: -time.Second},
		"handler timeout -1s is negative": {HandlerTimeout: -time.Second, ShutdownTimeout: -time.Second,
			LeaseWait: -time.Second, Maintenance: worker.MaintenanceConfig{UncommittedGrace: -time.Second}},
	} {
		cfg.Jobs = jobs.Config{Namespace: ns}
		for range 10 {
			_, err := worker.NewPool(rdb, cfg)
			if !errors.Is(err, worker.ErrConfig) || err.Error() != "worker: "+want {
				t.Errorf("NewPool: %v; want ErrConfig saying %q", err, want)
				break
			}
		}
	}
}
