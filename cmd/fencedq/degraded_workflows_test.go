package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/examples/bank"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/workflow"
)

// TestWorkflowInspectWithAMasterDown: with the master holding a workflow's
// home queue and another workflow's step killed, `workflow inspect` prints
// the workflows it read (the step not read unreachable), in text and JSON,
// and `workflow inspect --id` the workflow, then each exits 1 naming what
// it could not read, as the other listings do.
func TestWorkflowInspectWithAMasterDown(t *testing.T) {
	d := startDegraded(t)
	ctx := context.Background()
	queueOn := func(prefix string, on bool) string {
		for i := 0; ; i++ {
			q := fmt.Sprintf("%s%d", prefix, i)
			if (d.master(d.ns+":{"+q+"}:pending") == d.victim.Addr) == on {
				return q
			}
		}
	}
	near, far := queueOn("near", false), queueOn("far", true)
	tr := bank.Transfer{From: "acct-000", To: "acct-001", Cents: 5}
	if _, err := workflow.Enqueue(ctx, d.client, workflow.New("gone").Add("a", tr, workflow.Options(jobs.Queue(far)))); err != nil {
		t.Fatal(err)
	}
	split, err := workflow.Enqueue(ctx, d.client, workflow.New("split").
		Add("a", tr, workflow.Options(jobs.Queue(near))).
		Add("b", tr, workflow.After("a"), workflow.Options(jobs.Queue(far))))
	if err != nil {
		t.Fatal(err)
	}
	whole, err := workflow.Enqueue(ctx, d.client, workflow.New("whole").Add("a", tr, workflow.Options(jobs.Queue(near))))
	if err != nil {
		t.Fatal(err)
	}
	d.victim.Kill()
	conn := d.conn()
	partial := func(args []string, code int, out, errOut string) {
		t.Helper()
		if code != 1 || !strings.Contains(errOut, "could not be read") || !strings.Contains(errOut, far) {
			t.Fatalf("%v: exit %d %q %q, want what it read and 1 naming %s", args, code, out, errOut, far)
		}
	}
	args := append([]string{"workflow", "inspect"}, conn...)
	code, out, errOut := runCLI(t, args...)
	partial(args, code, out, errOut)
	if !strings.Contains(out, split.ID) || !strings.Contains(out, whole.ID) || !strings.Contains(out, "2 workflow(s)") {
		t.Fatalf("%v: %q, want workflows %s and %s", args, out, split.ID, whole.ID)
	}
	args = append(args, "--json")
	code, out, errOut = runCLI(t, args...)
	partial(args, code, out, errOut)
	var list []workflow.Status
	if err := json.Unmarshal([]byte(out), &list); err != nil || len(list) != 2 {
		t.Fatalf("%v: %q (%v), want the two workflows read", args, out, err)
	}
	args = append([]string{"workflow", "inspect", "--id", split.ID}, conn...)
	code, out, errOut = runCLI(t, args...)
	partial(args, code, out, errOut)
	if !strings.Contains(strings.Join(strings.Fields(out), " "), "b a unreachable") {
		t.Fatalf("%v: %q, want step b unreachable", args, out)
	}
}
