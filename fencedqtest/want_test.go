package fencedqtest_test

import (
	"context"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/fencedqtest"
	"github.com/fencedq/fencedq/jobs"
)

// TestWantThatNamesNothing: a Want whose state is no job state, or whose
// queue is no valid queue name (a typo), fails the helper at once, naming
// it, instead of matching no job: RequireNotEnqueued would pass whatever
// was enqueued.
func TestWantThatNamesNothing(t *testing.T) {
	t.Parallel()
	env, client := newEnv(t)
	ctx := context.Background()
	if _, err := client.Enqueue(ctx, email{To: "a"}, jobs.Queue("mail")); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		want *fencedqtest.Want
		says string
	}{
		"state": {&fencedqtest.Want{State: "completed"}, `Want.State: "completed" is not a job state`},
		"queue": {&fencedqtest.Want{Queue: "mail "}, `Want.Queue: "mail "`},
	} {
		msg := failure(t, func(tb testing.TB) { fencedqtest.RequireNotEnqueued[email](ctx, tb, env, c.want) })
		if !strings.Contains(msg, c.says) {
			t.Errorf("%s: RequireNotEnqueued: failure %q, want it to say %q", name, msg, c.says)
		}
		msg = failure(t, func(tb testing.TB) { fencedqtest.Enqueued[email](ctx, tb, env, c.want) })
		if !strings.Contains(msg, c.says) {
			t.Errorf("%s: Enqueued: failure %q, want it to say %q", name, msg, c.says)
		}
	}
}
