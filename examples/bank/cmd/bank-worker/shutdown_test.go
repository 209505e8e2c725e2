package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fencedq/fencedq/examples/bank"
	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/pgtest"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
)

// blockedWorker is a bank-worker process whose one transfer is running,
// blocked on a row lock the test holds in tx.
type blockedWorker struct {
	cmd    *exec.Cmd
	exited chan error
	// stderr receives every line the process writes there.
	stderr chan string
	tx     pgx.Tx
	job    *jobs.Result
	ledger *ledger.Ledger
}

// startBlockedWorker starts bank-worker on PostgreSQL with args, enqueues a
// transfer from an account the test has locked, and returns once the
// transfer is running.
func startBlockedWorker(t *testing.T, args ...string) *blockedWorker {
	t.Helper()
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	pg := pgtest.New(t)
	u, err := url.Parse(pg.Config().ConnString())
	if err != nil {
		t.Fatalf("DATABASE_URL must be a URL for this test: %v", err)
	}
	q := u.Query()
	q.Set("search_path", pg.Config().ConnConfig.RuntimeParams["search_path"])
	u.RawQuery = q.Encode()

	cmd := exec.Command(os.Args[0], append([]string{"--postgres", u.String(), "--accounts", "2", "--log-format", "json"}, args...)...)
	cmd.Env = append(os.Environ(), runMainEnv+"=1", "FENCEDQ_REDIS=redis://"+srv.Addr, "FENCEDQ_NAMESPACE="+ns)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &blockedWorker{cmd: cmd, exited: make(chan error, 1), stderr: make(chan string, 1000),
		ledger: ledger.New(srv.Client(), ledger.Config{Namespace: ns})}
	running := make(chan struct{}, 1)
	outDone := eachLine(stdout, func(text string) {
		if strings.Contains(text, "running") {
			running <- struct{}{}
		}
	})
	errDone := eachLine(stderr, func(text string) { w.stderr <- text })
	go func() {
		<-outDone
		<-errDone
		w.exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-w.exited
	})
	select {
	case <-running:
	case err := <-w.exited:
		w.exited <- err // for the cleanup
		t.Fatalf("the worker exited before running: %v", err)
	case <-time.After(testsignal.Scale(time.Minute)):
		t.Fatal("the pool did not say it runs")
	}

	ctx := context.Background()
	if w.tx, err = pg.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.tx.Rollback(context.Background()) })
	if _, err := w.tx.Exec(ctx, `SELECT 1 FROM bank_accounts WHERE id = 'acct-000' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	client := jobs.NewClient(srv.Client(), jobs.Config{Namespace: ns})
	if w.job, err = client.Enqueue(ctx, bank.Transfer{From: "acct-000", To: "acct-001", Cents: 250}); err != nil {
		t.Fatal(err)
	}
	jobstest.WaitState(t, w.ledger, w.job.Queue, w.job.JobID, jobs.Running)
	// Claimed is not started (a shutdown puts back a job whose handler has
	// not begun): wait for the transfer to wait for the row lock.
	var pid int
	if err := w.tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(testsignal.Scale(time.Minute))
	for {
		var waiting bool
		err := pg.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks l JOIN pg_locks h ON l.transactionid = h.transactionid
			WHERE NOT l.granted AND h.granted AND h.pid = $1)`, pid).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		if waiting {
			return w
		}
		if time.Now().After(deadline) {
			t.Fatal("the transfer did not come to wait for the locked account")
		}
		select {
		case err := <-w.exited:
			w.exited <- err // for the cleanup
			t.Fatalf("the worker exited before its transfer ran: %v", err)
		case <-time.After(10 * time.Millisecond): // a poll interval, not a wait for an outcome
		}
	}
}

// awaitStderr returns the first line on stderr for which match is true.
func (w *blockedWorker) awaitStderr(t *testing.T, what string, match func(string) bool) string {
	t.Helper()
	deadline := time.After(testsignal.Scale(time.Minute))
	for {
		select {
		case line := <-w.stderr:
			if match(line) {
				return line
			}
		case err := <-w.exited:
			w.exited <- err // for the cleanup
			for len(w.stderr) > 0 {
				t.Log(<-w.stderr)
			}
			t.Fatalf("the worker exited (%v) before %s", err, what)
		case <-deadline:
			t.Fatalf("no %s on stderr", what)
		}
	}
}

// shuttingDown matches the pool's log line that starts its shutdown.
func shuttingDown(line string) bool {
	var l struct {
		Msg string `json:"msg"`
	}
	return json.Unmarshal([]byte(line), &l) == nil && l.Msg == "pool shutting down"
}

// TestShutdownTimeoutFlag: --shutdown-timeout is how long a shutdown waits
// for running transfers: a transfer still running when SIGTERM comes
// finishes under a long one and is committed succeeded, and the process
// exits 0.
func TestShutdownTimeoutFlag(t *testing.T) {
	w := startBlockedWorker(t, "--shutdown-timeout", "1h", "--handler-timeout", "2h")
	if err := w.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	line := w.awaitStderr(t, "shutdown log line", shuttingDown)
	if !strings.Contains(line, `"timeout":"1h0m0s"`) {
		t.Fatalf("the pool's shutdown: %s (want the timeout of --shutdown-timeout, 1h0m0s)", line)
	}
	if err := w.tx.Rollback(context.Background()); err != nil { // the transfer goes on
		t.Fatal(err)
	}
	select {
	case err := <-w.exited:
		w.exited <- err // for the cleanup
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v", err)
		}
	case <-time.After(testsignal.Scale(time.Minute)):
		t.Fatal("the worker did not stop once its transfer could finish")
	}
	if rec := jobstest.WaitState(t, w.ledger, w.job.Queue, w.job.JobID, jobs.Succeeded); rec.Attempts != 1 {
		t.Fatalf("the transfer finished in attempt %d, want 1", rec.Attempts)
	}
}

// TestSecondSignalStopsAtOnce: Ctrl-C starts a graceful shutdown and says
// that a second one stops at once; the second ends the process while a
// transfer still runs, instead of being swallowed.
func TestSecondSignalStopsAtOnce(t *testing.T) {
	w := startBlockedWorker(t, "--shutdown-timeout", "1h", "--handler-timeout", "2h")
	if err := w.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	w.awaitStderr(t, "hint that a second Ctrl-C stops at once", func(line string) bool {
		return line == "bank-worker: stopping gracefully; press Ctrl-C again to stop at once"
	})
	w.awaitStderr(t, "shutdown log line", shuttingDown)
	if err := w.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	var err error
	select {
	case err = <-w.exited:
		w.exited <- err // for the cleanup
	case <-time.After(testsignal.Scale(time.Minute)):
		t.Fatal("the second Ctrl-C did not end the worker")
	}
	var exit *exec.ExitError
	if ws, ok := w.cmd.ProcessState.Sys().(syscall.WaitStatus); !errors.As(err, &exit) || !ok || !ws.Signaled() || ws.Signal() != syscall.SIGINT {
		t.Fatalf("exit after the second Ctrl-C: %v, want the end by SIGINT", err)
	}
}
