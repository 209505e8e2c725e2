package worker_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
	"github.com/fencedq/fencedq/worker"
)

// secretAccountArgs' resource is built from a sensitive field.
type secretAccountArgs struct {
	Account string `json:"account" fencedq:"sensitive"`
}

func (secretAccountArgs) Kind() string { return "secret-account" }

func (a secretAccountArgs) Resource() string { return "account:" + a.Account }

type secretAccountWorker struct{}

func (secretAccountWorker) Work(context.Context, *jobs.Job[secretAccountArgs]) error { return nil }

// TestResourceFromSensitiveFieldStaysOutOfLogs: a job whose resource is
// built from a sensitive field and found busy is logged with its
// resource redacted as its errors are (the pool logged the resource
// whole), and the job runs once the resource is free.
func TestResourceFromSensitiveFieldStaysOutOfLogs(t *testing.T) {
	const secret = "ES9121000418450200051332"
	e := newEnv(t)
	ctx := context.Background()
	other, err := lease.NewManager(e.rdb, lease.Config{Namespace: e.ns}).
		Acquire(ctx, "account:"+secret, "someone-else", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	busy := make(chan struct{})
	var once sync.Once
	cfg := e.config()
	cfg.Logger = slog.New(slog.NewJSONHandler(io.MultiWriter(e.logs, writerFunc(func(b []byte) {
		if strings.Contains(string(b), "resource busy") {
			once.Do(func() { close(busy) })
		}
	})), &slog.HandlerOptions{Level: slog.LevelDebug}))
	p := e.pool(cfg)
	if err := worker.Register(p, jobs.Worker[secretAccountArgs](secretAccountWorker{})); err != nil {
		t.Fatal(err)
	}
	id := e.enqueue(secretAccountArgs{Account: secret}).JobID
	e.start(p)
	select {
	case <-busy:
	case <-time.After(20 * time.Second):
		t.Fatal("the pool logged no busy resource")
	}
	logs := e.logs.String()
	if strings.Contains(logs, secret) {
		t.Errorf("the pool's logs quote the sensitive value:\n%s", tail(logs, 10))
	}
	if !strings.Contains(logs, `"resource":"account:`+jobs.Redacted+`"`) {
		t.Errorf("the pool's logs do not name the resource redacted:\n%s", tail(logs, 10))
	}
	if err := lease.NewManager(e.rdb, lease.Config{Namespace: e.ns}).Release(ctx, other); err != nil {
		t.Fatal(err)
	}
	jobstest.WaitState(t, e.ledger, "default", id, jobs.Succeeded)
	if logs := e.logs.String(); strings.Contains(logs, secret) {
		t.Errorf("the pool's logs quote the sensitive value:\n%s", tail(logs, 10))
	}
}

// writerFunc is an io.Writer calling its function with each write.
type writerFunc func([]byte)

func (f writerFunc) Write(b []byte) (int, error) { f(b); return len(b), nil }
