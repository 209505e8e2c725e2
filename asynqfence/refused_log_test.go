package asynqfence_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/hibiken/asynq"

	"github.com/fencedq/fencedq/asynqfence"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/syncbuf"
	"github.com/fencedq/fencedq/jobs"
)

// TestRefusedTaskLogQuotesItsTypeCut: a task refused for its payload's
// size is logged with its type, task id and queue cut to 64 bytes (they
// are not checked yet, and asynq takes any text), as a refused name is
// quoted everywhere, never whole.
func TestRefusedTaskLogQuotesItsTypeCut(t *testing.T) {
	logs := &syncbuf.Buffer{}
	long := "big" + strings.Repeat("t", 10000)
	p := startInProcessWith(t, asynqfence.Options{WorkerID: "in-process", Logger: slog.New(slog.NewJSONHandler(logs, nil))},
		func(mux *asynq.ServeMux) {
			mux.HandleFunc(long, func(context.Context, *asynq.Task) error { return nil })
		})
	big := append([]byte(`{"x":"`), bytes.Repeat([]byte("x"), jobs.MaxPayloadBytes)...)
	big = append(big, `"}`...)
	if _, err := p.client.Enqueue(asynq.NewTask(long, big), asynq.TaskID("id"+strings.Repeat("i", 10000))); err != nil {
		t.Fatal(err)
	}
	if err := p.next(); !errors.Is(err, jobs.ErrInvalid) {
		t.Fatalf("oversized payload: %v, want ErrInvalid", err)
	}
	out := logs.String()
	if !strings.Contains(out, "task refused: payload too large") {
		t.Fatalf("no refusal logged: %.300q", out)
	}
	if strings.Contains(out, strings.Repeat("t", 100)) || strings.Contains(out, strings.Repeat("i", 100)) ||
		!strings.Contains(out, `"kind":"big`+strings.Repeat("t", 61)+`..."`) {
		t.Fatalf("the refusal quotes the type or the task id whole, or not cut to 64 bytes (%d bytes of log): %.400q", len(out), out)
	}
}

// TestHugeHandlerErrorIsCutInTheLog: a handler's huge error (a response
// body quoted whole) is logged cut at ledger.MaxErrorLen, as a panic's
// value is and as the job's record keeps it, not whole.
func TestHugeHandlerErrorIsCutInTheLog(t *testing.T) {
	logs := &syncbuf.Buffer{}
	p := startInProcessWith(t, asynqfence.Options{WorkerID: "in-process", Logger: slog.New(slog.NewJSONHandler(logs, nil))},
		func(mux *asynq.ServeMux) {
			mux.HandleFunc("huge", func(context.Context, *asynq.Task) error {
				return fmt.Errorf("upstream said: %s: %w", strings.Repeat("body ", 1<<18), asynq.SkipRetry)
			})
		})
	if _, err := p.client.Enqueue(asynq.NewTask("huge", []byte(`{}`)), asynq.TaskID("t1")); err != nil {
		t.Fatal(err)
	}
	if err := p.next(); err == nil {
		t.Fatal("the failed delivery returned nil")
	}
	found := false
	for _, line := range strings.Split(logs.String(), "\n") {
		if !strings.Contains(line, `"msg":"job dead"`) {
			continue
		}
		found = true
		if len(line) > 2*ledger.MaxErrorLen || !strings.Contains(line, "bytes cut") {
			t.Fatalf("the dead job was logged in %d bytes, want its error cut: %.300s", len(line), line)
		}
	}
	if !found {
		t.Fatalf("the dead job was not logged: %.500s", logs.String())
	}
}
