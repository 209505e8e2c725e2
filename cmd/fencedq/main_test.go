package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/internal/redistest"
)

// TestMain lets the demo re-execute this test binary as `fencedq worker`.
func TestMain(m *testing.M) {
	if os.Getenv("FENCEDQ_RUN_MAIN") == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestHelpForEveryCommand(t *testing.T) {
	code, out, _ := runCLI(t, "--help")
	if code != 0 || !strings.Contains(out, "Commands:") {
		t.Fatalf("top-level help: %d %q", code, out)
	}
	for _, c := range commands {
		code, out, _ := runCLI(t, c.name, "--help")
		if code != 0 || !strings.Contains(out, "Usage: fencedq "+c.name) || !strings.Contains(out, "-") {
			t.Errorf("%s --help: code %d, output %q", c.name, code, out)
		}
	}
}

func TestBadUsageExitsTwoWithAClearError(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{}, "Usage"},
		{[]string{"nope"}, `unknown command "nope"`},
		{[]string{"worker", "--no-such-flag"}, "flag provided but not defined"},
		{[]string{"worker", "--queues", "default=x"}, "priority"},
		{[]string{"demo", "--duration", "1s"}, "at least 5s"},
		{[]string{"enqueue"}, "--args is required"},
		{[]string{"inspect"}, "give --state"},
		{[]string{"inspect", "--state", "sleeping"}, "unknown state"},
		{[]string{"resolve", "--job", "x"}, "--actor are required"},
		{[]string{"resolve", "--job", "x", "--actor", "a", "--decision", "maybe"}, "--decision must be"},
		{[]string{"dashboard", "extra-arg"}, "unexpected argument"},
		{[]string{"inspect", "--redis", "not a url", "--state", "review"}, "--redis"},
	}
	for _, c := range cases {
		code, _, errOut := runCLI(t, c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: code %d, stderr %q (want 2 and %q)", c.args, code, errOut, c.want)
		}
	}
	t.Setenv("FENCEDQ_CONCURRENCY", "lots")
	if code, _, errOut := runCLI(t, "worker"); code != 2 || !strings.Contains(errOut, "FENCEDQ_CONCURRENCY") {
		t.Errorf("bad env var: %d %q", code, errOut)
	}
}

func TestEnqueueInspectResolve(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	url := "redis://" + srv.Addr
	ns := redistest.Namespace(t)
	code, out, errOut := runCLI(t, "enqueue", "--redis", url, "--namespace", ns, "--op", "op-1", "--json",
		"--args", `{"from":"acct-000","to":"acct-001","cents":250,"memo":"rent for flat 4"}`)
	if code != 0 {
		t.Fatalf("enqueue: %d %s", code, errOut)
	}
	var res struct{ JobID string }
	_ = json.Unmarshal([]byte(out), &res)
	code, out, _ = runCLI(t, "enqueue", "--redis", url, "--namespace", ns, "--op", "op-1",
		"--args", `{"from":"acct-000","to":"acct-001","cents":250}`)
	if code != 0 || !strings.Contains(out, "deduplicated") || !strings.Contains(out, res.JobID) {
		t.Fatalf("second enqueue: %d %q", code, out)
	}
	if code, _, errOut := runCLI(t, "enqueue", "--redis", url, "--namespace", ns, "--args", `{"from":"a","to":"a","cents":1}`); code != 2 || !strings.Contains(errOut, "must differ") {
		t.Fatalf("invalid transfer: %d %q", code, errOut)
	}
	code, out, _ = runCLI(t, "inspect", "--redis", url, "--namespace", ns, "--op", "op-1")
	if code != 0 || !strings.Contains(out, "state pending") || strings.Contains(out, "rent for flat") || !strings.Contains(out, "[redacted]") {
		t.Fatalf("inspect: %d %q", code, out)
	}
	code, out, _ = runCLI(t, "inspect", "--redis", url, "--namespace", ns, "--state", "pending", "--json")
	if code != 0 || !strings.Contains(out, res.JobID) {
		t.Fatalf("list: %d %q", code, out)
	}
	// Only review (or uncertain) jobs can be resolved.
	code, _, errOut = runCLI(t, "resolve", "--redis", url, "--namespace", ns, "--job", res.JobID, "--decision", "dead", "--actor", "alice")
	if code != 1 || !strings.Contains(errOut, "not in a state") {
		t.Fatalf("resolve pending: %d %q", code, errOut)
	}
	if code, _, errOut := runCLI(t, "inspect", "--redis", url, "--namespace", ns, "--job", "no-such-job"); code != 1 || !strings.Contains(errOut, "not found") {
		t.Fatalf("missing job: %d %q", code, errOut)
	}
}

func TestDemoOnEmbeddedRedis(t *testing.T) {
	code, out, errOut := runCLI(t, "demo", "--duration", "20s", "--json", "--addr", "127.0.0.1:0")
	if code != 0 {
		t.Fatalf("demo exit %d\nstderr:\n%s", code, errOut)
	}
	var s summary
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("summary is not JSON: %v\n%s", err, out)
	}
	t.Logf("summary: %+v", s)
	if s.Lost != 0 || !s.MoneyConserved {
		t.Fatalf("lost %d, money conserved %v", s.Lost, s.MoneyConserved)
	}
	if s.FencedRejections < 1 || s.Deduplicated < 1 || s.UncertainResolved < 1 {
		t.Fatalf("demo did not show fencing, deduplication and reconciliation: %+v\nstderr:\n%s", s, errOut)
	}
	if s.Enqueued < 50 || s.Succeeded < s.Enqueued/2 {
		t.Fatalf("too little work done: %+v", s)
	}
	if len(s.Stages) < 4 {
		t.Fatalf("stages: %v", s.Stages)
	}
}
