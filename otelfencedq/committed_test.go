package otelfencedq_test

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/codes"

	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/otelfencedq"
	"github.com/fencedq/fencedq/worker"
)

type refusedArgs struct{}

func (refusedArgs) Kind() string { return "refused" }

// TestAttemptSpanTellsACommitRefused: a handler succeeds, but the ledger
// refuses its outcome (the job's record went away under the attempt, as a
// newer attempt's token or an expired lease would also have it refused).
// The attempt's span says the outcome was refused, with an error status,
// not that the attempt succeeded; an attempt whose outcome is applied
// records the state the ledger recorded.
func TestAttemptSpanTellsACommitRefused(t *testing.T) {
	var tr *traced
	tr = newTraced(t, func(p *worker.Pool) error {
		return worker.Register(p, jobs.WorkFunc[refusedArgs](func(ctx context.Context, j *jobs.Job[refusedArgs]) error {
			return tr.ledger.Redis().Del(ctx, tr.ledger.JobKey(j.Queue, j.ID)).Err()
		}))
	})
	if _, err := tr.client.Enqueue(context.Background(), refusedArgs{}); err != nil {
		t.Fatal(err)
	}
	res, err := tr.client.Enqueue(context.Background(), payment{Account: "a"})
	if err != nil {
		t.Fatal(err)
	}
	jobstest.WaitState(t, tr.ledger, "default", res.JobID, jobs.Succeeded)
	tr.waitAttempts("attempt refused", 1)
	s := tr.spans("attempt refused")[0]
	if !attr(s, otelfencedq.AttrRefused).AsBool() || s.Status.Code != codes.Error {
		t.Fatalf("span of an attempt whose outcome the ledger refused: refused %v, status %v, outcome %q; want refused, an error status",
			attr(s, otelfencedq.AttrRefused).AsBool(), s.Status, attr(s, otelfencedq.AttrOutcome).AsString())
	}
	p := tr.spans("attempt payment")[0]
	if attr(p, otelfencedq.AttrRefused).AsBool() || p.Status.Code == codes.Error || attr(p, otelfencedq.AttrOutcome).AsString() != worker.OutcomeSucceeded {
		t.Fatalf("span of an applied attempt of job %s: refused %v, status %v, outcome %q; want succeeded",
			res.JobID, attr(p, otelfencedq.AttrRefused).AsBool(), p.Status, attr(p, otelfencedq.AttrOutcome).AsString())
	}
}

type unansweredArgs struct{}

func (unansweredArgs) Kind() string { return "unanswered" }

// TestAttemptSpanTellsACommitFailed: a handler succeeds, but Redis takes
// no write until the pool stops trying to commit (its writes paused, as
// during a failover): the attempt's span records that its outcome was not
// committed, with an error status, not a success.
func TestAttemptSpanTellsACommitFailed(t *testing.T) {
	var tr *traced
	// A server of its own: a shared one (REDIS_ADDR) would pause other tests' writes.
	tr = newTracedOn(t, redistest.Start(t, redistest.Options{}).Client(), redistest.Namespace(t), func(p *worker.Pool) error {
		return worker.Register(p, jobs.WorkFunc[unansweredArgs](func(ctx context.Context, j *jobs.Job[unansweredArgs]) error {
			return tr.ledger.Redis().Do(ctx, "CLIENT", "PAUSE", "60000", "WRITE").Err()
		}))
	})
	t.Cleanup(func() { tr.ledger.Redis().Do(context.Background(), "CLIENT", "UNPAUSE") }) // before the pool stops
	if _, err := tr.client.Enqueue(context.Background(), unansweredArgs{}); err != nil {
		t.Fatal(err)
	}
	tr.waitAttempts("attempt unanswered", 1)
	s := tr.spans("attempt unanswered")[0]
	failed := false
	for _, e := range s.Events {
		for _, kv := range e.Attributes {
			failed = failed || kv.Key == "exception.message" && strings.Contains(kv.Value.AsString(), "not committed")
		}
	}
	if !failed || s.Status.Code != codes.Error || attr(s, otelfencedq.AttrRefused).AsBool() {
		t.Fatalf("span of an attempt whose commit failed: events %v, status %v, refused %v; want the outcome not committed, an error status",
			s.Events, s.Status, attr(s, otelfencedq.AttrRefused).AsBool())
	}
}
