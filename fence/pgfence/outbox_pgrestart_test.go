//go:build linux

package pgfence_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencedq/fencedq/fence/pgfence"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// privatePG is a PostgreSQL server private to one test: initdb in a
// temporary directory, the postmaster a child process on a free loopback
// port, so the test may stop and start it without touching any shared
// server. As root it runs as the postgres user (PostgreSQL refuses root).
type privatePG struct {
	bin, dir, data string
	port           int
	cred           *syscall.Credential
	cmd            *exec.Cmd
	done           chan struct{}
	URL            string
}

// skipOutsideCI skips the test with a loud message, or fails it when CI is
// set: a green CI run must not hide a test that did not run.
func skipOutsideCI(t *testing.T, msg string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatal(msg + "\n(CI is set, so this is a failure, not a skip)")
	}
	t.Skip("\n!!! SKIPPED !!! " + msg + "\n(set CI=1 to make this a failure)")
}

// startPrivatePG starts a private PostgreSQL, or skips the test when its
// binaries (initdb, postgres) are not installed.
func startPrivatePG(t *testing.T) *privatePG {
	t.Helper()
	bin := ""
	if p, err := exec.LookPath("initdb"); err == nil {
		bin = filepath.Dir(p)
	} else if ms, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb"); len(ms) > 0 {
		sort.Strings(ms)
		bin = filepath.Dir(ms[len(ms)-1])
	}
	if bin == "" {
		skipOutsideCI(t, "initdb not found (PATH, /usr/lib/postgresql/*/bin): install PostgreSQL's server binaries (apt-get install -y postgresql) to run this test")
	}
	// Not t.TempDir: its parents are private to this user, and the server
	// may run as another one.
	dir, err := os.MkdirTemp("", "fencedq-pg-*")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	pg := &privatePG{bin: bin, dir: dir, data: filepath.Join(dir, "data"), port: redistest.FreePort(t)}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			skipOutsideCI(t, "running as root and no postgres user to run a private PostgreSQL as: "+err.Error())
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		pg.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	initdb := pg.command("initdb", "-D", pg.data, "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8")
	if out, err := initdb.CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	pg.URL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", pg.port)
	pg.start(t)
	t.Cleanup(func() { pg.stop(t, syscall.SIGINT) })
	return pg
}

func (pg *privatePG) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(pg.bin, name), args...)
	cmd.Dir = pg.dir
	if pg.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: pg.cred}
	}
	return cmd
}

// pgReady is what the postmaster logs once it accepts connections (with
// lc_messages=C, untranslated).
const pgReady = "database system is ready to accept connections"

// start runs the postmaster and waits until it says, in its log, that it
// accepts connections. The log goes through a pipe the test reads, and on
// into server.log.
func (pg *privatePG) start(t *testing.T) {
	t.Helper()
	pg.cmd = pg.command("postgres", "-D", pg.data, "-p", strconv.Itoa(pg.port), "-k", pg.dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "max_connections=50", "-c", "lc_messages=C")
	logf, err := os.OpenFile(filepath.Join(pg.dir, "server.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	pg.cmd.Stdout, pg.cmd.Stderr = w, w
	err = pg.cmd.Start()
	_ = w.Close() // the server's processes hold it now
	if err != nil {
		_ = r.Close()
		_ = logf.Close()
		t.Fatal(err)
	}
	ready := make(chan struct{})
	go func() { // until the last server process closed the pipe
		defer logf.Close()
		defer r.Close()
		sc := bufio.NewScanner(r)
		for said := false; sc.Scan(); {
			fmt.Fprintln(logf, sc.Text())
			if !said && strings.Contains(sc.Text(), pgReady) {
				said = true
				close(ready)
			}
		}
	}()
	pg.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(pg.cmd, pg.done)
	bound := testsignal.Scale(30 * time.Second) // crash recovery at start may replay WAL
	select {
	case <-ready:
	case <-pg.done:
		log, _ := os.ReadFile(filepath.Join(pg.dir, "server.log"))
		t.Fatalf("private PostgreSQL exited at start:\n%s", log)
	case <-time.After(bound):
		log, _ := os.ReadFile(filepath.Join(pg.dir, "server.log"))
		t.Fatalf("private PostgreSQL did not log %q within %v:\n%s", pgReady, bound, log)
	}
}

// stop signals the postmaster (SIGQUIT: immediate shutdown, as a crash;
// SIGINT: fast shutdown) and waits for it to exit.
func (pg *privatePG) stop(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if pg.cmd == nil {
		return
	}
	_ = pg.cmd.Process.Signal(sig)
	select {
	case <-pg.done:
	case <-time.After(30 * time.Second):
		_ = pg.cmd.Process.Kill()
		<-pg.done
	}
	pg.cmd = nil
}

// TestOutboxPostgresRestartedUnderSteadyStream: order rows and their jobs
// are committed in one transaction each, in a steady stream, while a pool's
// maintenance leader relays the outbox; the private PostgreSQL is shut down
// immediately (as a crash) mid-stream and started again. In the end the
// queue and the orders table agree exactly: every committed order has
// exactly one job, which ran; a transaction that did not commit (it failed
// while the server was down, or its COMMIT's answer was lost) has a job
// if and only if its order row exists.
func TestOutboxPostgresRestartedUnderSteadyStream(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a private PostgreSQL")
	}
	pg := startPrivatePG(t)
	ctx := t.Context()
	cfg, err := pgxpool.ParseConfig(pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 8
	cfg.ConnConfig.ConnectTimeout = 2 * time.Second
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := pgfence.Migrate(ctx, pool, pgfence.Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE orders (id text PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	ob, err := pgfence.NewOutbox(pool, pgfence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rdb, ns := redistest.New(t)
	lg := ledger.New(rdb, ledger.Config{Namespace: ns})

	var ranMu sync.Mutex
	ran := map[string]int{}
	p, err := worker.NewPool(rdb, worker.Config{
		Jobs: jobs.Config{Namespace: ns}, LeaseTTL: time.Second, Logger: slog.New(slog.DiscardHandler),
		Maintenance: worker.MaintenanceConfig{Interval: 200 * time.Millisecond, Outboxes: []worker.OutboxRelay{ob}},
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = worker.Register(p, jobs.WorkFunc[orderArgs](func(ctx context.Context, j *jobs.Job[orderArgs]) error {
		ranMu.Lock()
		ran[j.Args.Order]++
		ranMu.Unlock()
		return nil
	}))
	pctx, stopPool := context.WithCancel(ctx)
	poolDone := make(chan error, 1)
	go func() { poolDone <- p.Run(pctx) }()
	defer func() { stopPool(); <-poolDone }()

	// The stream: one order and its job per transaction, back to back.
	type attempt struct {
		order, op string
		committed bool // Commit returned nil
	}
	var (
		attemptsMu sync.Mutex
		attempts   []attempt
		commits    atomic.Int64
		failures   atomic.Int64
		counted    testsignal.Changes // commits or failures moved
	)
	counted.Init(t, "the stream's commits and failures")
	sctx, stopStream := context.WithCancel(ctx)
	streamDone := make(chan struct{})
	go func() {
		defer close(streamDone)
		for i := 0; sctx.Err() == nil; i++ {
			order := fmt.Sprintf("order-%05d", i)
			err := func() error {
				tctx, cancel := context.WithTimeout(sctx, 3*time.Second)
				defer cancel()
				tx, err := pool.Begin(tctx)
				if err != nil {
					return err
				}
				defer func() { _ = tx.Rollback(context.Background()) }()
				if _, err := tx.Exec(tctx, `INSERT INTO orders (id) VALUES ($1)`, order); err != nil {
					return err
				}
				op, err := pgfence.Enqueue(tctx, tx, orderArgs{Order: order})
				if err != nil {
					return err
				}
				attemptsMu.Lock()
				attempts = append(attempts, attempt{order: order, op: op})
				attemptsMu.Unlock()
				return tx.Commit(tctx)
			}()
			if err != nil {
				failures.Add(1)
				counted.Notify()
				time.Sleep(20 * time.Millisecond) // the server is down: a client's back-off, not a wait
				continue
			}
			attemptsMu.Lock()
			attempts[len(attempts)-1].committed = true
			attemptsMu.Unlock()
			commits.Add(1)
			counted.Notify()
		}
	}()
	// Bounds: a transaction against a server that went away fails only
	// after its 3 s timeout, and PostgreSQL's restart replays its WAL.
	const streamBound = 60 * time.Second
	counted.AwaitWithin("40 commits before the restart", streamBound, func() bool { return commits.Load() >= 40 })
	pg.stop(t, syscall.SIGQUIT)
	failedBefore := failures.Load()
	counted.AwaitWithin("the stream to notice the server is down", streamBound, func() bool { return failures.Load() > failedBefore })
	pg.start(t)
	before := commits.Load()
	counted.AwaitWithin("40 commits after the restart", streamBound, func() bool { return commits.Load() >= before+40 })
	stopStream()
	<-streamDone

	// Settle: the outbox drains and every order's job has run.
	orders := func() map[string]bool {
		out := map[string]bool{}
		rows, err := pool.Query(ctx, `SELECT id FROM orders`)
		if err != nil {
			t.Fatal(err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			out[id] = true
		}
		return out
	}
	// Every relay pass that moves a row writes to Redis (an enqueue, or
	// a deduplicated one) before its transaction deletes the row and
	// commits: look again at each Redis change, and take an ACCESS
	// EXCLUSIVE lock on the outbox first, which waits for a relay
	// transaction in flight to end.
	drained := func() bool {
		tx, err := pool.Begin(ctx)
		if err != nil {
			return false
		}
		defer func() { _ = tx.Rollback(context.Background()) }()
		var n int
		if _, err := tx.Exec(ctx, `LOCK TABLE `+ob.Table()+` IN ACCESS EXCLUSIVE MODE`); err != nil {
			return false
		}
		return tx.QueryRow(ctx, `SELECT count(*) FROM `+ob.Table()).Scan(&n) == nil && n == 0
	}
	redistest.AwaitWithin(t, rdb, ns, "the outbox to drain and every order's job to run", streamBound, func() bool {
		c, err := lg.Counts(ctx, jobs.DefaultQueue)
		return err == nil && c[jobs.Succeeded] == int64(len(orders())) && drained()
	})

	have := orders()
	counts, err := lg.Counts(ctx, jobs.DefaultQueue)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, n := range counts {
		total += n
	}
	if total != int64(len(have)) {
		t.Fatalf("%d jobs in the queue (%v) for %d committed orders", total, counts, len(have))
	}
	attemptsMu.Lock()
	defer attemptsMu.Unlock()
	uncommitted := 0
	for _, a := range attempts {
		rec, err := lg.FindByOperation(ctx, a.op)
		switch {
		case a.committed && !have[a.order]:
			t.Errorf("%s: its commit succeeded but the order row is missing", a.order)
		case have[a.order] && err != nil:
			t.Errorf("%s committed but has no job: %v", a.order, err)
		case have[a.order] && rec.State != jobs.Succeeded:
			t.Errorf("%s: job %s is %s", a.order, rec.ID, rec.State)
		case !have[a.order] && !errors.Is(err, jobs.ErrNotFound):
			t.Errorf("%s did not commit but has a job (%v)", a.order, err)
		}
		if !a.committed {
			uncommitted++
		}
	}
	ranMu.Lock()
	for order := range have {
		if ran[order] == 0 {
			t.Errorf("%s: its job never ran", order)
		}
	}
	ranMu.Unlock()
	t.Logf("%d transactions reached COMMIT, %d orders committed, %d jobs; %d transactions failed around the restart (%d after Enqueue)",
		len(attempts), len(have), total, failures.Load(), uncommitted)
}
