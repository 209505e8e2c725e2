package jobs_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

type outArgs struct{}

func (outArgs) Kind() string { return "out" }

type receipt struct {
	Amount int    `json:"amount"`
	Card   string `json:"card" fencedq:"sensitive"`
}

// TestStaleOutputRefused: an attempt whose lease lapsed and whose job ran
// again cannot write its output, before or after the newer attempt's
// success; the output is shown redacted and read back whole.
func TestStaleOutputRefused(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	l := ledger.New(rdb, ledger.Config{Namespace: ns})
	res, err := c.Enqueue(ctx, outArgs{})
	if err != nil {
		t.Fatal(err)
	}
	q, id := res.Queue, res.JobID
	// attempt 1 claims, records an output, and stalls past its lease
	a1, err := l.ClaimJob(ctx, q, id, "w1", time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	stale, _ := ledger.WithAttempt(ctx, l, q, id, a1.Token)
	if err := jobs.RecordOutput(stale, receipt{Amount: 1, Card: "stale"}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond) // the 1 ms lease must be over by Redis's clock
	if ex, err := l.Expire(ctx, q, 0, 10); err != nil || len(ex.Moved) != 1 {
		t.Fatalf("expire: %+v, %v", ex, err)
	}
	if _, err := l.Decide(ctx, q, id, ledger.Resolution{Decision: ledger.DecideRerun, Actor: "operator:t"}); err != nil {
		t.Fatal(err)
	}
	a2, err := l.ClaimJob(ctx, q, id, "w2", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	fresh, _ := ledger.WithAttempt(ctx, l, q, id, a2.Token)
	if err := jobs.RecordOutput(fresh, receipt{Amount: 2, Card: "4242"}); err != nil {
		t.Fatal(err)
	}
	complete := func(actx context.Context, tok ledger.Claimed) ledger.Committed {
		raw, shown := ledger.OutputOf(actx)
		got, err := l.Complete(ctx, q, []ledger.Completion{{ID: id, Token: tok.Token,
			Outcome: ledger.Outcome{To: ledger.Succeeded, Output: raw, OutputDisplay: shown}}})
		if err != nil {
			t.Fatal(err)
		}
		return got[0]
	}
	if got := complete(stale, *a1); got.Applied {
		t.Fatal("the stale attempt's completion was applied")
	}
	var out receipt
	if err := c.Output(ctx, q, id, &out); !errors.Is(err, jobs.ErrNoOutput) {
		t.Fatalf("output after the refused completion: %v (%+v), want ErrNoOutput", err, out)
	}
	if got := complete(fresh, *a2); !got.Applied || got.State != jobs.Succeeded {
		t.Fatalf("the live attempt's completion: %+v", got)
	}
	if got := complete(stale, *a1); got.Applied {
		t.Fatal("the stale attempt's completion was applied after the success")
	}
	if err := c.Output(ctx, q, id, &out); err != nil || out != (receipt{Amount: 2, Card: "4242"}) {
		t.Fatalf("output %+v, %v: want the live attempt's", out, err)
	}
	rec, err := c.Inspector().Get(ctx, q, id)
	if err != nil {
		t.Fatal(err)
	}
	if s := string(rec.Output); !strings.Contains(s, `"amount":2`) || strings.Contains(s, "4242") {
		t.Fatalf("inspected output %s: want the amount, the card redacted", s)
	}
}

func TestRecordOutputRefusesBadValues(t *testing.T) {
	ctx := context.Background()
	if err := jobs.RecordOutput(ctx, 1); !errors.Is(err, jobs.ErrNoAttempt) {
		t.Fatalf("outside an attempt: %v", err)
	}
	actx, _ := ledger.WithAttempt(ctx, nil, "q", "id", 1)
	if err := jobs.RecordOutput(actx, strings.Repeat("x", jobs.MaxOutput)); !errors.Is(err, jobs.ErrInvalid) {
		t.Fatalf("too large: %v", err)
	}
	if err := jobs.RecordOutput(actx, func() {}); !errors.Is(err, jobs.ErrInvalid) {
		t.Fatalf("not JSON: %v", err)
	}
	if raw, _ := ledger.OutputOf(actx); raw != nil {
		t.Fatalf("a refused output was kept: %s", raw)
	}
}

type cardTimeOutput struct {
	Card time.Time `json:"card" fencedq:"sensitive"`
	N    int       `json:"n" fencedq:"sensitive"`
}

// TestOutputDecodeErrorQuotesNoSensitiveValue: an output that does not
// decode into a type with sensitive fields gives an error naming the
// field, never the value (the error may become a job's error, or a log
// line).
func TestOutputDecodeErrorQuotesNoSensitiveValue(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	l := ledger.New(rdb, ledger.Config{Namespace: ns})
	res, err := c.Enqueue(ctx, outArgs{})
	if err != nil {
		t.Fatal(err)
	}
	q, id := res.Queue, res.JobID
	a, err := l.ClaimJob(ctx, q, id, "w1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	actx, _ := ledger.WithAttempt(ctx, l, q, id, a.Token)
	if err := jobs.RecordOutput(actx, map[string]any{"card": "4111-1111-1111-1111", "n": 4242424242424242.5}); err != nil {
		t.Fatal(err)
	}
	raw, shown := ledger.OutputOf(actx)
	if _, err := l.Complete(ctx, q, []ledger.Completion{{ID: id, Token: a.Token,
		Outcome: ledger.Outcome{To: ledger.Succeeded, Output: raw, OutputDisplay: shown}}}); err != nil {
		t.Fatal(err)
	}
	var out cardTimeOutput
	err = c.Output(ctx, q, id, &out)
	if err == nil || strings.Contains(err.Error(), "4111") || strings.Contains(err.Error(), "4242") {
		t.Fatalf("output decode: %v, want an error quoting no value", err)
	}
}
