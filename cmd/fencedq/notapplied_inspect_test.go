package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/jobs"
)

// TestInspectShowsWhatNotAppliedDid: a reconciler's "not applied" is a
// failed attempt, retried while the job has attempts left and dead once
// they are spent; inspect's history says which, not a bare "rerun".
func TestInspectShowsWhatNotAppliedDid(t *testing.T) {
	for _, c := range []struct {
		retries int
		want    string
		state   jobs.State
	}{
		{1, "uncertain -> rerun -> retry by reconciler", jobs.Pending},
		{0, "uncertain -> rerun -> dead by reconciler", jobs.Dead},
	} {
		t.Run(c.want, func(t *testing.T) {
			e := newOperatorEnv(t)
			id, _ := e.uncertain(jobs.MaxRetries(c.retries))
			d := time.Hour
			state, err := e.ledger.Decide(context.Background(), jobs.DefaultQueue, id, ledger.Resolution{
				From: []jobs.State{jobs.Uncertain}, Decision: jobs.DecideRerun, Actor: "reconciler",
				Note: "not applied: no charge found", RetryIn: &d})
			if err != nil || state != c.state {
				t.Fatalf("decide: %s %v, want %s", state, err, c.state)
			}
			code, out, errOut := e.cli("inspect", "--job", id)
			if code != 0 || !strings.Contains(out, c.want) {
				t.Fatalf("inspect: %d %q %q, want %q in its history", code, out, errOut, c.want)
			}
		})
	}
}
