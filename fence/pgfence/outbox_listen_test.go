package pgfence_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencedq/fencedq/fence/pgfence"
	"github.com/fencedq/fencedq/internal/pgtest"
	"github.com/fencedq/fencedq/internal/syncbuf"
	"github.com/fencedq/fencedq/internal/testsignal"
)

// TestOutboxListenLogsLostConnection: a LISTEN connection terminated by the
// server, then failing to come back for a few tries, is logged once as a
// warning with its error, and once at info level with the failed tries
// when it listens again; a commit's notification then still wakes Listen.
func TestOutboxListenLogsLostConnection(t *testing.T) {
	admin := pgtest.New(t)
	ctx := t.Context()
	if err := pgfence.Migrate(ctx, admin, pgfence.Options{}); err != nil {
		t.Fatal(err)
	}
	// The outbox's own pool, whose acquisitions fail while down is set.
	var down atomic.Bool
	var refused testsignal.Signal[struct{}]
	refused.Init(t, "outbox pool acquisition refused")
	cfg := admin.Config()
	cfg.PrepareConn = func(context.Context, *pgx.Conn) (bool, error) {
		if down.Load() {
			refused.Signal(struct{}{})
			return true, errors.New("database unreachable")
		}
		return true, nil
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	logs := &syncbuf.Buffer{}
	ob, err := pgfence.NewOutbox(pool, pgfence.Options{Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	listening := ob.InitListening(t)
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	wake := ob.Listen(lctx)
	listening.WaitOrTimeout()

	down.Store(true)
	var n int
	// Only this test's schema LISTENs on this channel.
	if err := admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE query = $1 AND datname = current_database()`, "LISTEN "+pgx.Identifier{ob.Channel()}.Sanitize()).Scan(&n); err != nil || n != 1 {
		t.Fatalf("terminated %d LISTEN backends (%v), want 1", n, err)
	}
	const tries = 3
	refused.WaitOrTimeoutN(tries)
	down.Store(false)
	listening.WaitOrTimeout()

	var warns, infos []map[string]any
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		switch rec["level"] {
		case "WARN":
			warns = append(warns, rec)
		case "INFO":
			infos = append(infos, rec)
		}
	}
	if len(warns) != 1 || len(infos) != 1 {
		t.Fatalf("%d warnings and %d info lines, want 1 and 1:\n%s", len(warns), len(infos), logs.String())
	}
	if w := warns[0]; w["outbox"] != ob.Table() || w["error"] == nil || w["error"] == "" {
		t.Fatalf("warning %v: want the outbox and the error", w)
	}
	if f, _ := infos[0]["failures"].(float64); infos[0]["outbox"] != ob.Table() || f < tries+1 {
		t.Fatalf("info line %v: want the outbox and at least %d failures", infos[0], tries+1)
	}
	if strings.Contains(logs.String(), "postgres://") {
		t.Fatalf("the logs hold a connection string:\n%s", logs.String())
	}

	if _, err := admin.Exec(ctx, `SELECT pg_notify($1, '')`, ob.Channel()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wake:
	case <-time.After(testsignal.Timeout()):
		t.Fatal("a notification after the LISTEN came back did not wake Listen")
	}
}
