package fencedqtest_test

import (
	"context"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/jobs"
)

// TestWaitStateRefusesAStateThatDoesNotExist: a state no job can reach
// (a typo, another library's name for succeeded) fails the test at once,
// naming it and the states there are, instead of waiting it out.
func TestWaitStateRefusesAStateThatDoesNotExist(t *testing.T) {
	env, client := newEnv(t)
	ctx := context.Background()
	res, err := client.Enqueue(ctx, email{To: "a"})
	if err != nil {
		t.Fatal(err)
	}
	msg := failure(t, func(tb testing.TB) { env.WaitState(ctx, tb, res.JobID, jobs.Succeeded, "completed") })
	if !strings.Contains(msg, `"completed" is not a job state`) || !strings.Contains(msg, string(jobs.Cancelled)) {
		t.Fatalf("failure %q, want it to name the state that does not exist and the states there are", msg)
	}
}
