package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/jobs"
)

// TestCancelAndRunNowWithSeenState: cancel and run-now with --seen-state
// (and --seen-token) act only on the job as the operator saw it: a
// scheduled job that started running since is left alone (exit 1, saying
// what it was seen as and what it is now), and nothing is written.
func TestCancelAndRunNowWithSeenState(t *testing.T) {
	e := newOperatorEnv(t)
	ctx := context.Background()
	id := e.enqueue(jobs.Delay(time.Hour))
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"cancel", "--job", id, "--actor", "alice", "--note", "x", "--seen-token", "0"}, "--seen-token needs --seen-state"},
		{[]string{"run-now", "--job", id, "--actor", "alice", "--seen-state", "sleeping"}, "--seen-state must be a job state"},
		{[]string{"run-now", "--job", id, "--actor", "alice", "--seen-state", "pending", "--seen-token", "-1"}, "--seen-token must be"},
	} {
		if code, _, errOut := e.cli(c.args...); code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: code %d, stderr %q (want 2 and %q)", c.args, code, errOut, c.want)
		}
	}
	// Seen scheduled (never claimed); it starts before the command runs.
	cl, err := e.ledger.ClaimJob(ctx, "default", id, "pool-1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	before, err := e.ledger.History(ctx, "default", id)
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"cancel", "--job", id, "--actor", "alice", "--note", "not needed", "--seen-state", "pending", "--seen-token", "0"},
		{"cancel", "--job", id, "--actor", "alice", "--note", "not needed", "--seen-state", "pending"},
		{"run-now", "--job", id, "--actor", "alice", "--seen-state", "pending", "--seen-token", "0"},
	} {
		code, _, errOut := e.cli(args...)
		if code != 1 || !strings.Contains(errOut, "cannot "+args[0]) || !strings.Contains(errOut, "seen pending") ||
			!strings.Contains(errOut, "now running") {
			t.Errorf("%v: code %d, stderr %q (want 1, seen pending, now running)", args, code, errOut)
		}
	}
	rec, err := e.ledger.Get(ctx, "default", id)
	if err != nil {
		t.Fatal(err)
	}
	after, err := e.ledger.History(ctx, "default", id)
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != jobs.Running || rec.Token != cl.Token || rec.CancelledBy != "" || len(after) != len(before) {
		t.Fatalf("the stale commands wrote: %s token %d cancel %q, history %d entries (was %d)", rec.State, rec.Token, rec.CancelledBy, len(after), len(before))
	}
	// What is seen now applies.
	code, out, errOut := e.cli("cancel", "--job", id, "--actor", "alice", "--note", "stop it", "--seen-state", "running", "--seen-token", cl.Token.String())
	if code != 0 || !strings.Contains(out, "is asked to stop") {
		t.Fatalf("cancel of the running job seen: %d %q %q", code, out, errOut)
	}
}

// TestResolveWithSeenState: resolve with --seen-state and --seen-token
// decides only on the job as the operator saw it: a dead job seen under an
// earlier attempt's token is left alone (exit 1), and the one seen now is
// re-run.
func TestResolveWithSeenState(t *testing.T) {
	e := newOperatorEnv(t)
	ctx := context.Background()
	id := e.enqueue()
	cl := e.claim(id)
	cs, err := e.ledger.Complete(ctx, "default", []ledger.Completion{{ID: id, Token: cl.Token,
		Outcome: ledger.Outcome{To: jobs.Dead, Error: "card declined", Reason: "permanent error"}}})
	if err != nil || !cs[0].Applied {
		t.Fatalf("commit dead: %+v %v", cs, err)
	}
	if code, _, errOut := e.cli("resolve", "--job", id, "--decision", "rerun", "--actor", "alice", "--seen-token", "1"); code != 2 ||
		!strings.Contains(errOut, "--seen-token needs --seen-state") {
		t.Fatalf("--seen-token alone: %d %q", code, errOut)
	}
	stale := (cl.Token - 1).String()
	for _, args := range [][]string{
		{"--seen-state", "uncertain"},
		{"--seen-state", "dead", "--seen-token", stale},
	} {
		code, _, errOut := e.cli(append([]string{"resolve", "--job", id, "--decision", "rerun", "--actor", "alice"}, args...)...)
		if code != 1 || !strings.Contains(errOut, "cannot resolve") {
			t.Errorf("resolve %v of a job dead under token %s: code %d, stderr %q (want 1)", args, cl.Token, code, errOut)
		}
	}
	if s := e.state(id); s != jobs.Dead {
		t.Fatalf("the stale decisions wrote: the job is %s", s)
	}
	code, _, errOut := e.cli("resolve", "--job", id, "--decision", "rerun", "--actor", "alice", "--seen-state", "dead", "--seen-token", cl.Token.String())
	if code != 0 || e.state(id) != jobs.Pending {
		t.Fatalf("resolve of the job as seen: %d %q, state %s", code, errOut, e.state(id))
	}
}

// TestSeenRunsWithSeenToken: inspect shows how many times operators re-ran
// a job, and --seen-runs (with --seen-token) names the run seen: a job
// cancelled and re-run by someone else since, back pending and never
// claimed, is left alone (exit 1) unless the run seen is the one it is on.
func TestSeenRunsWithSeenToken(t *testing.T) {
	e := newOperatorEnv(t)
	ctx := context.Background()
	id := e.enqueue(jobs.Delay(time.Hour))
	if code, _, errOut := e.cli("cancel", "--job", id, "--actor", "alice", "--note", "x", "--seen-runs", "1"); code != 2 ||
		!strings.Contains(errOut, "--seen-runs needs --seen-token") {
		t.Fatalf("--seen-runs alone: %d %q", code, errOut)
	}
	if code, _, errOut := e.cli("cancel", "--job", id, "--actor", "alice", "--note", "x", "--seen-state", "pending", "--seen-token", "0", "--seen-runs", "-1"); code != 2 ||
		!strings.Contains(errOut, "--seen-runs must be") {
		t.Fatalf("--seen-runs -1: %d %q", code, errOut)
	}
	if code, _, errOut := e.cli("cancel", "--job", id, "--actor", "bob", "--note", "withdrawn"); code != 0 {
		t.Fatalf("cancel: %d %q", code, errOut)
	}
	if code, _, errOut := e.cli("resolve", "--job", id, "--decision", "rerun", "--actor", "carol", "--note", "asked again"); code != 0 {
		t.Fatalf("re-run: %d %q", code, errOut)
	}
	if code, out, errOut := e.cli("inspect", "--job", id); code != 0 || !strings.Contains(out, "runs 1") {
		t.Fatalf("inspect: %d %q %q (want runs 1)", code, out, errOut)
	}
	code, _, errOut := e.cli("cancel", "--job", id, "--actor", "alice", "--note", "stale", "--seen-state", "pending", "--seen-token", "0")
	if code != 1 || !strings.Contains(errOut, "re-ran it since") {
		t.Fatalf("cancel seen on run 0: %d %q (want 1, naming the re-run)", code, errOut)
	}
	if rec, err := e.ledger.Get(ctx, "default", id); err != nil || rec.State != jobs.Pending {
		t.Fatalf("the stale cancel wrote: %+v %v", rec, err)
	}
	if code, out, errOut := e.cli("cancel", "--job", id, "--actor", "alice", "--note", "as seen", "--seen-state", "pending", "--seen-token", "0", "--seen-runs", "1"); code != 0 ||
		!strings.Contains(out, "is now cancelled") {
		t.Fatalf("cancel seen on run 1: %d %q %q", code, out, errOut)
	}
}

// TestRunNowInAPausedQueueSaysItWaits: run-now of a job whose queue is
// paused says so: the job is due, and starts once the queue is resumed.
func TestRunNowInAPausedQueueSaysItWaits(t *testing.T) {
	e := newOperatorEnv(t)
	id := e.enqueue(jobs.Delay(time.Hour))
	if _, err := e.client.Pause(context.Background(), "default", "bob", "incident"); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := e.cli("run-now", "--job", id, "--actor", "alice")
	if code != 0 || !strings.Contains(out, "is due now") || !strings.Contains(out, "is paused by operator:bob") || !strings.Contains(out, "once the queue is resumed") {
		t.Fatalf("run-now in a paused queue: %d %q %q", code, out, errOut)
	}
}
