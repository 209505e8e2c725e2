package asynqfence_test

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/fence/pgfence"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/pgtest"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestMain doubles as an asynq server process for the crash tests: with
// ASYNQFENCE_HELPER set, the test binary runs runHelper instead of the tests.
func TestMain(m *testing.M) {
	if mode := os.Getenv(envHelper); mode != "" {
		runHelper(mode)
		return
	}
	os.Exit(m.Run())
}

// scenario is one process test's Redis, PostgreSQL schema and ledger.
type scenario struct {
	t      *testing.T
	ctx    context.Context
	addr   string
	rdb    *redis.Client
	pool   *pgxpool.Pool
	pgURL  string
	ns     string
	keys   testKeys
	ledger *ledger.Ledger
}

func newScenario(t *testing.T) *scenario {
	srv := redistest.Start(t, redistest.Options{})
	pool := pgtest.New(t)
	ctx := t.Context()
	if err := pgfence.Migrate(ctx, pool, pgfence.Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE payments (op text NOT NULL, token numeric NOT NULL, worker text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	var schema string
	if err := pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		t.Fatal(err)
	}
	sep := "?"
	if strings.Contains(pgtest.URL(), "?") {
		sep = "&"
	}
	ns := redistest.Namespace(t)
	rdb := srv.Client()
	return &scenario{
		t: t, ctx: ctx, addr: rdb.Options().Addr, rdb: rdb, pool: pool, ns: ns, keys: testKeys{ns},
		pgURL:  pgtest.URL() + sep + "search_path=" + schema,
		ledger: ledger.New(rdb, ledger.Config{Namespace: ns}),
	}
}

// start runs a helper asynq server; it is stopped when the test ends.
func (s *scenario) start(name, mode string) *exec.Cmd {
	s.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envHelper+"="+mode, envName+"="+name, envRedis+"="+s.addr,
		envNS+"="+s.ns, envPG+"="+s.pgURL)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	s.pop(s.ns+":test:up", time.Minute)
	return cmd
}

// pop waits for the next report on list key.
func (s *scenario) pop(key string, within time.Duration) string {
	s.t.Helper()
	v, err := s.rdb.BLPop(s.ctx, within, key).Result()
	if err != nil {
		s.t.Fatalf("waiting on %s: %v", key, err)
	}
	return v[1]
}

func (s *scenario) enqueue(id string) {
	s.t.Helper()
	c := asynq.NewClient(asynq.RedisClientOpt{Addr: s.addr})
	defer c.Close()
	if _, err := c.Enqueue(asynq.NewTask("payment", []byte(`{"cents":100}`)), asynq.TaskID(id), asynq.MaxRetry(5)); err != nil {
		s.t.Fatal(err)
	}
}

// waitRedeliverable waits, after the server holding task id went silent,
// until asynq's recoverer may hand the task out again: its lease (extended
// by the server's heartbeat, now stopped) plus the recoverer's 30 s margin.
// A server started after that recovers the task at once. This wait is
// asynq's own timing, not the bridge's; nothing is asserted about it. It is
// a wait on the clock: no event marks the moment (asynq's recoverer
// compares the lease's score with its own clock, once a minute).
func (s *scenario) waitRedeliverable(id string) {
	s.t.Helper()
	exp, err := s.rdb.ZScore(s.ctx, "asynq:{default}:lease", id).Result()
	if err != nil {
		s.t.Fatalf("asynq lease of %s: %v", id, err)
	}
	until := time.Unix(int64(exp), 0).Add(32 * time.Second)
	s.t.Logf("asynq redelivers %s after %s (its lease ends %s)", id, until.Format(time.TimeOnly), time.Unix(int64(exp), 0).Format(time.TimeOnly))
	select {
	case <-time.After(time.Until(until)):
	case <-s.ctx.Done():
	}
}

type payment struct {
	token  string
	worker string
}

func (s *scenario) payments(op string) []payment {
	s.t.Helper()
	rows, err := s.pool.Query(s.ctx, `SELECT token::text, worker FROM payments WHERE op = $1`, op)
	if err != nil {
		s.t.Fatal(err)
	}
	defer rows.Close()
	var out []payment
	for rows.Next() {
		var p payment
		if err := rows.Scan(&p.token, &p.worker); err != nil {
			s.t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

func mustUint(t *testing.T, s string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func tokenOf(t *testing.T, started string) string {
	t.Helper()
	_, tok, ok := strings.Cut(started, "/")
	if _, err := strconv.ParseUint(tok, 10, 64); !ok || err != nil {
		t.Fatalf("started report %q", started)
	}
	return tok
}

// TestPausedServerStaleWriteRefused: server A is stopped (SIGSTOP) mid-task
// past asynq's lease; asynq's recoverer hands the task to server B, which
// finds A's attempt expired, asks the effect log (not applied), and runs it
// under a higher token. A wakes up and writes through pgfence with its old
// token: refused. One effect, and the ledger refuses A's outcome.
func TestPausedServerStaleWriteRefused(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	const id = "pay-paused"
	s.enqueue(id)
	a := s.start("server-a", "paused")
	tokA := tokenOf(t, s.pop(s.keys.started(), time.Minute))
	if err := a.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	s.waitRedeliverable(id)

	s.start("server-b", "normal")
	tokB := tokenOf(t, s.pop(s.keys.started(), 90*time.Second))
	if got := s.pop(s.keys.results(), time.Minute); got != "server-b:applied" {
		t.Fatalf("server B's write: %q", got)
	}
	if got := s.pop(s.keys.returned(), time.Minute); got != "server-b:ok" {
		t.Fatalf("server B's bridge returned %q", got)
	}
	if b, a := mustUint(t, tokB), mustUint(t, tokA); b <= a {
		t.Fatalf("server B's token %s is not above server A's %s", tokB, tokA)
	}

	// A wakes up and writes with its old token.
	if err := a.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	s.rdb.RPush(s.ctx, s.keys.proceed("server-a"), "1")
	if got := s.pop(s.keys.results(), time.Minute); got != "server-a:stale" {
		t.Fatalf("server A's stale write: %q, want it refused", got)
	}
	if got := s.pop(s.keys.returned(), time.Minute); got != "server-a:ok" {
		t.Fatalf("server A's bridge returned %q (a refused stale outcome is acknowledged)", got)
	}

	if p := s.payments(id); len(p) != 1 || p[0].worker != "server-b" || p[0].token != tokB {
		t.Fatalf("payments %+v: want one, by server B with token %s", p, tokB)
	}
	rec, err := s.ledger.Get(s.ctx, "default", id)
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != jobs.Succeeded || rec.Token.String() != tokB || rec.Bridge != "asynq" || rec.Attempts != 2 {
		t.Fatalf("ledger record: %+v", rec)
	}
	stats, _ := s.ledger.Stats(s.ctx, "default")
	if stats["fenced_commit"] < 1 {
		t.Fatalf("stats %v: server A's commit was not refused", stats)
	}
	// The verdict "not applied" is a failed attempt: a retry on the same run.
	assertHistory(t, s, id, "resolve:rerun:retry", "effect log: operation not applied")
}

// TestKilledServerReconciledFromEffectLog: server A applies the effect and
// is SIGKILLed before it commits. asynq's recoverer hands the task to
// server B; B finds the attempt expired, the effect log says the operation
// was applied, and the task is acknowledged without running the handler.
func TestKilledServerReconciledFromEffectLog(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	const id = "pay-killed"
	s.enqueue(id)
	a := s.start("server-a", "kill")
	tokA := tokenOf(t, s.pop(s.keys.started(), time.Minute))
	if got := s.pop(s.keys.results(), time.Minute); got != "server-a:applied" {
		t.Fatalf("server A's write: %q", got)
	}
	if err := a.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	s.waitRedeliverable(id)

	s.start("server-b", "normal")
	if got := s.pop(s.keys.returned(), 90*time.Second); got != "server-b:ok" {
		t.Fatalf("server B's bridge returned %q", got)
	}
	if n, _ := s.rdb.LLen(s.ctx, s.keys.started()).Result(); n != 0 {
		t.Fatalf("server B ran the handler (%d starts): the effect would apply twice", n)
	}
	if p := s.payments(id); len(p) != 1 || p[0].worker != "server-a" || p[0].token != tokA {
		t.Fatalf("payments %+v: want one, by server A", p)
	}
	rec, err := s.ledger.Get(s.ctx, "default", id)
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != jobs.Succeeded || rec.Attempts != 1 || !strings.Contains(rec.Reason, "effect log: operation applied") {
		t.Fatalf("ledger record: %+v", rec)
	}
	assertHistory(t, s, id, "resolve:succeeded:", "effect log: operation applied")
}

func assertHistory(t *testing.T, s *scenario, id, want, note string) {
	t.Helper()
	h, err := s.ledger.History(s.ctx, "default", id)
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for _, e := range h {
		ev := e.Event + ":" + e.Outcome
		if e.Decision != "" { // a resolve: its decision, then what it did
			ev = e.Event + ":" + e.Decision + ":" + e.Outcome
		}
		seen = append(seen, ev)
		if ev == want && strings.Contains(e.Note, note) && strings.HasPrefix(e.Actor, "bridge:server-b") {
			return
		}
	}
	t.Fatalf("history %v: no %s by server B with evidence %q", seen, want, note)
}
