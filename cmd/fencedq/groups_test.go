package main

import (
	"strings"
	"testing"

	"github.com/fencedq/fencedq/jobs"
)

// TestInspectGroupedJob: inspect shows a pending grouped job's group and
// how many of its group are ahead of it; the pending list shows the jobs
// waiting in the group's own index too, saying the same.
func TestInspectGroupedJob(t *testing.T) {
	e := newOperatorEnv(t)
	// jobs.Limit("", 0): no limit on the transfer's resource, so the jobs
	// wait for their group's turn only.
	e.enqueue(jobs.Group("acme"), jobs.Limit("", 0))
	id := e.enqueue(jobs.Group("acme"), jobs.Limit("", 0))
	code, out, errOut := e.cli("inspect", "--job", id)
	if code != 0 {
		t.Fatalf("inspect: code %d, %s", code, errOut)
	}
	for _, want := range []string{"  group acme\n", "  waiting for group acme, 1 ahead\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("inspect lacks %q:\n%s", want, out)
		}
	}
	code, out, errOut = e.cli("inspect", "--state", "pending")
	if code != 0 {
		t.Fatalf("inspect --state pending: code %d, %s", code, errOut)
	}
	for _, want := range []string{"waiting for group acme, 0 ahead (next of its group)", "waiting for group acme, 1 ahead"} {
		if !strings.Contains(out, want) {
			t.Errorf("the pending list lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(out, id) {
		t.Errorf("the pending list lacks the group's second job %s:\n%s", id, out)
	}
}
