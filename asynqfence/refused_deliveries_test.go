package asynqfence_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/hibiken/asynq"

	"github.com/fencedq/fencedq/asynqfence"
	"github.com/fencedq/fencedq/internal/syncbuf"
	"github.com/fencedq/fencedq/jobs"
)

// TestRefusedDeliveriesAreLogged: a delivery the bridge refuses for good
// (asynq archives its task: an invalid task type or operation id, an
// operation a native job holds) is logged with its task id, and the job
// id where it has one, not only counted: an operator looking at the
// archived task finds why.
func TestRefusedDeliveriesAreLogged(t *testing.T) {
	logs := &syncbuf.Buffer{}
	p := startInProcessWith(t, asynqfence.Options{WorkerID: "in-process", Logger: slog.New(slog.NewJSONHandler(logs, nil))},
		func(mux *asynq.ServeMux) {
			mux.HandleFunc("send email", func(context.Context, *asynq.Task) error { return nil })
			mux.HandleFunc("order", func(context.Context, *asynq.Task) error { return nil })
		})
	client := jobs.NewClient(p.rdb, jobs.Config{Namespace: p.ledger.Namespace()})
	if _, err := client.Enqueue(context.Background(), orderArgs{N: 1}, jobs.OperationID("order-9")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		task *asynq.Task
		id   string
		want error
	}{
		{asynq.NewTask("send email", []byte(`{}`)), "bad-type", jobs.ErrInvalid},
		{asynq.NewTaskWithHeaders("order", []byte(`{}`), map[string]string{asynqfence.OperationHeader: "op\x001"}), "bad-op", jobs.ErrInvalid},
		{asynq.NewTaskWithHeaders("order", []byte(`{}`), map[string]string{asynqfence.OperationHeader: "order-9"}), "native-op", asynqfence.ErrConflict},
	} {
		if _, err := p.client.Enqueue(c.task, asynq.TaskID(c.id), asynq.MaxRetry(0)); err != nil {
			t.Fatal(err)
		}
		if err := p.next(); !errors.Is(err, c.want) || !errors.Is(err, asynq.SkipRetry) {
			t.Fatalf("delivery of task %s: %v, want %v and SkipRetry", c.id, err, c.want)
		}
		found := false
		for _, line := range strings.Split(logs.String(), "\n") {
			found = found || strings.Contains(line, `"msg":"task refused`) && strings.Contains(line, `"task_id":"`+c.id+`"`)
		}
		if !found {
			t.Fatalf("the refusal of task %s was not logged with its task id: %.1000s", c.id, logs.String())
		}
	}
}
