package maintenance

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/jobs"
)

// A Reconcile whose error (or panic value) quotes a whole response body is
// kept, in the job's record, its history and the resolver's log lines, cut
// to ledger.MaxErrorLen as a handler's error is: it cannot fill Redis for
// the job's retention nor the logs.
func TestResolverCapsAReconcileErrorsText(t *testing.T) {
	f := newFixture(t)
	cfg := f.config()
	body := strings.Repeat("<html>", 1<<20/6)
	cfg.Reconcile = func(kind string) ReconcileFunc {
		if kind == "panics" {
			return func(context.Context, *jobs.Record) (jobs.Verdict, error) { panic(body) }
		}
		return func(context.Context, *jobs.Record) (jobs.Verdict, error) { return jobs.CannotTell, errors.New(body) }
	}
	l := f.leader(cfg)
	leader := f.lead("pool-a")
	ids := []string{f.uncertain("fails", leader), f.uncertain("panics", leader)}

	if err := l.resolver.runOnce(f.ctx, leader); err != nil {
		t.Fatal(err)
	}
	const bound = ledger.MaxErrorLen + 100
	for _, id := range ids {
		e := f.resolved(id)
		if e == nil {
			t.Fatalf("job %s: no decision", id)
		}
		if len(e.Note) > bound || !strings.Contains(e.Note, "bytes cut)") {
			t.Errorf("job %s: the decision's note holds %d bytes, want it cut to %d", id, len(e.Note), ledger.MaxErrorLen)
		}
	}
	for _, line := range strings.Split(f.logs.String(), "\n") {
		if len(line) > 2*bound {
			t.Errorf("a log line of %d bytes: %.120s…", len(line), line)
		}
	}
}
