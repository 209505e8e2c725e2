package fencedqtest_test

import (
	"context"
	"strings"
	"testing"
	"time"

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

// TestWaitStateNamesTheNamespaceOfAJobNeverFound: a job never found is
// most often looked for in another namespace than the one that holds it
// (an Env built with another jobs.Config than the client's): the failure
// names the Env's namespace.
func TestWaitStateNamesTheNamespaceOfAJobNeverFound(t *testing.T) {
	t.Parallel()
	env, client := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	msg := failure(t, func(tb testing.TB) { env.WaitState(ctx, tb, "no-such-job", jobs.Succeeded) })
	if !strings.Contains(msg, "never found in namespace "+client.Inspector().Namespace()) {
		t.Fatalf("failure %q, want it to name the namespace looked in", msg)
	}
}
