package bank_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/examples/bank"
	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fence/pgfence"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// helperEnv carries a helperConfig (as JSON) to a worker process.
const helperEnv = "FENCEDQ_BANK_HELPER"

// TestMain doubles as a worker process for the process-level tests: with
// FENCEDQ_BANK_HELPER set, the test binary runs a bank worker pool in the
// given mode instead of the tests.
func TestMain(m *testing.M) {
	if raw := os.Getenv(helperEnv); raw != "" {
		os.Exit(runHelper(raw))
	}
	os.Exit(m.Run())
}

// Worker modes, for helper processes and in-process pools alike.
const (
	// modeNormal records what it does and never blocks.
	modeNormal = "normal"
	// modePauseBeforeWrite, once the fence is raised, records "started" and
	// waits for an entry on the test's go list before writing; the test
	// SIGSTOPs the process meanwhile. The write then ignores the (cancelled) context, like
	// a naive handler.
	modePauseBeforeWrite = "pause-before-write"
	// modeBlockBeforeEffect records "started" and blocks forever: SIGKILLed
	// before its effect.
	modeBlockBeforeEffect = "block-before-effect"
	// modeBlockAfterEffect writes (the pgfence transaction commits), records
	// the write and blocks forever: SIGKILLed before the ledger commit.
	modeBlockAfterEffect = "block-after-effect"
)

// helperConfig configures a worker process.
type helperConfig struct {
	Mode        string        `json:"mode"`
	ID          string        `json:"id"` // worker id and event name
	Redis       string        `json:"redis"`
	NS          string        `json:"ns"`
	Store       string        `json:"store"` // postgres, redis or http
	PGURL       string        `json:"pg_url,omitempty"`
	PGSchema    string        `json:"pg_schema,omitempty"` // the test's schema: search_path
	ServiceURL  string        `json:"service_url,omitempty"`
	Maintenance bool          `json:"maintenance"`
	LeaseTTL    time.Duration `json:"lease_ttl"`
	Interval    time.Duration `json:"interval"`
}

// event is what workers record in the test's Redis list (eventsKey) as
// they run: "started" after the fence was raised, before the write;
// "write" after the store answered, with the result.
type event struct {
	Worker string `json:"worker"`
	Event  string `json:"event"`
	Job    string `json:"job"`
	Token  uint64 `json:"token,string"`
	Owner  string `json:"owner,omitempty"`
	Result string `json:"result,omitempty"` // applied, stale, already-applied, error: ...
	Stored uint64 `json:"stored,string,omitempty"`
}

func eventsKey(ns string) string { return ns + ":test:events" }
func goKey(ns string) string     { return ns + ":test:go" }

// probeStore wraps a bank.Store: it records every write and the start of
// every attempt, and stages pauses and crashes by mode.
type probeStore struct {
	bank.Store
	rdb  redis.UniversalClient
	ns   string
	id   string
	mode string
	// failFirst, when set, makes the first transfer fail with an unknown
	// outcome before reaching the store (the job becomes uncertain).
	failFirst bool
	failed    atomic.Bool
}

func (s *probeStore) emit(ctx context.Context, e event) {
	e.Worker = s.id
	b, _ := json.Marshal(e)
	s.rdb.RPush(context.WithoutCancel(ctx), eventsKey(s.ns), b)
}

// FenceOnAcquire forwards to the store (an embedded interface does not
// promote it).
func (s *probeStore) FenceOnAcquire(ctx context.Context, f fence.Fence) error {
	if r, ok := s.Store.(bank.FenceRaiser); ok {
		return r.FenceOnAcquire(ctx, f)
	}
	return nil
}

// Transfer writes ignoring ctx's cancellation, as a naive handler would:
// a paused worker that wakes up after losing its lease still tries. Only
// the fence stops it.
func (s *probeStore) Transfer(ctx context.Context, f fence.Fence, t bank.Transfer) error {
	if s.failFirst && s.failed.CompareAndSwap(false, true) {
		err := errors.New("connection reset by peer (staged)")
		s.emit(ctx, event{Event: "write", Job: f.OperationID, Token: uint64(f.Token), Owner: f.Owner, Result: "error: " + err.Error()})
		return err
	}
	err := s.Store.Transfer(context.WithoutCancel(ctx), f, t)
	e := event{Event: "write", Job: f.OperationID, Token: uint64(f.Token), Owner: f.Owner}
	var stale *fence.StaleError
	switch {
	case err == nil:
		e.Result = "applied"
	case errors.As(err, &stale):
		e.Result, e.Stored = "stale", uint64(stale.StoredToken)
	case errors.Is(err, fence.ErrStale):
		e.Result = "stale"
	case errors.Is(err, fence.ErrAlreadyApplied):
		e.Result = "already-applied"
	default:
		e.Result = "error: " + err.Error()
	}
	s.emit(ctx, e)
	if s.mode == modeBlockAfterEffect && err == nil {
		select {} // SIGKILLed here: effect committed, ledger not
	}
	return err
}

// beforeWrite is the bank.Worker hook: after the fence was raised, before
// the write.
func (s *probeStore) beforeWrite(ctx context.Context, j *jobs.Job[bank.Transfer]) {
	s.emit(ctx, event{Event: "started", Job: j.OperationID, Token: uint64(j.Token), Owner: j.Owner})
	switch s.mode {
	case modePauseBeforeWrite:
		// The test stops this process now, pushes to the go list while it
		// is stopped, and resumes it later: the entry is only read after
		// SIGCONT.
		if err := s.rdb.BLPop(context.WithoutCancel(ctx), 0, goKey(s.ns)).Err(); err != nil {
			s.emit(ctx, event{Event: "go", Job: j.OperationID, Result: "error: " + err.Error()})
		}
	case modeBlockBeforeEffect:
		select {} // SIGKILLed here: no effect
	}
}

// newTransferWorker returns the bank worker over s.
func newTransferWorker(s *probeStore) *bank.Worker {
	return &bank.Worker{Store: s, BeforeWrite: s.beforeWrite}
}

// effectLogOnly runs transfers without a Reconcile method, so the pool's
// resolver must ask Config.Maintenance.EffectLog.
type effectLogOnly struct{ w *bank.Worker }

func (e effectLogOnly) Work(ctx context.Context, j *jobs.Job[bank.Transfer]) error {
	return e.w.Work(ctx, j)
}

// openStore opens the store a helper process writes through.
func openStore(ctx context.Context, c helperConfig, rdb redis.UniversalClient) (bank.Store, error) {
	switch c.Store {
	case "redis":
		return bank.NewRedisStore(rdb, c.NS)
	case "http":
		return bank.NewHTTPStore(c.ServiceURL, &http.Client{Timeout: 10 * time.Second}), nil
	case "postgres":
		cfg, err := pgxpool.ParseConfig(c.PGURL)
		if err != nil {
			return nil, err
		}
		// pgtest isolates each test in its own schema through search_path;
		// the worker process must use the same one.
		cfg.ConnConfig.RuntimeParams["search_path"] = c.PGSchema
		cfg.MaxConns = 4
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			return nil, err
		}
		return bank.NewPostgresStore(ctx, pool, pgfence.Options{})
	}
	return nil, fmt.Errorf("unknown store %q", c.Store)
}

func runHelper(raw string) int {
	var c helperConfig
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		fmt.Fprintln(os.Stderr, "helper config:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go exitWithParent()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})).With("process", c.ID)
	rdb := redis.NewClient(&redis.Options{Addr: c.Redis})
	store, err := openStore(ctx, c, rdb)
	if err != nil {
		log.Error("open store", "error", err)
		return 2
	}
	p, err := worker.NewPool(rdb, worker.Config{
		Jobs: jobs.Config{Namespace: c.NS}, Concurrency: 2, LeaseTTL: c.LeaseTTL, WorkerID: c.ID,
		HandlerTimeout: 30 * time.Second, ShutdownTimeout: 2 * time.Second,
		RetryDelay:  func(int) time.Duration { return 200 * time.Millisecond },
		Logger:      log,
		Maintenance: worker.MaintenanceConfig{Disabled: !c.Maintenance, Interval: c.Interval},
	})
	if err != nil {
		log.Error("pool", "error", err)
		return 2
	}
	probe := &probeStore{Store: store, rdb: rdb, ns: c.NS, id: c.ID, mode: c.Mode}
	if err := worker.Register(p, jobs.Worker[bank.Transfer](newTransferWorker(probe))); err != nil {
		log.Error("register", "error", err)
		return 2
	}
	log.Info("helper ready", "mode", c.Mode, "store", c.Store, "maintenance", c.Maintenance)
	if err := p.Run(ctx); err != nil {
		log.Error("run", "error", err)
		return 1
	}
	return 0
}

// exitWithParent ends a helper process whose test binary went away (a
// killed or timed-out test run), so no worker outlives its test: the test
// holds the write end of the helper's stdin (startProc), and the kernel
// closes it when the test process ends, however it ends. Stdin then reads
// EOF.
func exitWithParent() {
	_, _ = io.Copy(io.Discard, os.Stdin)
	os.Exit(3)
}
