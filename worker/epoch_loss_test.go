package worker_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/internal/epoch"
	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/syncbuf"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// notifyingWriter is a log's buffer that tells a test each line it gets.
type notifyingWriter struct {
	buf     *syncbuf.Buffer
	changes *testsignal.Changes
}

func (w notifyingWriter) Write(p []byte) (int, error) {
	n, err := w.buf.Write(p)
	w.changes.Notify()
	return n, err
}

// One Redis restart without persistence moves the fencing epoch once, to 1,
// and is logged once at error level, in a process with a pool, its
// maintenance leader and an enqueue client: the pool's claims and its
// leader's lease each mint with an epoch tracker of their own, and each
// finds the loss; the second keeps the epoch the first moved the primary
// to, which is above every epoch it minted in.
func TestEpochLossMovesOncePerProcess(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	e := newEnvOn(t, srv.Client(), redistest.Namespace(t))
	var logged testsignal.Changes
	logged.Init(t, "the process's log")
	cfg := e.config()
	cfg.Logger = slog.New(slog.NewJSONHandler(notifyingWriter{e.logs, &logged}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	client := jobs.NewClient(e.rdb, jobs.Config{Namespace: e.ns, Logger: cfg.Logger})
	t.Cleanup(func() { _ = client.Close() })
	p := e.pool(cfg)
	_ = worker.Register(p, jobs.WorkFunc[echoArgs](func(context.Context, *jobs.Job[echoArgs]) error { return nil }))
	e.start(p)
	res, err := client.Enqueue(context.Background(), echoArgs{N: 1})
	if err != nil {
		t.Fatal(err)
	}
	jobstest.WaitState(t, e.ledger, res.Queue, res.JobID, jobs.Succeeded)
	const learned = `"msg":"fencing epoch",`
	logged.Await("the pool's claims and its leader's lease learned the epoch", func() bool {
		return strings.Count(e.logs.String(), learned) >= 2
	})

	srv.Restart() // every key is gone, the epoch record with them

	if res, err = client.Enqueue(context.Background(), echoArgs{N: 2}); err != nil {
		t.Fatal(err)
	}
	rec := jobstest.WaitState(t, e.ledger, res.Queue, res.JobID, jobs.Succeeded)
	const lost = `"msg":"fencing epoch record lost`
	logged.Await("the pool's claims and its leader's lease found the loss", func() bool {
		return strings.Count(e.logs.String(), lost) >= 2
	})
	if n := strings.Count(e.logs.String(), `"level":"ERROR",`+lost); n != 1 {
		t.Fatalf("%d error lines for one loss, want 1", n)
	}
	if f := e.rdb.HGetAll(context.Background(), epoch.Key(e.ns)).Val(); f["max"] != "1" {
		t.Fatalf("epoch record after one loss: %v, want max 1", f)
	}
	if epoch.Of(uint64(rec.Token)) != 1 {
		t.Fatalf("the job claimed after the loss: token %d of epoch %d, want epoch 1", rec.Token, epoch.Of(uint64(rec.Token)))
	}
}
