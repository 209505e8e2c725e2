package asynqfence_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fencedq/fencedq/asynqfence"
	"github.com/fencedq/fencedq/internal/syncbuf"
	"github.com/fencedq/fencedq/jobs"
)

// TestTaskOfAnotherKindNamingAJobIsRefused: a task whose JobHeader names a
// bridged job of another kind is not that job's delivery. It is refused
// (ErrInvalid, SkipRetry), counted as rejected and logged with both ids
// and kinds but no payload; its handler never runs, and the job keeps its
// state, token and attempts.
func TestTaskOfAnotherKindNamingAJobIsRefused(t *testing.T) {
	logs := &syncbuf.Buffer{}
	reg := prometheus.NewRegistry()
	var refunds atomic.Int32
	cfg := testServerConfig()
	// Job a1's task waits in asynq's retry set while the other task is
	// delivered.
	cfg.RetryDelayFunc = func(int, error, *asynq.Task) time.Duration { return time.Hour }
	opts := asynqfence.Options{WorkerID: "in-process", Registerer: reg, Logger: slog.New(slog.NewJSONHandler(logs, nil))}
	p := startInProcessServer(t, opts, cfg, func(mux *asynq.ServeMux) {
		mux.HandleFunc("order", func(context.Context, *asynq.Task) error { return errors.New("try later") })
		mux.HandleFunc("refund", func(context.Context, *asynq.Task) error {
			refunds.Add(1)
			return nil
		})
	})
	if _, err := p.client.Enqueue(asynq.NewTask("order", []byte(`{"secret":"order-payload"}`)), asynq.TaskID("a1"), asynq.MaxRetry(3)); err != nil {
		t.Fatal(err)
	}
	if err := p.next(); err == nil {
		t.Fatal("the order's first delivery returned nil, want its handler's error")
	}
	before := p.record("a1")
	if before.State != jobs.Pending || before.Kind != "order" || before.Attempts != 1 {
		t.Fatalf("job a1 after a failed attempt: %s, kind %s, %d attempts; want pending order, 1 attempt", before.State, before.Kind, before.Attempts)
	}
	refund := asynq.NewTaskWithHeaders("refund", []byte(`{"secret":"refund-payload"}`), map[string]string{asynqfence.JobHeader: "a1"})
	if _, err := p.client.Enqueue(refund, asynq.TaskID("b1"), asynq.MaxRetry(3)); err != nil {
		t.Fatal(err)
	}
	if err := p.next(); !errors.Is(err, jobs.ErrInvalid) || !errors.Is(err, asynq.SkipRetry) {
		t.Fatalf("delivery of a refund naming order a1: %v, want ErrInvalid and SkipRetry", err)
	}
	if n := refunds.Load(); n != 0 {
		t.Fatalf("the refund handler ran %d times, want never", n)
	}
	after := p.record("a1")
	if after.State != before.State || after.Token != before.Token || after.Attempts != before.Attempts ||
		after.Kind != "order" || string(after.Payload) != string(before.Payload) {
		t.Fatalf("job a1 changed: %s token %d, %d attempts, kind %s, payload %s; was %s token %d, %d attempts",
			after.State, after.Token, after.Attempts, after.Kind, after.Payload, before.State, before.Token, before.Attempts)
	}
	var logged string
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, `"msg":"task refused`) && strings.Contains(line, `"task_id":"b1"`) {
			logged = line
		}
	}
	if !strings.Contains(logged, `"job_id":"a1"`) || !strings.Contains(logged, `"kind":"refund"`) ||
		!strings.Contains(logged, "kind order") || strings.Contains(logged, "secret") {
		t.Fatalf("the refusal is not logged with both ids and kinds, or quotes a payload: %.1000s", logs.String())
	}
	if n := rejected(t, reg, "invalid"); n != 1 {
		t.Fatalf("fencedq_jobs_rejected_total{reason=\"invalid\"} = %v, want 1", n)
	}
}

// rejected sums fencedq_jobs_rejected_total of reason in reg.
func rejected(t *testing.T, reg *prometheus.Registry, reason string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, f := range fams {
		if f.GetName() != "fencedq_jobs_rejected_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == reason {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}
