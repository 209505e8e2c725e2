package fencedqtest_test

import (
	"context"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/fencedqtest"
)

// notice has the JSON shape of email but is another kind.
type notice struct {
	To   string `json:"to"`
	Body string `json:"body"`
}

func (notice) Kind() string { return "notice" }

// TestWantArgsOfAnotherKindFailsTheTest: a Want whose Args are of another
// kind than the helper's type parameter (a copy-paste slip) fails the
// helper at once, naming both kinds, instead of comparing the JSON alone:
// RequireEnqueued would accept an email job for a notice with the same
// fields, and RequireNotEnqueued would pass whatever was enqueued.
func TestWantArgsOfAnotherKindFailsTheTest(t *testing.T) {
	t.Parallel()
	env, client := newEnv(t)
	ctx := context.Background()
	if _, err := client.Enqueue(ctx, email{To: "a", Body: "b"}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]*fencedqtest.Want{
		"value":       {Args: notice{To: "a", Body: "b"}},
		"pointer":     {Args: &notice{To: "a", Body: "b"}},
		"nil pointer": {Args: (*notice)(nil)},
	} {
		for helper, fn := range map[string]func(tb testing.TB){
			"RequireEnqueued":    func(tb testing.TB) { fencedqtest.RequireEnqueued[email](ctx, tb, env, want) },
			"RequireNotEnqueued": func(tb testing.TB) { fencedqtest.RequireNotEnqueued[email](ctx, tb, env, want) },
			"Enqueued":           func(tb testing.TB) { fencedqtest.Enqueued[email](ctx, tb, env, want) },
		} {
			msg := failure(t, fn)
			if !strings.Contains(msg, "Want.Args") || !strings.Contains(msg, "notice") || !strings.Contains(msg, "email") {
				t.Errorf("%s, %s: failure %q, want Want.Args refused as of kind notice, not email", name, helper, msg)
			}
		}
	}
	// Args of the helper's kind, as a pointer too, still match.
	if got := fencedqtest.Enqueued[email](ctx, t, env, &fencedqtest.Want{Args: &email{To: "a", Body: "b"}}); len(got) != 1 {
		t.Errorf("Enqueued with *email args: %d jobs, want 1", len(got))
	}
}
