package main

import (
	"context"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/jobs"
)

// An operation id used on two queues names two jobs: resolve --op and
// inspect --op without --queue refuse to pick one (exit 2, naming the
// queues) and change nothing; with --queue they take that queue's job.
func TestOperationOnTwoQueuesNeedsQueue(t *testing.T) {
	e := newOperatorEnv(t)
	ctx := context.Background()
	ids := map[string]string{}
	for _, q := range []string{"default", "other"} {
		ids[q] = e.enqueue(jobs.Queue(q), jobs.OperationID("pay-1"))
		if _, err := e.client.Cancel(ctx, q, ids[q], "alice", "test"); err != nil {
			t.Fatal(err)
		}
	}
	code, text, errText := e.cli("resolve", "--op", "pay-1", "--decision", "rerun", "--actor", "bob")
	if code != 2 || text != "" || !strings.Contains(errText, "default, other") || !strings.Contains(errText, "--queue") {
		t.Fatalf("resolve --op on two queues: %d %q %q, want exit 2 naming both queues", code, text, errText)
	}
	for q, id := range ids {
		if r, err := e.client.Inspector().Get(ctx, q, id); err != nil || r.State != jobs.Cancelled {
			t.Fatalf("job %s in %s after a refused resolve: %+v %v, want it cancelled", id, q, r, err)
		}
	}
	if code, text, errText := e.cli("inspect", "--op", "pay-1"); code != 2 || text != "" || !strings.Contains(errText, "default, other") {
		t.Fatalf("inspect --op on two queues: %d %q %q, want exit 2 naming both queues", code, text, errText)
	}
	if code, text, errText := e.cli("resolve", "--op", "pay-1", "--queue", "other", "--decision", "rerun", "--actor", "bob"); code != 0 || !strings.Contains(text, ids["other"]) {
		t.Fatalf("resolve --op --queue other: %d %q %q", code, text, errText)
	}
	if r, err := e.client.Inspector().Get(ctx, "default", ids["default"]); err != nil || r.State != jobs.Cancelled {
		t.Fatalf("the default queue's job after re-running other's: %+v %v, want it cancelled", r, err)
	}
	if code, text, errText := e.cli("inspect", "--op", "nope"); code != 1 || !strings.Contains(errText, "not found") {
		t.Fatalf("inspect --op nope: %d %q %q", code, text, errText)
	}
}

// A job id in two queues (bridged tasks' ids are unique only in their
// asynq queue) names two jobs: cancel --job and inspect --job without
// --queue refuse to pick one (exit 2, naming the queues); nothing is
// cancelled.
func TestJobIDOnTwoQueuesNeedsQueue(t *testing.T) {
	e := newOperatorEnv(t)
	ctx := context.Background()
	for _, q := range []string{"default", "other"} {
		if _, err := e.ledger.Insert(ctx, []*ledger.NewJob{{ID: "order-42", Kind: "k", Queue: q, OperationID: "op-" + q, Payload: []byte("{}")}}); err != nil {
			t.Fatal(err)
		}
	}
	code, text, errText := e.cli("cancel", "--job", "order-42", "--actor", "bob", "--note", "wrong one?")
	if code != 2 || text != "" || !strings.Contains(errText, "default, other") || !strings.Contains(errText, "--queue") {
		t.Fatalf("cancel --job in two queues: %d %q %q, want exit 2 naming both queues", code, text, errText)
	}
	for _, q := range []string{"default", "other"} {
		if r, err := e.client.Inspector().Get(ctx, q, "order-42"); err != nil || r.State != jobs.Pending {
			t.Fatalf("job in %s after a refused cancel: %+v %v, want it pending", q, r, err)
		}
	}
	if code, text, errText := e.cli("inspect", "--job", "order-42"); code != 2 || text != "" || !strings.Contains(errText, "default, other") {
		t.Fatalf("inspect --job in two queues: %d %q %q, want exit 2 naming both queues", code, text, errText)
	}
	if code, text, errText := e.cli("cancel", "--job", "order-42", "--queue", "other", "--actor", "bob", "--note", "this one"); code != 0 || !strings.Contains(text, "cancelled") {
		t.Fatalf("cancel --job --queue other: %d %q %q", code, text, errText)
	}
	if r, err := e.client.Inspector().Get(ctx, "default", "order-42"); err != nil || r.State != jobs.Pending {
		t.Fatalf("the default queue's job after cancelling other's: %+v %v, want it pending", r, err)
	}
}

// A bad note or actor is bad usage (exit 2), checked before the job is
// looked up: also for a job that does not exist (which would be exit 1).
func TestBadNoteIsUsageBeforeLookup(t *testing.T) {
	e := newOperatorEnv(t)
	for _, args := range [][]string{
		{"cancel", "--job", "nope", "--note", "\x1b[2J", "--actor", "a"},
		{"run-now", "--job", "nope", "--note", "bell\a", "--actor", "a"},
		{"resolve", "--job", "nope", "--decision", "rerun", "--note", "\x1b[2J", "--actor", "a"},
		{"cancel", "--job", "nope", "--note", "why", "--actor", "a\x1b[2J"},
		{"pause", "--queue", "default", "--note", "\x1b[2J", "--actor", "a"},
	} {
		code, text, errText := e.cli(args...)
		if code != 2 || text != "" || strings.Contains(errText, "\x1b") || strings.Contains(errText, "\a") {
			t.Errorf("%q: %d %q %q, want exit 2 with the input escaped", args, code, text, errText)
		}
	}
	if p, err := e.client.Inspector().Paused(context.Background(), "default"); err != nil || p != nil {
		t.Fatalf("queue default after a refused pause: %+v %v", p, err)
	}
}
