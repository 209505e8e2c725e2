package fencedqtest_test

import (
	"context"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/fencedqtest"
	"github.com/fencedq/fencedq/jobs"
)

// TestHelpersGivenAContextAlreadyEnded: a helper handed a context that
// already ended (a test's context cancelled by an earlier cleanup, a
// deadline spent) fails at once saying so, instead of with what the
// client makes of it ("Redis could not be reached", "partitions: context
// canceled"), which sends the reader after a Redis that is fine.
func TestHelpersGivenAContextAlreadyEnded(t *testing.T) {
	t.Parallel()
	env, client := newEnv(t)
	res, err := client.Enqueue(context.Background(), email{To: "a"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	w := jobs.WorkFunc[email](func(context.Context, *jobs.Job[email]) error { return nil })
	for name, fn := range map[string]func(tb testing.TB){
		"Work":               func(tb testing.TB) { fencedqtest.Work(ctx, tb, env, w, email{To: "b"}) },
		"WorkJob":            func(tb testing.TB) { fencedqtest.WorkJob(ctx, tb, env, w, "default", res.JobID) },
		"Enqueued":           func(tb testing.TB) { fencedqtest.Enqueued[email](ctx, tb, env, nil) },
		"RequireEnqueued":    func(tb testing.TB) { fencedqtest.RequireEnqueued[email](ctx, tb, env, nil) },
		"RequireNotEnqueued": func(tb testing.TB) { fencedqtest.RequireNotEnqueued[email](ctx, tb, env, nil) },
	} {
		msg := failure(t, fn)
		if !strings.Contains(msg, name+": the context had already ended") || strings.Contains(msg, "Redis could not be reached") {
			t.Errorf("%s: failure %q, want it to say the context had already ended", name, msg)
		}
	}
	if rec, err := client.Inspector().Get(context.Background(), "default", res.JobID); err != nil || rec.State != jobs.Pending {
		t.Fatalf("job after the refused helpers: %+v, %v; want it pending, untouched", rec, err)
	}
}
