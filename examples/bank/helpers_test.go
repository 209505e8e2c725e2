package bank_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/examples/bank"
	"github.com/fencedq/fencedq/fence/pgfence"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/pgtest"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/syncbuf"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
	"github.com/fencedq/fencedq/worker"
)

const (
	initialCents = 10_000
	queue        = jobs.DefaultQueue
)

// bankEnv is one test's Redis namespace, ledger client and bank store.
type bankEnv struct {
	t      *testing.T
	rdb    *redis.Client
	addr   string
	ns     string
	client *jobs.Client
	ledger *ledger.Ledger
	kind   string     // postgres, redis or http
	store  bank.Store // the test's own view of the accounts
	// PostgreSQL (postgres and http kinds).
	pool     *pgxpool.Pool
	pg       *bank.PostgresStore
	pgSchema string
	// The bank service (http kind).
	serviceURL string
}

// newBankEnv sets up accounts acct-000..acct-003 with initialCents each in
// a store of kind: "postgres" (pgfence), "redis" (redisfence) or "http"
// (the bank service over pgfence, served from this process).
func newBankEnv(t *testing.T, kind string) *bankEnv {
	t.Helper()
	rdb, ns := redistest.New(t)
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	t.Cleanup(func() { _ = c.Close() })
	e := &bankEnv{t: t, rdb: rdb, addr: rdb.Options().Addr, ns: ns, client: c, ledger: ledger.New(rdb, ledger.Config{Namespace: ns}), kind: kind}
	ctx := t.Context()
	switch kind {
	case "redis":
		s, err := bank.NewRedisStore(rdb, ns)
		if err != nil {
			t.Fatal(err)
		}
		e.store = s
	case "postgres", "http":
		e.pool = pgtest.New(t)
		pg, err := bank.NewPostgresStore(ctx, e.pool, pgfence.Options{})
		if err != nil {
			t.Fatal(err)
		}
		e.pg, e.store = pg, pg
		// pgtest's pool reaches its schema through search_path, which a
		// worker process cannot inherit: pass the name explicitly.
		if err := e.pool.QueryRow(ctx, "SELECT current_schema()").Scan(&e.pgSchema); err != nil {
			t.Fatal(err)
		}
		if kind == "http" {
			srv := httptest.NewServer(bank.NewService(pg, pg.Fences()))
			t.Cleanup(srv.Close)
			e.serviceURL = srv.URL
			e.store = bank.NewHTTPStore(srv.URL, nil)
		}
	default:
		t.Fatalf("unknown store kind %q", kind)
	}
	if err := e.store.Setup(ctx, bank.Accounts(4), initialCents); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *bankEnv) balances() map[string]int64 {
	e.t.Helper()
	b, err := e.store.Balances(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}

// wantOneTransfer checks that exactly one transfer x moved money since
// before.
func (e *bankEnv) wantOneTransfer(before map[string]int64, x bank.Transfer) {
	e.t.Helper()
	after := e.balances()
	if after[x.From] != before[x.From]-x.Cents || after[x.To] != before[x.To]+x.Cents || bank.Total(after) != bank.Total(before) {
		e.t.Fatalf("want exactly one transfer of %d from %s to %s:\nbefore %v\nafter  %v", x.Cents, x.From, x.To, before, after)
	}
}

func (e *bankEnv) enqueue(x bank.Transfer, op string) *jobs.Result {
	e.t.Helper()
	res, err := e.client.Enqueue(context.Background(), x, jobs.OperationID(op))
	if err != nil {
		e.t.Fatal(err)
	}
	return res
}

// helper returns a worker-process configuration for this environment.
func (e *bankEnv) helper(id, mode string, maintenance bool) helperConfig {
	return helperConfig{
		Mode: mode, ID: id, Redis: e.addr, NS: e.ns, Store: e.kind,
		PGURL: pgtest.URL(), PGSchema: e.pgSchema, ServiceURL: e.serviceURL,
		Maintenance: maintenance, LeaseTTL: time.Second, Interval: 200 * time.Millisecond,
	}
}

// probe returns a probeStore over the test's store, for in-process pools.
func (e *bankEnv) probe(id, mode string) *probeStore {
	return &probeStore{Store: e.store, rdb: e.rdb, ns: e.ns, id: id, mode: mode}
}

// poolConfig is an in-process pool's configuration, logging into logs.
func (e *bankEnv) poolConfig(id string, logs *syncbuf.Buffer) worker.Config {
	return worker.Config{
		Jobs: jobs.Config{Namespace: e.ns}, Concurrency: 4, LeaseTTL: time.Second, WorkerID: id,
		HandlerTimeout: 30 * time.Second, ShutdownTimeout: 5 * time.Second,
		RetryDelay:  func(int) time.Duration { return 200 * time.Millisecond },
		Logger:      slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})).With("process", id),
		Maintenance: worker.MaintenanceConfig{Interval: 100 * time.Millisecond, MaxReconcileTries: 20},
	}
}

// run runs p until the test ends.
func (e *bankEnv) run(p *worker.Pool, logs *syncbuf.Buffer) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	e.t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				e.t.Errorf("pool %s: %v", p.ID(), err)
			}
		case <-time.After(30 * time.Second):
			e.t.Errorf("pool %s did not stop within 30s", p.ID())
		}
		if e.t.Failed() {
			e.t.Logf("pool %s log:\n%s", p.ID(), tail(logs.String(), 40))
		}
	})
}

// get reads the job's record.
func (e *bankEnv) get(id string) *jobs.Record {
	e.t.Helper()
	r, err := e.ledger.Get(context.Background(), queue, id)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// fenceOf is the fence the writes of rec's last committed attempt carried:
// a transfer leases its source account, so its fence is that lease's token
// (Record.Fence, recorded when the attempt commits), not the job's own
// claim token.
func fenceOf(rec *jobs.Record) lease.Token {
	if rec.Fence > 0 {
		return rec.Fence
	}
	return rec.Token
}

// fenceOwner is the fence owner of rec's last attempt: "<pool>/<job id>".
func fenceOwner(rec *jobs.Record) string { return rec.Owner + "/" + rec.ID }

func (e *bankEnv) history(id string) []jobs.Entry {
	e.t.Helper()
	h, err := e.ledger.History(context.Background(), queue, id)
	if err != nil {
		e.t.Fatal(err)
	}
	return h
}

// events returns the events recorded so far that match keep.
func (e *bankEnv) events(keep func(event) bool) []event {
	e.t.Helper()
	raw, err := e.rdb.LRange(context.Background(), eventsKey(e.ns), 0, -1).Result()
	if err != nil {
		e.t.Fatal(err)
	}
	var out []event
	for _, s := range raw {
		var ev event
		if err := json.Unmarshal([]byte(s), &ev); err != nil {
			e.t.Fatalf("event %q: %v", s, err)
		}
		if keep == nil || keep(ev) {
			out = append(out, ev)
		}
	}
	return out
}

// helperBound bounds a wait on what a helper process does: it starts as a
// test binary (under the race detector, on a loaded machine) before it
// claims anything, which takes longer than testsignal's default bound.
const helperBound = 60 * time.Second

// waitEvent waits until an event matching keep was recorded and returns
// the first, woken by the events list's keyspace notifications.
func (e *bankEnv) waitEvent(what string, keep func(event) bool) event {
	e.t.Helper()
	var found []event
	err := redistest.Wait(e.rdb, eventsKey(e.ns), helperBound, func() bool { found = e.events(keep); return len(found) > 0 })
	if err != nil {
		e.t.Fatalf("no %s event: %v; events: %+v", what, err, e.events(nil))
	}
	return found[0]
}

// waitLeader waits until the leader status names who as the leader.
func (e *bankEnv) waitLeader(who string, bound time.Duration) {
	e.t.Helper()
	if err := redistest.Wait(e.rdb, e.ns, bound, func() bool { return e.status()["leader"] == who }); err != nil {
		e.t.Fatalf("%s did not become the maintenance leader: %v; status %v", who, err, e.status())
	}
}

// is matches the events named name recorded by worker who.
func is(who, name string) func(event) bool {
	return func(ev event) bool { return ev.Worker == who && ev.Event == name }
}

// stats reads the queue's ledger counters.
func (e *bankEnv) stats() map[string]int64 {
	e.t.Helper()
	st, err := e.ledger.Stats(context.Background(), queue)
	if err != nil {
		e.t.Fatal(err)
	}
	return st
}

// status reads what the maintenance leader last published: its name and
// token ("leader" and "token"; empty before any leader published).
func (e *bankEnv) status() map[string]string {
	s, err := e.ledger.LeaderStatus(context.Background())
	if err != nil || s == nil {
		return map[string]string{}
	}
	return map[string]string{"leader": s.Leader, "token": s.Token.String()}
}

// proc is a worker process: the test binary re-executed as a helper.
type proc struct {
	t     *testing.T
	id    string
	cmd   *exec.Cmd
	out   *syncbuf.Buffer
	wrote testsignal.Changes // out grew
	done  chan struct{}
	// alive is the write end of the helper's stdin: the helper exits when
	// it reads EOF, that is when this process is gone (see exitWithParent).
	alive io.Closer
}

// notifying writes to w, then notifies c.
type notifying struct {
	w io.Writer
	c *testsignal.Changes
}

func (n notifying) Write(b []byte) (int, error) {
	k, err := n.w.Write(b)
	n.c.Notify()
	return k, err
}

// startProc starts a worker process configured by c; it is killed when the
// test ends, and its log is shown if the test failed.
func startProc(t *testing.T, c helperConfig) *proc {
	t.Helper()
	raw, _ := json.Marshal(c)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+string(raw))
	p := &proc{t: t, id: c.ID, cmd: cmd, out: &syncbuf.Buffer{}, done: make(chan struct{})}
	p.wrote.Init(t, "process "+c.ID+"'s output")
	cmd.Stdout = notifying{p.out, &p.wrote}
	cmd.Stderr = cmd.Stdout
	alive, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.alive = alive
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("process %s log:\n%s", p.id, tail(p.out.String(), 40))
		}
	})
	return p
}

func (p *proc) signal(sig syscall.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("signal %v to %s: %v", sig, p.id, err)
	}
}

// pause stops the process with SIGSTOP: every goroutine, keep-alives
// included, freezes. It returns once every thread is stopped (waitStopped):
// the signal takes effect asynchronously, and on a loaded machine a thread
// can run on for several milliseconds after kill(2) returned.
func (p *proc) pause() {
	p.t.Helper()
	p.signal(syscall.SIGSTOP)
	stopped := make(chan error, 1)
	go func() { stopped <- waitStopped(p.cmd.Process.Pid) }()
	select {
	case err := <-stopped:
		if err != nil {
			p.t.Fatalf("process %s after SIGSTOP: %v", p.id, err)
		}
	case <-time.After(testsignal.Timeout()):
		p.t.Fatalf("process %s did not stop within %v of SIGSTOP", p.id, testsignal.Timeout())
	}
}

// waitOutput waits until the process's output contains s.
func (p *proc) waitOutput(s string) {
	p.t.Helper()
	p.wrote.AwaitWithin(fmt.Sprintf("%q in process %s's output", s, p.id), helperBound, func() bool {
		return strings.Contains(p.out.String(), s)
	})
}

// resume continues it with SIGCONT.
func (p *proc) resume() { p.t.Helper(); p.signal(syscall.SIGCONT) }

// kill ends it with SIGKILL and waits until it is gone.
func (p *proc) kill() {
	defer p.alive.Close()
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	_ = p.cmd.Process.Kill()
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.t.Errorf("process %s did not exit after SIGKILL", p.id)
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// watchSucceeded fails the test if job id is ever seen succeeded while the
// store's effect log does not hold its operation: the ledger must never
// claim success before the effect exists. It looks at every change of the
// job's keys (keyspace notifications) until the test ends.
func (e *bankEnv) watchSucceeded(id, op string) {
	ctx, cancel := context.WithCancel(context.Background())
	w := redistest.Watch(e.t, e.rdb, e.ledger.JobKey(queue, id))
	var wg sync.WaitGroup
	var mu sync.Mutex
	var violation string
	wg.Go(func() {
		for {
			r, err := e.ledger.Get(ctx, queue, id)
			if err == nil && r.State == jobs.Succeeded {
				// The state was read first: if the ledger said succeeded, the
				// effect (committed before the ledger) must be visible now.
				_, ok, err := e.store.Applied(ctx, op)
				if err == nil && !ok {
					mu.Lock()
					violation = "job succeeded while its operation was not applied"
					mu.Unlock()
					return
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-w.C():
			}
		}
	})
	e.t.Cleanup(func() {
		cancel()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		if violation != "" {
			e.t.Error(violation)
		}
	})
}
