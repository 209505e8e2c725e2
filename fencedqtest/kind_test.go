package fencedqtest_test

import (
	"context"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/fencedqtest"
	"github.com/fencedq/fencedq/jobs"
)

type (
	kindNamer struct{ name string }
	// namedArgs reads its kind through a field: on the zero value, a nil
	// pointer.
	namedArgs struct{ Namer *kindNamer }
)

func (a namedArgs) Kind() string { return a.Namer.name }

// TestHelpersRefuseAKindTheyCannotRead: an args type whose Kind method
// panics on the zero value fails the test of Work, WorkJob and
// RequireNotEnqueued with a message naming the type, as worker.Register
// refuses it, instead of panicking.
func TestHelpersRefuseAKindTheyCannotRead(t *testing.T) {
	env, _ := newEnv(t)
	ctx := context.Background()
	w := jobs.WorkFunc[namedArgs](func(context.Context, *jobs.Job[namedArgs]) error { return nil })
	for name, fn := range map[string]func(tb testing.TB){
		"Work":               func(tb testing.TB) { fencedqtest.Work(ctx, tb, env, w, namedArgs{Namer: &kindNamer{"named"}}) },
		"WorkJob":            func(tb testing.TB) { fencedqtest.WorkJob(ctx, tb, env, w, "default", "some-id") },
		"RequireNotEnqueued": func(tb testing.TB) { fencedqtest.RequireNotEnqueued[namedArgs](ctx, tb, env, nil) },
	} {
		var msg string
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s panicked: %v", name, r)
				}
			}()
			msg = failure(t, fn)
		}()
		if !strings.Contains(msg, "namedArgs.Kind()") || !strings.Contains(msg, "panicked") {
			t.Errorf("%s: failure %q, want the args type's Kind refused", name, msg)
		}
	}
}
