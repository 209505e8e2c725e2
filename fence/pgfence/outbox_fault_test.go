package pgfence_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fence/pgfence"
	"github.com/fencedq/fencedq/internal/pgtest"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
)

// The relay helper process: this test binary re-executed with
// relayHelperEnv set runs TestOutboxRelayHelperProcess, which relays the
// outbox of the schema named in its environment in batches of
// relayHelperBatch. With relayHelperHang it blocks inside its second batch,
// after the batch's jobs were enqueued and before their rows are removed,
// and says so on stdout: the parent SIGKILLs it there.
const (
	relayHelperEnv   = "FENCEDQ_OUTBOX_RELAY_HELPER"
	relayHelperHang  = "hang"
	relayHelperRun   = "run"
	relayHelperBatch = 20
	relayHelperReady = "mid-batch"
)

// TestOutboxRelayHelperProcess is not a test: it is the relay process of
// TestOutboxRelaySIGKILLedMidBatch.
func TestOutboxRelayHelperProcess(t *testing.T) {
	mode := os.Getenv(relayHelperEnv)
	if mode == "" {
		t.Skip("helper process of TestOutboxRelaySIGKILLedMidBatch")
	}
	if err := relayHelper(mode); err != nil {
		fmt.Fprintln(os.Stderr, "relay helper:", err)
		os.Exit(3)
	}
	os.Exit(0)
}

// relayHelper relays the outbox until it is empty (mode run) or until it
// hangs mid-batch (mode hang).
func relayHelper(mode string) error {
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(os.Getenv("FENCEDQ_HELPER_PG_URL"))
	if err != nil {
		return err
	}
	cfg.ConnConfig.Database = os.Getenv("FENCEDQ_HELPER_PG_DB")
	cfg.ConnConfig.RuntimeParams["search_path"] = os.Getenv("FENCEDQ_HELPER_PG_SCHEMA")
	cfg.ConnConfig.RuntimeParams["application_name"] = os.Getenv("FENCEDQ_HELPER_APP")
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	ob, err := pgfence.NewOutbox(pool, pgfence.Options{})
	if err != nil {
		return err
	}
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("FENCEDQ_HELPER_REDIS")})
	defer rdb.Close()
	client := jobs.NewClient(rdb, jobs.Config{Namespace: os.Getenv("FENCEDQ_HELPER_NS")})
	var tok uint64
	if _, err := fmt.Sscan(os.Getenv("FENCEDQ_HELPER_TOKEN"), &tok); err != nil {
		return err
	}
	if mode == relayHelperHang {
		batches := 0
		pgfence.SetRelayHook(func() error {
			if batches++; batches == 2 {
				fmt.Println(relayHelperReady) // the parent kills us now
				select {}
			}
			return nil
		})
	}
	for {
		n, _, err := ob.Relay(ctx, client, lease.Token(tok), relayHelperBatch)
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
	}
}

// relayProcess prepares the helper process for e's outbox.
func (e *outboxEnv) relayProcess(t *testing.T, mode, app string, token int) *exec.Cmd {
	t.Helper()
	cfg := e.pool.Config().ConnConfig
	cmd := exec.Command(os.Args[0], "-test.run=^TestOutboxRelayHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(),
		relayHelperEnv+"="+mode,
		"FENCEDQ_HELPER_PG_URL="+pgtest.URL(),
		"FENCEDQ_HELPER_PG_DB="+cfg.Database,
		"FENCEDQ_HELPER_PG_SCHEMA="+cfg.RuntimeParams["search_path"],
		"FENCEDQ_HELPER_APP="+app,
		"FENCEDQ_HELPER_REDIS="+e.ledger.Redis().(*redis.Client).Options().Addr,
		"FENCEDQ_HELPER_NS="+e.ledger.Namespace(),
		fmt.Sprint("FENCEDQ_HELPER_TOKEN=", token),
	)
	cmd.Stderr = os.Stderr
	return cmd
}

// TestOutboxRelaySIGKILLedMidBatch: a relay process is SIGKILLed inside a
// batch, after the batch's jobs were enqueued and before their rows were
// removed from the outbox (its transaction dies with it); a fresh relay
// process, under a newer leader's token, finishes. Every committed row is
// enqueued exactly once, none is lost.
func TestOutboxRelaySIGKILLedMidBatch(t *testing.T) {
	if os.Getenv(relayHelperEnv) != "" {
		t.Skip("inside the helper process")
	}
	e := newOutboxEnv(t)
	ctx := t.Context()
	const total = 50
	var ops []string
	e.inTx(t, true, func(tx pgx.Tx) {
		ps := make([]jobs.Params, total)
		for i := range ps {
			ps[i] = jobs.Params{Args: orderArgs{Order: fmt.Sprint("o-", i)}}
		}
		var err error
		if ops, err = e.outbox.EnqueueMany(ctx, tx, ps); err != nil {
			t.Fatal(err)
		}
	})

	app := "relay-helper-" + strings.ReplaceAll(e.ledger.Namespace(), ":", "-")
	cmd := e.relayProcess(t, relayHelperHang, app, 10)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == relayHelperReady {
				ready <- true
				return
			}
		}
		ready <- false
	}()
	if !<-ready {
		_ = cmd.Wait()
		t.Fatal("the relay helper ended without reaching its second batch")
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err == nil {
		t.Fatal("the SIGKILLed relay exited cleanly")
	}
	// Mid-batch: the first batch was committed, the second enqueued but
	// its rows are still in the outbox (locked until PostgreSQL notices the
	// dead connection and rolls its transaction back).
	if got := e.pending(t); got != 2*relayHelperBatch {
		t.Fatalf("after the kill: %d jobs, want %d", got, 2*relayHelperBatch)
	}
	e.waitRolledBack(t)
	if got := e.rows(t); got != total-relayHelperBatch {
		t.Fatalf("after the kill: %d rows in the outbox, want %d", got, total-relayHelperBatch)
	}

	// A fresh relay process (a new leader, a higher token) finishes.
	fresh := e.relayProcess(t, relayHelperRun, app+"-fresh", 11)
	if b, err := fresh.Output(); err != nil {
		t.Fatalf("fresh relay: %v %s", err, b)
	}
	if e.rows(t) != 0 {
		t.Fatalf("%d rows left after the fresh relay", e.rows(t))
	}
	if got := e.pending(t); got != total {
		t.Fatalf("%d jobs for %d committed rows", got, total)
	}
	seen := map[string]bool{}
	for _, op := range ops {
		rec, err := e.ledger.FindByOperation(ctx, op)
		if err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		if seen[rec.ID] {
			t.Fatalf("job %s found for two operations", rec.ID)
		}
		seen[rec.ID] = true
	}
	// The killed relay's token is below the fresh one's: it is refused.
	e.inTx(t, true, func(tx pgx.Tx) {
		if _, err := e.outbox.Enqueue(ctx, tx, orderArgs{Order: "late"}); err != nil {
			t.Fatal(err)
		}
	})
	if _, _, err := e.outbox.Relay(ctx, e.client, 10, relayHelperBatch); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("the deposed relay's token: %v, want fence.ErrStale", err)
	}
}

// waitRolledBack waits until PostgreSQL has rolled back the killed relay's
// transaction (once it notices the dead connection), which releases its
// locks on the outbox. PostgreSQL's lock queue is the signal: an ACCESS
// EXCLUSIVE lock on the outbox is granted only when no other transaction
// holds any lock there.
func (e *outboxEnv) waitRolledBack(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), testsignal.Timeout())
	defer cancel()
	tx, err := e.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(ctx, `LOCK TABLE `+e.outbox.Table()+` IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatalf("the killed relay's transaction still holds the outbox after %v: %v", testsignal.Timeout(), err)
	}
}
