package fencedqtest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/fencedqtest"
	"github.com/fencedq/fencedq/jobs"
)

// TestRequireEnqueuedShowsWhatDiffers: when no job matches, the failure
// lists each job of the kind with the fields that differ from the Want,
// its value beside the wanted one (timeout, headers, group...), not only
// its id, queue and args, which may all match.
func TestRequireEnqueuedShowsWhatDiffers(t *testing.T) {
	env, client := newEnv(t)
	ctx := context.Background()
	if _, err := client.Enqueue(ctx, email{To: "ada@example.com"}, jobs.Queue("mail"), jobs.Timeout(5*time.Second),
		jobs.Header("tenant", "acme"), jobs.Group("tenant-acme")); err != nil {
		t.Fatal(err)
	}
	msg := failure(t, func(tb testing.TB) {
		fencedqtest.RequireEnqueued[email](ctx, tb, env, &fencedqtest.Want{Queue: "mail", Timeout: time.Second,
			Headers: map[string]string{"tenant": "globex"}, Group: "tenant-globex"})
	})
	for _, want := range []string{"timeout 5s (want 1s)", `header tenant "acme" (want "globex")`, `group "tenant-acme" (want "tenant-globex")`} {
		if !strings.Contains(msg, want) {
			t.Errorf("failure %q does not say %s", msg, want)
		}
	}
}
