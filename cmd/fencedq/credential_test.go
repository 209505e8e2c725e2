package main

import (
	"strings"
	"testing"
)

// TestInspectNamesNoTokenBesideItsOwner: an attempt's token with its
// owner (the worker id) is the attempt's credential; inspect, as text and
// as JSON, shows the job's token and never the worker id that holds it.
func TestInspectNamesNoTokenBesideItsOwner(t *testing.T) {
	e := newOperatorEnv(t)
	id := e.enqueue()
	cl := e.claim(id) // as worker pool-1
	tok := cl.Token.String()
	for _, args := range [][]string{
		{"inspect", "--job", id},
		{"inspect", "--job", id, "--json"},
		{"inspect", "--state", "running", "--json"},
	} {
		code, out, errOut := e.cli(args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		if !strings.Contains(out, tok) {
			t.Errorf("%v does not show the job's token %s:\n%s", args, tok, out)
		}
		if strings.Contains(out, "pool-1") {
			t.Errorf("%v names the owner pool-1 beside the token %s:\n%s", args, tok, out)
		}
	}
}
