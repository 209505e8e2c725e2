package maintenance

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/durable"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/metrics"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/syncbuf"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
)

// fixture is one test's Redis, namespace, ledger, lease manager, metrics,
// captured logs and decision signal: what New needs to build a leader
// whose services a test runs one pass at a time.
type fixture struct {
	t       *testing.T
	ctx     context.Context
	rdb     *redis.Client
	ns      string
	ledger  *ledger.Ledger
	client  *jobs.Client
	leases  *lease.Manager
	metrics *metrics.Set
	logs    *syncbuf.Buffer
	decided testsignal.Signal[Decision]
}

func newFixture(t *testing.T) *fixture {
	rdb, ns := redistest.New(t)
	return newFixtureOn(t, rdb, ns, jobs.Config{Namespace: ns})
}

func newFixtureOn(t *testing.T, rdb *redis.Client, ns string, jc jobs.Config) *fixture {
	reg := prometheus.NewRegistry()
	jc.Registerer = reg
	client := jobs.NewClient(rdb, jc)
	f := &fixture{t: t, ctx: context.Background(), rdb: rdb, ns: ns, ledger: ledger.New(rdb, ledger.Config{Namespace: jc.Namespace, Retention: jc.Retention, Sentinel: jc.Sentinel,
		Durability: durable.Options(jc.Durability)}), client: client,
		leases: lease.NewManager(rdb, lease.Config{Namespace: ns}), metrics: metrics.New(reg), logs: &syncbuf.Buffer{}}
	f.decided.Init(t, "maintenance decision counted")
	t.Cleanup(func() {
		_ = client.Close()
		if t.Failed() {
			t.Logf("maintenance logs:\n%s", f.logs.String())
		}
	})
	return f
}

// config is a leader's config whose loops would never tick on their own:
// tests call the passes themselves.
func (f *fixture) config() Config {
	return Config{
		WorkerID: "pool-a", LeaseTTL: time.Minute, Interval: time.Hour, MaxReconcileTries: 3,
		ReconcileTimeout: 5 * time.Second, PruneInterval: time.Hour, UncommittedGrace: time.Hour,
		Reconcile: func(string) ReconcileFunc { return nil },
		Logger:    slog.New(slog.NewJSONHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Metrics:   f.metrics, Decided: &f.decided,
	}
}

func (f *fixture) leader(cfg Config) *Leader { return New(cfg, f.ledger, f.leases) }

// lead takes the namespace's leader lease for owner, as the elector does,
// and returns its token.
func (f *fixture) lead(owner string) lease.Token {
	f.t.Helper()
	l, err := f.leases.Acquire(f.ctx, ledger.LeaderResource, owner, time.Minute)
	if err != nil {
		f.t.Fatal(err)
	}
	return l.Token
}

func (f *fixture) enqueue(kind string, opts ...jobs.Option) string {
	f.t.Helper()
	res, err := f.client.EnqueueRaw(f.ctx, kind, []byte(`{}`), append(opts, jobs.Unchecked())...)
	if err != nil {
		f.t.Fatal(err)
	}
	return res.JobID
}

// claim starts an attempt on queue q's next due job with lease ttl (zero:
// its deadline is already due) and returns the job's id.
func (f *fixture) claim(q string, ttl time.Duration) string {
	f.t.Helper()
	res, err := f.ledger.Claim(f.ctx, q, "worker-w", ttl, 1)
	if err != nil {
		f.t.Fatal(err)
	}
	if len(res.Jobs) != 1 {
		f.t.Fatalf("claim on %s took %d jobs, want 1", q, len(res.Jobs))
	}
	return res.Jobs[0].ID
}

// uncertain enqueues a job of kind and leaves it uncertain, as a crashed
// attempt would: claimed with a lease that is already due, then expired
// under leader.
func (f *fixture) uncertain(kind string, leader lease.Token) string {
	f.t.Helper()
	id := f.enqueue(kind)
	f.claim(jobs.DefaultQueue, 0)
	exp, err := f.ledger.Expire(f.ctx, jobs.DefaultQueue, leader, ExpireBatch)
	if err != nil || len(exp.Moved) != 1 || exp.Moved[0] != id {
		f.t.Fatalf("expire: %+v, %v; want %s moved", exp, err, id)
	}
	return id
}

func (f *fixture) get(id string) *jobs.Record {
	f.t.Helper()
	rec, err := f.ledger.Get(f.ctx, jobs.DefaultQueue, id)
	if err != nil {
		f.t.Fatal(err)
	}
	return rec
}

// logged reports whether a log line contains every part.
func (f *fixture) logged(parts ...string) bool {
	for _, line := range strings.Split(f.logs.String(), "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}

// later returns a clock reading the namespace's time moved on by d, for a
// service measuring ages by it.
func (f *fixture) later(d time.Duration) func(context.Context) (time.Time, error) {
	return func(ctx context.Context) (time.Time, error) {
		now, err := f.ledger.ReadTime(ctx)
		return now.Add(d), err
	}
}
