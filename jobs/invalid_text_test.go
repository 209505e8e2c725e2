package jobs_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestErrInvalidNamesNoJobWhenThereIsNone: ErrInvalid refuses operator
// actions, reads, configurations and clients as well as jobs, so its text
// must not call every refusal an invalid job ("invalid job: an operator
// action needs the operator's name").
func TestErrInvalidNamesNoJobWhenThereIsNone(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	refusals := map[string]error{}
	_, refusals["pause without an actor"] = c.Pause(ctx, "default", "", "deploy")
	_, refusals["a list of no state"] = c.Inspector().List(ctx, jobs.ListParams{State: "finished", Limit: 1})
	_, refusals["a client over nil"] = jobs.NewClient(nil, jobs.Config{}).Enqueue(ctx, noteArgs{})
	refusals["a retention of 1ms"] = jobs.Config{Namespace: ns, Retention: time.Millisecond}.Validate()
	_, refusals["a negative delay"] = c.Enqueue(ctx, noteArgs{}, jobs.Delay(-time.Hour))
	for what, err := range refusals {
		if !errors.Is(err, jobs.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", what, err)
			continue
		}
		if strings.Contains(err.Error(), "invalid job") {
			t.Errorf("%s: %q blames a job", what, err)
		}
	}
}
