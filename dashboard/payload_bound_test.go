package dashboard_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// TestPayloadAtTheBound: args of exactly jobs.MaxPayloadBytes enqueue, run
// to success with the handler seeing them whole, and show whole on the
// job's page and as a preview in its list; a byte more is refused as
// ErrInvalid with nothing written.
func TestPayloadAtTheBound(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	pad := func(n int) []byte {
		const head, tail = `{"note":"`, `"}`
		return []byte(head + strings.Repeat("x", n-len(head)-len(tail)) + tail)
	}
	if _, err := f.client.EnqueueRaw(ctx, "echo", pad(jobs.MaxPayloadBytes+1), jobs.Queue("big"), jobs.Unchecked()); !errors.Is(err, jobs.ErrInvalid) || !strings.Contains(fmt.Sprint(err), "exceeds") {
		t.Fatalf("a payload one byte over: %v, want ErrInvalid", err)
	}
	if qs, err := f.insp.Queues(ctx); err != nil || len(qs) != 0 {
		t.Fatalf("after a refused enqueue the namespace holds queues %v (%v), want none", qs, err)
	}
	res, err := f.client.EnqueueRaw(ctx, "echo", pad(jobs.MaxPayloadBytes), jobs.Queue("big"), jobs.Unchecked())
	if err != nil {
		t.Fatal(err)
	}
	p, err := worker.NewPool(f.rdb, worker.Config{
		Jobs: jobs.Config{Namespace: f.ns}, Queues: map[string]int{"big": 1}, Concurrency: 1,
		LeaseTTL: 5 * time.Second, ShutdownTimeout: 5 * time.Second,
		Logger: slog.New(slog.DiscardHandler), Maintenance: worker.MaintenanceConfig{Disabled: true},
	})
	must(t, err)
	seen := make(chan int, 1)
	must(t, worker.Register(p, jobs.WorkFunc[echoArgs](func(_ context.Context, j *jobs.Job[echoArgs]) error {
		seen <- len(j.Args.Note)
		return nil
	})))
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(pctx) }()
	jobstest.WaitState(t, f.ledger, "big", res.JobID, jobs.Succeeded)
	cancel()
	must(t, <-done)
	if n := <-seen; n != jobs.MaxPayloadBytes-len(`{"note":""}`) {
		t.Errorf("the handler saw a note of %d bytes", n)
	}

	h := f.handler(dashboard.Options{})
	var raw struct {
		Job struct {
			Args map[string]string `json:"args"`
		} `json:"job"`
	}
	body := getJSON(t, h, "/api/jobs/big/"+res.JobID, &raw)
	if n := len(raw.Job.Args["note"]); n != jobs.MaxPayloadBytes-len(`{"note":""}`) {
		t.Errorf("the job page shows a note of %d bytes (response %d bytes)", n, len(body))
	}
	var list struct {
		Jobs []struct {
			ArgsSize    int    `json:"args_size"`
			ArgsPreview string `json:"args_preview"`
		} `json:"jobs"`
	}
	getJSON(t, h, "/api/jobs?state=succeeded&queue=big", &list)
	if len(list.Jobs) != 1 || list.Jobs[0].ArgsSize != jobs.MaxPayloadBytes || len(list.Jobs[0].ArgsPreview) > 300 {
		t.Errorf("the list shows %d jobs (%+v), want one of %d bytes with a short preview", len(list.Jobs), list.Jobs, jobs.MaxPayloadBytes)
	}
}
