package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
)

// hostile is what an attacker would put in a note, an error text, a host
// name: retitle the terminal (OSC 0, ended by BEL) and clear the screen.
const hostile = "\x1b]0;pwned\a\x1b[2J"

// hostileShown is hostile as the CLI must print it.
const hostileShown = `\x1b]0;pwned\x07\x1b[2J`

// rawTerminalBytes reports the first byte of s a terminal could act on
// (C0 controls other than line feed and tab, DEL, and the C1 range
// encoded in UTF-8), or -1.
func rawTerminalBytes(s string) int {
	for i, r := range s {
		if (r < 0x20 && r != '\n' && r != '\t') || (r >= 0x7f && r <= 0x9f) {
			return i
		}
	}
	return -1
}

// TestOperatorNotesWithControlCharactersAreRefused: a note or an actor
// carrying terminal escapes is refused before anything is written, and
// the error line itself shows them escaped.
func TestOperatorNotesWithControlCharactersAreRefused(t *testing.T) {
	e := newOperatorEnv(t)
	id := e.enqueue(jobs.Delay(time.Hour))
	for _, args := range [][]string{
		{"cancel", "--job", id, "--actor", "alice", "--note", hostile},
		{"cancel", "--job", id, "--actor", "al" + hostile, "--note", "x"},
		{"pause", "--queue", "default", "--actor", "alice", "--note", hostile},
		{"resume", "--queue", "default", "--actor", hostile},
		{"run-now", "--job", id, "--actor", "alice", "--note", "a\rb"},
		{"resolve", "--job", id, "--decision", "rerun", "--actor", "alice", "--note", hostile},
	} {
		code, out, errOut := e.cli(args...)
		if code != 2 || !strings.Contains(errOut, "control characters") || rawTerminalBytes(out+errOut) >= 0 {
			t.Errorf("%s: code %d, stdout %q, stderr %q (want 2, the rule, nothing raw)", args[0], code, out, errOut)
		}
	}
	if s := e.state(id); s != jobs.Pending {
		t.Fatalf("a refused action changed the job: %s", s)
	}
	if p, err := e.ledger.Paused(context.Background(), "default"); err != nil || p != nil {
		t.Fatalf("a refused pause paused the queue: %+v %v", p, err)
	}
	// A note may still span lines and hold tabs.
	if code, _, errOut := e.cli("cancel", "--job", id, "--actor", "alice", "--note", "line one\n\tline two"); code != 0 {
		t.Fatalf("a two-line note: %d %q", code, errOut)
	}
}

// TestTextOutputEscapesControlCharacters writes terminal escapes where the
// ledger keeps text a handler, an old client or anyone with Redis access
// chose (an error text, a reason, a pause note, history notes, a pool's
// heartbeat, a schedule's fields) and checks every text view prints them
// escaped, never raw.
func TestTextOutputEscapesControlCharacters(t *testing.T) {
	e := newOperatorEnv(t)
	ctx := context.Background()

	// A handler's error text and reason, through the ledger.
	id := e.enqueue()
	c := e.claim(id)
	if _, err := e.ledger.Complete(ctx, "default", []ledger.Completion{{ID: id, Token: c.Token,
		Outcome: ledger.Outcome{To: jobs.Dead, Error: "card declined" + hostile, Reason: "permanent" + hostile}}}); err != nil {
		t.Fatal(err)
	}
	// Notes and actors written without the client's checks.
	if _, err := e.ledger.Decide(ctx, "default", id, ledger.Resolution{From: []jobs.State{jobs.Dead},
		Decision: jobs.DecideRerun, Actor: "operator:" + hostile, Note: hostile}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.ledger.SetPaused(ctx, "default", true, "operator:"+hostile, hostile); err != nil {
		t.Fatal(err)
	}
	if err := e.ledger.Heartbeat(ctx, jobs.PoolInfo{ID: "pool" + hostile, Host: "host" + hostile, Version: "v" + hostile,
		Queues: map[string]int{"default": 1}, Concurrency: 1, Started: time.Now()}, time.Minute); err != nil {
		t.Fatal(err)
	}
	const leader = lease.Token(7)
	if _, err := e.ledger.RegisterSchedule(ctx, leader, jobs.ScheduleSpec{ID: "nightly", Schedule: "@every 1h" + hostile,
		TimeZone: "UTC" + hostile, Kind: "transfer", Queue: "default", CatchUp: "latest" + hostile}); err != nil {
		t.Fatal(err)
	}
	e.recordTick("nightly", leader, time.Date(2030, 1, 7, 8, 0, 0, 0, time.UTC), time.Date(2030, 1, 7, 9, 0, 0, 0, time.UTC))

	for _, args := range [][]string{
		{"inspect", "--job", id},
		{"inspect", "--state", "pending"},
		{"queues"},
		{"pools"},
		{"schedules"},
		{"schedules", "--id", "nightly"},
		{"pause", "--queue", "default", "--actor", "bob", "--note", "again"},
	} {
		code, out, errOut := e.cli(args...)
		if code != 0 {
			t.Errorf("%v: code %d, stderr %q", args, code, errOut)
			continue
		}
		if i := rawTerminalBytes(out + errOut); i >= 0 {
			t.Errorf("%v: raw control byte at %d of %q", args, i, out+errOut)
		}
		if !strings.Contains(out, hostileShown) {
			t.Errorf("%v: output lacks the escaped text %s: %q", args, hostileShown, out)
		}
	}
	// The JSON output carries the text itself, escaped by the encoder.
	code, out, _ := e.cli("inspect", "--job", id, "--json")
	if code != 0 || rawTerminalBytes(out) >= 0 || !strings.Contains(out, `\u001b]0;pwned\u0007\u001b[2J`) {
		t.Errorf("inspect --json: %d %q", code, out)
	}
}

// TestPendingListEscapesTheBridgeName: a pending bridged job's due time
// names the queue that redelivers it, a field of the job's record in
// Redis; the pending list prints it escaped like every other field.
func TestPendingListEscapesTheBridgeName(t *testing.T) {
	e := newOperatorEnv(t)
	id := e.enqueue()
	if err := e.ledger.Redis().HSet(context.Background(), e.ledger.JobKey("default", id), "bridge", "asynq"+hostile).Err(); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := e.cli("inspect", "--state", "pending")
	if code != 0 {
		t.Fatalf("code %d, stderr %q", code, errOut)
	}
	if i := rawTerminalBytes(out + errOut); i >= 0 || !strings.Contains(out, hostileShown) {
		t.Fatalf("raw control byte at %d, or the escaped text missing, in %q", i, out)
	}
}

// TestJSONOutputEscapesWhatATerminalActsOn: encoding/json escapes C0
// controls but writes DEL, C1 controls (the 8-bit CSI among them), line
// separators and bidirectional formatting characters as they are; the
// commands' --json output writes them as \u escapes, so a handler's error
// text or an operation id printed as JSON cannot act on the terminal or
// reorder what it shows, and still decodes to the same text.
func TestJSONOutputEscapesWhatATerminalActsOn(t *testing.T) {
	e := newOperatorEnv(t)
	ctx := context.Background()
	const sneaky = "declined\u009b2J\x7f\u202egnp.exe\u2028"
	id := e.enqueue(jobs.OperationID("op\u202e-1"))
	c := e.claim(id)
	if _, err := e.ledger.Complete(ctx, "default", []ledger.Completion{{ID: id, Token: c.Token,
		Outcome: ledger.Outcome{To: jobs.Dead, Error: sneaky, Reason: "permanent"}}}); err != nil {
		t.Fatal(err)
	}
	// The escapes decode to the text the ledger holds.
	_, out, _ := e.cli("inspect", "--job", id, "--json")
	var got struct {
		Job struct {
			Error       string `json:"error"`
			OperationID string `json:"operation_id"`
		} `json:"job"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || got.Job.Error != sneaky || got.Job.OperationID != "op\u202e-1" {
		t.Fatalf("decoded %+v (%v), want the error %q and the operation id", got, err, sneaky)
	}
	for _, args := range [][]string{
		{"inspect", "--job", id, "--json"},
		{"inspect", "--state", "dead", "--json"},
		{"resolve", "--job", id, "--decision", "rerun", "--actor", "alice", "--json"}, // clears the error
	} {
		code, out, errOut := e.cli(args...)
		if code != 0 {
			t.Fatalf("%v: code %d, stderr %q", args, code, errOut)
		}
		if i := strings.IndexFunc(out, func(r rune) bool {
			return r == 0x7f || r >= 0x80 && r <= 0x9f || r == '\u202e' || r == '\u2028'
		}); i >= 0 {
			t.Errorf("%v: raw %U at %d of %q", args, []rune(out[i:])[0], i, out)
		}
		if !strings.Contains(out, `op\u202e-1`) || args[0] == "inspect" && !strings.Contains(out, `declined\u009b2J\u007f\u202egnp.exe\u2028`) {
			t.Errorf("%v: the escaped error text or operation id is missing: %q", args, out)
		}
	}
}

// TestInvisibleCharactersAreShown: an actor and a note holding invisible
// characters (the client takes them: they are no control characters) are
// printed with those characters escaped, so "alice" and "alice" with a
// zero-width space never read as the same operator; --json writes them
// as \u escapes (a tag character as a surrogate pair).
func TestInvisibleCharactersAreShown(t *testing.T) {
	e := newOperatorEnv(t)
	id := e.enqueue()
	if code, _, errOut := e.cli("cancel", "--job", id, "--actor", "alice\u200b", "--note", "ok\u2060\U000e0041"); code != 0 {
		t.Fatalf("cancel: %d %q", code, errOut)
	}
	code, out, errOut := e.cli("inspect", "--job", id)
	if code != 0 || !strings.Contains(out, `alice\u200b`) || !strings.Contains(out, `ok\u2060\U000e0041`) || strings.ContainsAny(out, "\u200b\u2060\U000e0041") {
		t.Errorf("inspect: %d %q %q", code, out, errOut)
	}
	code, out, errOut = e.cli("inspect", "--job", id, "--json")
	if code != 0 || !strings.Contains(out, `alice\u200b`) || !strings.Contains(out, `ok\u2060\udb40\udc41`) || strings.ContainsAny(out, "\u200b\u2060\U000e0041") {
		t.Errorf("inspect --json: %d %q %q", code, out, errOut)
	}
}
