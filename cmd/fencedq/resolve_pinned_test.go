package main

import (
	"context"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/jobs"
)

// TestResolveHeldToTheJobItRead: resolve reads the job to know whether its
// "not applied" decision needs a fence store, and refuses it without one
// (and without --unfenced) when the job is uncertain or in review. A job
// read running, whose attempt then ends uncertain before the decision is
// written, must not take a dead or a rerun: that decision would say "not
// applied" of an attempt never fenced out, with no --fence-* flag and no
// --unfenced. It fails, nothing written.
func TestResolveHeldToTheJobItRead(t *testing.T) {
	for _, d := range []string{"dead", "rerun"} {
		t.Run(d, func(t *testing.T) {
			e := newOperatorEnv(t)
			id := e.enqueue()
			cl := e.claim(id)
			afterResolveRead = func() {
				// the attempt's lease lapses: its outcome is unknown
				cs, err := e.ledger.Complete(context.Background(), jobs.DefaultQueue, []ledger.Completion{{ID: id, Token: cl.Token,
					Outcome: ledger.Outcome{To: jobs.Uncertain, Reason: "lease expired"}}})
				if err != nil || !cs[0].Applied {
					t.Errorf("commit uncertain: %+v %v", cs, err)
				}
			}
			t.Cleanup(func() { afterResolveRead = nil })
			code, out, errOut := e.cli("resolve", "--job", id, "--decision", d, "--actor", "alice", "--note", "no such charge")
			if s := e.state(id); code != 1 || !strings.Contains(errOut, "cannot resolve") || s != jobs.Uncertain {
				t.Fatalf("resolve --decision %s of a job read running, uncertain before the decision: code %d, stdout %q, stderr %q; job %s (want 1, nothing decided, still uncertain)",
					d, code, out, errOut, s)
			}
		})
	}
}
