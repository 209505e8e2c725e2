package otelfencedq_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/otelfencedq"
	"github.com/fencedq/fencedq/worker"
)

type charge struct {
	Card string `json:"card" fencedq:"sensitive"`
}

func (charge) Kind() string { return "charge" }

// TestAttemptSpansQuoteNoSensitiveValueAndAreCut: a handler of a kind with
// a sensitive field whose error and panic quote the field's value gets
// attempt spans that record neither, and its error of a whole response
// body is cut as the ledger cuts it.
func TestAttemptSpansQuoteNoSensitiveValueAndAreCut(t *testing.T) {
	const card = "5500005555555559"
	body := strings.Repeat("x", 4*ledger.MaxErrorLen)
	tr := newTraced(t, func(p *worker.Pool) error {
		return worker.Register(p, jobs.WorkFunc[charge](func(ctx context.Context, j *jobs.Job[charge]) error {
			switch j.Attempt {
			case 1:
				return fmt.Errorf("card %s declined: %s", j.Args.Card, body)
			case 2:
				panic("card " + j.Args.Card + " declined")
			}
			return nil
		}))
	})
	res, err := tr.client.Enqueue(context.Background(), charge{Card: card})
	if err != nil {
		t.Fatal(err)
	}
	jobstest.WaitState(t, tr.ledger, "default", res.JobID, jobs.Succeeded)
	attempts := tr.spans("attempt charge")
	if len(attempts) != 3 {
		t.Fatalf("%d attempt spans, want 3", len(attempts))
	}
	for _, s := range attempts[:2] {
		n := attr(s, otelfencedq.AttrAttempt).AsInt64()
		var messages []string
		for _, e := range s.Events {
			for _, kv := range e.Attributes {
				if kv.Key == "exception.message" {
					messages = append(messages, kv.Value.AsString())
				}
			}
		}
		if len(messages) != 1 {
			t.Fatalf("attempt %d: messages %q, want one", n, messages)
		}
		msg := messages[0]
		if strings.Contains(msg, card) || !strings.Contains(msg, "card "+jobs.Redacted+" declined") {
			t.Errorf("attempt %d records %.100q: want the card redacted", n, msg)
		}
		if len(msg) > ledger.MaxErrorLen+100 {
			t.Errorf("attempt %d records %d bytes, want them cut at %d", n, len(msg), ledger.MaxErrorLen)
		}
		if strings.Contains(s.Status.Description, card) || strings.Contains(fmt.Sprint(s.Attributes), card) {
			t.Errorf("attempt %d: status or attributes quote the card", n)
		}
	}
}
