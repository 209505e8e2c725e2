package main

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/examples/bank"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/workflow"
)

// workflow inspect lists and shows a workflow with each step's state,
// token and output; workflow cancel cancels what has not run.
func TestWorkflowInspectAndCancel(t *testing.T) {
	e := newOperatorEnv(t)
	ctx := context.Background()
	tr := bank.Transfer{From: "acct-000", To: "acct-001", Cents: 5}
	res, err := workflow.Enqueue(ctx, e.client, workflow.New("order").
		Add("charge", tr).
		Add("ship", tr, workflow.After("charge")))
	if err != nil {
		t.Fatal(err)
	}
	charge := res.Steps["charge"].JobID
	// the waiting step has its column in the queues table
	code, text, _ := e.cli("queues")
	if lines := strings.Split(text, "\n"); code != 0 || len(lines) < 2 ||
		strings.Join(strings.Fields(lines[0])[:3], " ") != "QUEUE WAITING PENDING" ||
		strings.Join(strings.Fields(lines[1])[:3], " ") != "default 1 1" {
		t.Fatalf("queues: %d %q", code, text)
	}
	c := e.claim(charge)
	out := []byte(`{"receipt":"r-1"}`)
	if _, err := e.ledger.Complete(ctx, "default", []ledger.Completion{{ID: charge, Token: c.Token,
		Outcome: ledger.Outcome{To: ledger.Succeeded, Output: out, OutputDisplay: out}}}); err != nil {
		t.Fatal(err)
	}
	code, text, _ = e.cli("workflow", "inspect")
	if code != 0 || !strings.Contains(text, res.ID) || !strings.Contains(text, "1/2") {
		t.Fatalf("workflow inspect: %d %q", code, text)
	}
	code, text, _ = e.cli("workflow", "inspect", "--id", res.ID)
	if code != 0 || !strings.Contains(text, `"order": running, 1/2`) || !strings.Contains(text, `{"receipt":"r-1"}`) ||
		!strings.Contains(strings.Join(strings.Fields(text), " "), "ship charge pending - 0") {
		t.Fatalf("workflow inspect --id: %d %q", code, text)
	}
	if code, text, _ = e.cli("inspect", "--job", charge); code != 0 || !strings.Contains(text, `output {"receipt":"r-1"}`) ||
		!strings.Contains(text, "step charge of workflow "+res.ID) {
		t.Fatalf("inspect --job: %d %q", code, text)
	}
	code, text, _ = e.cli("workflow", "cancel", "--id", res.ID, "--actor", "ada", "--note", "customer left")
	if code != 0 || !strings.Contains(text, "cancelled, 2/2") {
		t.Fatalf("workflow cancel: %d %q", code, text)
	}
	if r, _ := e.ledger.Get(ctx, "default", res.Steps["ship"].JobID); r.State != jobs.Cancelled {
		t.Fatalf("ship after the cancel: %s", r.State)
	}
	if code, _, errText := e.cli("workflow", "inspect", "--id", "nope"); code != 1 || !strings.Contains(errText, "not found") {
		t.Fatalf("unknown workflow: %d %q", code, errText)
	}
	// a workflow that succeeded has nothing to cancel
	done, err := workflow.Enqueue(ctx, e.client, workflow.New("done").Add("only", tr))
	if err != nil {
		t.Fatal(err)
	}
	only := done.Steps["only"].JobID
	c = e.claim(only)
	if _, err := e.ledger.Complete(ctx, "default", []ledger.Completion{{ID: only, Token: c.Token,
		Outcome: ledger.Outcome{To: ledger.Succeeded}}}); err != nil {
		t.Fatal(err)
	}
	code, _, errText := e.cli("workflow", "cancel", "--id", done.ID, "--actor", "ada", "--note", "late")
	if code == 0 || !strings.Contains(errText, "a workflow that finished, succeeded or failed, has nothing to cancel") {
		t.Fatalf("workflow cancel of a succeeded workflow: %d %q", code, errText)
	}
}

// TestWorkflowNeedsASubcommand: `fencedq workflow` without inspect or
// cancel names the two in one line (exit 2), and --help lists them.
func TestWorkflowNeedsASubcommand(t *testing.T) {
	for _, args := range [][]string{{"workflow"}, {"workflow", "bogus"}, {"workflow", "--id", "w1"}} {
		code, out, errOut := runCLI(t, args...)
		if code != 2 || out != "" || strings.Count(errOut, "\n") != 1 ||
			!strings.Contains(errOut, "fencedq workflow inspect") || !strings.Contains(errOut, "fencedq workflow cancel") {
			t.Errorf("%v: code %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
	for _, args := range [][]string{{"workflow", "--help"}, {"workflow", "-h"}, {"workflow", "help"}} {
		code, out, errOut := runCLI(t, args...)
		if code != 0 || errOut != "" || !strings.Contains(out, "workflow inspect") || !strings.Contains(out, "workflow cancel") {
			t.Errorf("%v: code %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
}

// TestWorkflowInspectCutsOutputAtARune: a long output is cut to its first
// characters, never inside one (which would print as \x escapes).
func TestWorkflowInspectCutsOutputAtARune(t *testing.T) {
	e := newOperatorEnv(t)
	ctx := context.Background()
	tr := bank.Transfer{From: "acct-000", To: "acct-001", Cents: 5}
	res, err := workflow.Enqueue(ctx, e.client, workflow.New("order").Add("charge", tr))
	if err != nil {
		t.Fatal(err)
	}
	charge := res.Steps["charge"].JobID
	c := e.claim(charge)
	out := []byte(`{"receipt":"` + strings.Repeat("é", 40) + `"}`)
	if _, err := e.ledger.Complete(ctx, "default", []ledger.Completion{{ID: charge, Token: c.Token,
		Outcome: ledger.Outcome{To: ledger.Succeeded, Output: out, OutputDisplay: out}}}); err != nil {
		t.Fatal(err)
	}
	code, text, _ := e.cli("workflow", "inspect", "--id", res.ID)
	if code != 0 || strings.Contains(text, `\x`) || !strings.Contains(text, `{"receipt":"ééé`) || !strings.Contains(text, "é...") {
		t.Fatalf("workflow inspect --id: %d %q", code, text)
	}
}

// workflow inspect counts what it lists and says when --limit left older
// workflows out, as inspect --state does.
func TestWorkflowInspectCountsAndLimit(t *testing.T) {
	e := newOperatorEnv(t)
	ctx := context.Background()
	if code, text, _ := e.cli("workflow", "inspect"); code != 0 || !strings.Contains(text, "0 workflow(s)") {
		t.Fatalf("workflow inspect, none: %d %q", code, text)
	}
	tr := bank.Transfer{From: "acct-000", To: "acct-001", Cents: 5}
	for range 3 {
		if _, err := workflow.Enqueue(ctx, e.client, workflow.New("order").Add("charge", tr)); err != nil {
			t.Fatal(err)
		}
	}
	if code, text, _ := e.cli("workflow", "inspect"); code != 0 || !strings.Contains(text, "3 workflow(s)") || strings.Contains(text, "left out") {
		t.Fatalf("workflow inspect: %d %q", code, text)
	}
	code, text, _ := e.cli("workflow", "inspect", "--limit", "2")
	if code != 0 || !strings.Contains(text, "the newest 2 workflow(s) shown; older ones left out (--limit 2)") ||
		strings.Count(text, "order") != 2 {
		t.Fatalf("workflow inspect --limit 2: %d %q", code, text)
	}
	if code, text, _ := e.cli("workflow", "inspect", "--limit", "2", "--json"); code != 0 || strings.Count(text, `"name":"order"`) != 2 {
		t.Fatalf("workflow inspect --limit 2 --json: %d %q", code, text)
	}
}

// workflow inspect prints the workflow's name escaped once, as every text
// output escapes: a backslash as it is, an escape character (in a record
// written before names were checked, or by hand) as \x1b.
func TestWorkflowInspectEscapesTheNameOnce(t *testing.T) {
	e := newOperatorEnv(t)
	ctx := context.Background()
	tr := bank.Transfer{From: "acct-000", To: "acct-001", Cents: 5}
	res, err := workflow.Enqueue(ctx, e.client, workflow.New(`C:\orders`).Add("charge", tr))
	if err != nil {
		t.Fatal(err)
	}
	opt, err := redis.ParseURL(e.url)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	key := e.ns + ":{" + res.Home + "}:wf:" + res.ID
	def := rdb.HGet(ctx, key, "def").Val()
	odd := strings.Replace(def, `"name":"C:\\orders"`, `"name":"C:\\orders\u001b[2J"`, 1)
	if odd == def {
		t.Fatalf("workflow record %q: no name to change", def)
	}
	if err := rdb.HSet(ctx, key, "def", odd).Err(); err != nil {
		t.Fatal(err)
	}
	code, text, _ := e.cli("workflow", "inspect", "--id", res.ID)
	if want := `"C:\orders\x1b[2J"`; code != 0 || !strings.Contains(text, want) || strings.Contains(text, "\x1b") {
		t.Fatalf("workflow inspect --id: %d %q, want the name shown as %s", code, text, want)
	}
}

// workflow inspect --limit takes 1000, the most its help names, and --json
// lists no workflow as an empty array, as the other listings do.
func TestWorkflowInspectLimitBoundsAndEmptyJSON(t *testing.T) {
	e := newOperatorEnv(t)
	if code, text, errText := e.cli("workflow", "inspect", "--json"); code != 0 || strings.TrimSpace(text) != "[]" {
		t.Fatalf("workflow inspect --json, none: %d %q %q, want []", code, text, errText)
	}
	ctx := context.Background()
	tr := bank.Transfer{From: "acct-000", To: "acct-001", Cents: 5}
	if _, err := workflow.Enqueue(ctx, e.client, workflow.New("order").Add("charge", tr)); err != nil {
		t.Fatal(err)
	}
	if code, text, errText := e.cli("workflow", "inspect", "--limit", "1000"); code != 0 || !strings.Contains(text, "1 workflow(s)") {
		t.Fatalf("workflow inspect --limit 1000: %d %q %q", code, text, errText)
	}
	if code, text, errText := e.cli("workflow", "inspect", "--limit", "1001"); code != 2 || text != "" {
		t.Fatalf("workflow inspect --limit 1001: %d %q %q, want exit 2", code, text, errText)
	}
}

// TestWorkflowInspectShowsDependenciesAllowedToFail: a step that runs
// even when a dependency fails says so, as the dashboard does: without it
// a step pending after its dependency ended dead reads as a broken rule.
func TestWorkflowInspectShowsDependenciesAllowedToFail(t *testing.T) {
	e := newOperatorEnv(t)
	ctx := context.Background()
	tr := bank.Transfer{From: "acct-000", To: "acct-001", Cents: 5}
	res, err := workflow.Enqueue(ctx, e.client, workflow.New("order").
		Add("charge", tr).
		Add("notify", tr).
		Add("ship", tr, workflow.After("charge", "notify"), workflow.AllowFailure("notify")))
	if err != nil {
		t.Fatal(err)
	}
	code, text, _ := e.cli("workflow", "inspect", "--id", res.ID)
	if code != 0 || !strings.Contains(text, "charge,notify (may fail: notify)") {
		t.Fatalf("workflow inspect --id: %d %q", code, text)
	}
}
