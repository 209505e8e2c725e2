package main

import (
	"encoding/json"
	"flag"
	"slices"
	"strings"
	"testing"
)

// TestJSONOnErrorsIsJSON: every command offering --json, asked for JSON
// and failing (a job, workflow or schedule not found, a queue no job used,
// bad usage, --json given before a flag that stops the parse), leaves one JSON object on stdout naming the error and the
// exit code, as the text on stderr does: a script piping the output to a
// JSON parser gets the reason, not an empty input.
func TestJSONOnErrorsIsJSON(t *testing.T) {
	e := newOperatorEnv(t)
	cases := [][]string{
		{"enqueue", "--kind", "nobody-runs-this", "--args", "{}"},
		{"inspect", "--job", "no-such-job"},
		{"resolve", "--job", "no-such-job", "--decision", "rerun", "--actor", "alice", "--note", "n"},
		{"cancel", "--job", "no-such-job", "--actor", "alice", "--note", "n"},
		{"run-now", "--job", "no-such-job", "--actor", "alice"},
		{"partitions", "--queue", "orders", "--set", "0", "--actor", "alice"},
		{"schedules", "--id", "no-such-schedule"},
		{"workflow inspect", "--id", "no-such-workflow"},
		{"workflow cancel", "--id", "no-such-workflow", "--actor", "alice", "--note", "n"},
		{"queues", "--queue", "bad name!"},
		{"pools", "--no-such-flag"},
		{"inspect", "--no-such-flag", "--json"}, // --json after the flag that stopped the parse
		{"pause", "--actor", "alice"},           // no --queue: bad usage
		{"resume", "--queue", "default"},        // no --actor
	}
	offering := map[string]bool{}
	for _, c := range commands {
		fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
		c.setup(fs)
		if fs.Lookup("json") != nil {
			offering[c.name] = true
		}
	}
	for _, args := range cases {
		delete(offering, args[0])
		words := strings.Fields(args[0])
		if !slices.Contains(args, "--json") {
			words = append(words, "--json") // before a flag that stops the parse
		}
		code, out, errText := e.cli(append(words, args[1:]...)...)
		if code == 0 {
			t.Errorf("%s: exit 0, want a failure (stdout %q)", args[0], out)
			continue
		}
		var got struct {
			Error    string `json:"error"`
			ExitCode int    `json:"exit_code"`
		}
		dec := json.NewDecoder(strings.NewReader(out))
		if err := dec.Decode(&got); err != nil || dec.More() {
			t.Errorf("%s --json: exit %d, stdout %q is not one JSON object (%v); stderr %q", args[0], code, out, err, errText)
			continue
		}
		if got.Error == "" || got.ExitCode != code || !strings.Contains(errText, got.Error) {
			t.Errorf("%s --json: stdout %+v, want the error of stderr %q and exit code %d", args[0], got, errText, code)
		}
	}
	for name := range offering {
		t.Errorf("%s offers --json and has no case here", name)
	}
}
