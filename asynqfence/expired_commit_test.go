package asynqfence_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/fencedq/fencedq/asynqfence"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/syncbuf"
	"github.com/fencedq/fencedq/jobs"
)

// TestBridgedCommitAfterTheLeaseExpiredSaysSo: a delivery whose lease
// expired while its handler ran (the job made uncertain under the
// attempt's own token, no attempt since) has its late success refused;
// the log line and the error returned to asynq say that the job left
// running under this attempt's token, not that a newer attempt owns it,
// which none does. asynq keeps the task (ErrSuperseded), whose next
// delivery reconciles the job.
func TestBridgedCommitAfterTheLeaseExpiredSaysSo(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{ClockShim: true})
	rdb := srv.Client()
	ns := redistest.Namespace(t)
	logs := &syncbuf.Buffer{}
	b, err := asynqfence.New(rdb, jobs.Config{Namespace: ns}, asynqfence.Options{WorkerID: "in-process",
		Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	started, release := make(chan struct{}, 1), make(chan struct{})
	mux, returned := bridgedMux(t, b)
	mux.HandleFunc("note", func(context.Context, *asynq.Task) error {
		started <- struct{}{}
		<-release // ignores its context
		return nil
	})
	as := asynq.NewServerFromRedisClient(rdb, testServerConfig())
	if err := as.Start(mux); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(as.Shutdown)
	if _, err := asynq.NewClientFromRedisClient(rdb).Enqueue(asynq.NewTask("note", []byte(`{}`)), asynq.TaskID("x1"), asynq.MaxRetry(5)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler did not start")
	}
	// Redis's clock jumps past the lease (a renewal in between moves the
	// deadline: jump further), and the expirer finds it expired.
	lg := ledger.New(rdb, ledger.Config{Namespace: ns})
	ctx := context.Background()
	for hours := 1; ; hours++ {
		srv.SetClockOffset(time.Duration(hours) * time.Hour)
		exp, err := lg.Expire(ctx, "default", 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(exp.Moved) == 1 {
			break
		}
		if hours == 10 {
			t.Fatal("the expirer never found the delivery's lease expired")
		}
	}
	close(release)
	err = returned.WaitOrTimeout()
	if !errors.Is(err, asynqfence.ErrSuperseded) {
		t.Fatalf("the refused late outcome returned %v to asynq, want ErrSuperseded (asynq keeps the task)", err)
	}
	out := logs.String()
	if strings.Contains(out, "a newer attempt owns") || strings.Contains(err.Error(), "newer attempt") {
		t.Fatalf("the refusal says a newer attempt owns the job, when none ran since the lease expired:\nerror %v\nlog %s", err, out)
	}
	if !strings.Contains(out, "lease expired") || !strings.Contains(err.Error(), "this attempt's token") {
		t.Fatalf("the refusal does not say the attempt's own lease expired:\nerror %v\nlog %s", err, out)
	}
}
