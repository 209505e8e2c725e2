package worker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// TestNewPoolRefusesTheJobsConfigTheClientRefuses: NewPool checks the
// jobs.Config it is given before filling defaults, so a retention the
// client refuses (negative, or under a second) is refused by the pool too,
// with the same error, instead of being replaced by the default.
func TestNewPoolRefusesTheJobsConfigTheClientRefuses(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	for name, jc := range map[string]jobs.Config{
		"negative retention":   {Namespace: ns, Retention: -time.Hour},
		"sub-second retention": {Namespace: ns, Retention: time.Millisecond},
		"negative replicas":    {Namespace: ns, Durability: jobs.Durability{Replicas: -1}},
	} {
		want := jc.Validate()
		if !errors.Is(want, jobs.ErrInvalid) {
			t.Fatalf("%s: jobs.Config.Validate: %v, want ErrInvalid", name, want)
		}
		if _, err := jobs.NewClient(rdb, jc).Enqueue(ctx, panicArgs{}); err == nil || err.Error() != want.Error() {
			t.Errorf("%s: the client's enqueue: %v, want %v", name, err, want)
		}
		p, err := worker.NewPool(rdb, worker.Config{Jobs: jc})
		if p != nil || !errors.Is(err, jobs.ErrInvalid) || err.Error() != want.Error() {
			t.Errorf("%s: NewPool: %v, %v; want the client's error %v", name, p, err, want)
		}
	}
	if _, err := worker.NewPool(rdb, worker.Config{Jobs: jobs.Config{Namespace: ns, Retention: time.Hour}}); err != nil {
		t.Fatalf("a valid retention: %v", err)
	}
}
