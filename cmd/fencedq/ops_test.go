package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
)

// TestHelpPrintsOnce: --help prints the usage once, on stdout, for every
// command; a bad flag is one line and a hint on stderr, exit 2.
func TestHelpPrintsOnce(t *testing.T) {
	for _, c := range commands {
		code, out, errOut := runCLI(t, c.name, "--help")
		if code != 0 || strings.Count(out, "Usage: fencedq "+c.name) != 1 || errOut != "" {
			t.Errorf("%s --help: code %d, %d usages on stdout, stderr %q", c.name, code, strings.Count(out, "Usage:"), errOut)
		}
		code, out, errOut = runCLI(t, c.name, "--no-such-flag")
		if code != 2 || out != "" || strings.Contains(errOut, "Usage") ||
			errOut != "fencedq "+c.name+": flag provided but not defined: -no-such-flag\nRun 'fencedq "+c.name+" --help' for its flags.\n" {
			t.Errorf("%s --no-such-flag: code %d, stdout %q, stderr %q", c.name, code, out, errOut)
		}
	}
}

// TestBadFlagValuesAreErrors: log levels and formats are checked when the
// flags are parsed.
func TestBadFlagValuesAreErrors(t *testing.T) {
	for _, args := range [][]string{
		{"dashboard", "--log-level", "loud"},
		{"dashboard", "--log-format", "xml"},
	} {
		code, _, errOut := runCLI(t, args...)
		if code != 2 || !strings.Contains(errOut, "invalid value") || !strings.Contains(errOut, strings.TrimPrefix(args[1], "-")) {
			t.Errorf("%v: code %d, stderr %q", args, code, errOut)
		}
	}
}

// TestRedisUnreachableIsOneLine: the process prints one error line, not
// the Redis client's own retry logs (checked on a real process, whose
// stderr the client's logger writes to).
func TestRedisUnreachableIsOneLine(t *testing.T) {
	port := redistest.FreePort(t)
	cmd := exec.Command(os.Args[0], "queues", "--redis", fmt.Sprintf("redis://127.0.0.1:%d", port))
	cmd.Env = append(os.Environ(), "FENCEDQ_RUN_MAIN=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("exit: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], fmt.Sprintf("fencedq queues: redis redis://127.0.0.1:%d does not answer", port)) || stdout.Len() != 0 {
		t.Fatalf("stderr %q, stdout %q", stderr.String(), stdout.String())
	}
}

// TestEnqueueRefusesArgsThatAreNoJSONObject: args that are not one JSON
// object (trailing data, an array) are a usage error that writes nothing;
// the JSON output is snake_case.
func TestEnqueueRefusesArgsThatAreNoJSONObject(t *testing.T) {
	e := newOperatorEnv(t)
	for _, trailing := range []string{` {}`, `}`, `]`} {
		if code, _, errOut := e.cli("enqueue", "--kind", "report", "--unchecked", "--args", `{"customer":"acme"}`+trailing); code != 2 || !strings.Contains(errOut, "not valid JSON") {
			t.Fatalf("trailing %q: %d %q", trailing, code, errOut)
		}
	}
	if code, _, errOut := e.cli("enqueue", "--kind", "report", "--unchecked", "--args", `["acme"]`); code != 2 || !strings.Contains(errOut, "must be a JSON object") {
		t.Fatalf("an array: %d %q", code, errOut)
	}
	if n, err := e.ledger.Counts(context.Background(), "default"); err != nil || n[jobs.Pending] != 0 {
		t.Fatalf("a refused enqueue wrote a job: %v %v", n, err)
	}
	code, out, errOut := e.cli("enqueue", "--kind", "report", "--unchecked", "--json", "--op", "op-json", "--args", `{"customer":"acme"}`)
	var res map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res["operation_id"] != "op-json" || res["job_id"] == "" ||
		res["queue"] != "default" || res["deduplicated"] != false || len(res) != 4 {
		t.Fatalf("enqueue --json: %d %q %q", code, out, errOut)
	}
}

// TestQueuesListsAPausedQueueWithoutJobs: a queue paused before it holds
// a job (a mistyped name) is listed, paused, so the pause can be seen.
func TestQueuesListsAPausedQueueWithoutJobs(t *testing.T) {
	e := newOperatorEnv(t)
	if code, _, errOut := e.cli("pause", "--queue", "typoq", "--actor", "alice", "--note", "deploy"); code != 0 {
		t.Fatalf("pause: %d %q", code, errOut)
	}
	code, out, errOut := e.cli("queues")
	if code != 0 || !strings.Contains(out, "typoq") || !strings.Contains(out, "by operator:alice since") ||
		!strings.Contains(out, "1 queue(s)") || strings.Contains(out, "has no queues") {
		t.Fatalf("queues after pausing an empty queue: %d %q %q", code, out, errOut)
	}
}

// TestQueuesPoolsAndResolveByOperation: the queues and pools commands,
// and resolve --op.
func TestQueuesPoolsAndResolveByOperation(t *testing.T) {
	e := newOperatorEnv(t)
	ctx := context.Background()
	id := e.enqueue(jobs.OperationID("op-late"), jobs.Delay(time.Hour))
	code, out, errOut := e.cli("queues")
	if code != 0 || !strings.Contains(out, "PENDING") || !strings.Contains(out, "default") || !strings.Contains(out, "1 queue(s)") {
		t.Fatalf("queues: %d %q %q", code, out, errOut)
	}
	for i, p := range []string{"pool-a", "pool-b"} {
		// pool-b finds Redis's clock 10 minutes ahead of its own.
		clock := jobs.ClockSample{At: time.Now(), Redis: time.Now(), OffsetMS: 2.5, RTTMS: 0.3}
		if i == 1 {
			clock.OffsetMS = 600_000
		}
		if err := e.ledger.Heartbeat(ctx, jobs.PoolInfo{ID: p, Host: "h", PID: 1, Queues: map[string]int{"default": 1}, Concurrency: 4, Busy: 1,
			Version: "v9", Started: time.Now(), Clock: clock}, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := lease.NewManager(e.ledger.Redis(), lease.Config{Namespace: e.ns}).Acquire(ctx, ledger.LeaderResource, "pool-a", time.Minute); err != nil {
		t.Fatal(err)
	}
	code, out, _ = e.cli("pools", "--json")
	var ps []struct {
		ID     string `json:"id"`
		Busy   int    `json:"busy"`
		Leader bool   `json:"leader"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &ps) != nil || len(ps) != 2 {
		t.Fatalf("pools --json: %d %q", code, out)
	}
	for _, p := range ps {
		if p.Leader != (p.ID == "pool-a") || p.Busy != 1 {
			t.Errorf("pool: %+v", p)
		}
	}
	code, out, _ = e.cli("pools")
	if code != 0 || !strings.Contains(out, "1/4") || !strings.Contains(out, "leader") || !strings.Contains(out, "2 live pool(s); 1 with Redis's clock") ||
		!strings.Contains(out, "REDIS CLOCK") || !strings.Contains(out, "+3ms") || !strings.Contains(out, "+10m0s !") {
		t.Fatalf("pools: %d %q", code, out)
	}

	// resolve --op: re-run a cancelled job found by its operation id.
	if _, err := e.client.Cancel(ctx, "default", id, "alice", "x"); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := e.cli("resolve", "--op", "op-late", "--job", id, "--decision", "rerun", "--actor", "bob"); code != 2 || !strings.Contains(errOut, "--job and --op each name a job") {
		t.Fatalf("both --op and --job: %d %q", code, errOut)
	}
	if code, _, errOut := e.cli("resolve", "--op", "op-nope", "--decision", "rerun", "--actor", "bob"); code != 1 || !strings.Contains(errOut, "not found") {
		t.Fatalf("unknown op: %d %q", code, errOut)
	}
	code, out, errOut = e.cli("resolve", "--op", "op-late", "--decision", "rerun", "--actor", "bob", "--note", "back")
	if code != 0 || out != "job "+id+" is now pending\n" {
		t.Fatalf("resolve --op: %d %q %q", code, out, errOut)
	}
}

// TestListingAnUnknownQueueSaysSo: inspect --state and queues given a
// queue no job or pool has used (a mistyped name) say so under the empty
// listing, as pause does, instead of an empty listing alone; --json stays
// one JSON value.
func TestListingAnUnknownQueueSaysSo(t *testing.T) {
	e := newOperatorEnv(t)
	e.enqueue()
	const note = "note: no job or pool has used queue typoq yet; check its name"
	for _, args := range [][]string{{"inspect", "--state", "pending", "--queue", "typoq"}, {"queues", "--queue", "typoq"}} {
		if code, out, errOut := e.cli(args...); code != 0 || !strings.Contains(out, note) {
			t.Errorf("%v: %d %q %q", args, code, out, errOut)
		}
		if code, out, errOut := e.cli(append(args, "--json")...); code != 0 || !json.Valid([]byte(out)) {
			t.Errorf("%v --json: %d %q %q", args, code, out, errOut)
		}
		known := append(args[:len(args)-1:len(args)-1], "default")
		if code, out, errOut := e.cli(known...); code != 0 || strings.Contains(out, "note:") {
			t.Errorf("%v: %d %q %q", known, code, out, errOut)
		}
	}
}

// TestOperationOnTwoQueues: the same operation id on two queues makes two
// jobs; --queue picks which one inspect --op and resolve --op act on.
func TestOperationOnTwoQueues(t *testing.T) {
	e := newOperatorEnv(t)
	ctx := context.Background()
	ids := map[string]string{}
	for _, q := range []string{"qa", "qb"} {
		res, err := e.client.EnqueueRaw(ctx, "raw", []byte(`{}`), jobs.Queue(q), jobs.OperationID("same"), jobs.Delay(time.Hour), jobs.Unchecked())
		if err != nil {
			t.Fatal(err)
		}
		ids[q] = res.JobID
		if _, err := e.client.Cancel(ctx, q, res.JobID, "alice", "x"); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range []string{"qa", "qb"} {
		code, out, errOut := e.cli("inspect", "--op", "same", "--queue", q, "--json")
		var got struct {
			Job struct {
				ID    string `json:"id"`
				Queue string `json:"queue"`
			} `json:"job"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &got) != nil || got.Job.ID != ids[q] || got.Job.Queue != q {
			t.Errorf("inspect --op same --queue %s: %d %q %q (want job %s)", q, code, out, errOut, ids[q])
		}
	}
	code, out, errOut := e.cli("resolve", "--op", "same", "--queue", "qb", "--decision", "rerun", "--actor", "bob")
	if code != 0 || out != "job "+ids["qb"]+" is now pending\n" {
		t.Fatalf("resolve --op same --queue qb: %d %q %q", code, out, errOut)
	}
	if s, err := e.client.Inspector().Get(ctx, "qa", ids["qa"]); err != nil || s.State != jobs.Cancelled {
		t.Fatalf("qa's job: %+v %v, want it cancelled still", s, err)
	}
	if code, _, errOut := e.cli("inspect", "--op", "same", "--queue", "qc"); code != 1 || !strings.Contains(errOut, "not found") {
		t.Errorf("inspect --op in a queue without it: %d %q", code, errOut)
	}
}
