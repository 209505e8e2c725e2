package fencedqtest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/fencedq/fencedq/fencedqtest"
	"github.com/fencedq/fencedq/jobs"
)

type cardCharge struct {
	Card string `json:"card" fencedq:"sensitive"`
}

func (cardCharge) Kind() string { return "card-charge" }

// TestWorkQuotesNoSensitiveValue: as in a pool, an inline attempt of a
// kind with a sensitive field whose error or panic quotes the field's
// value leaves it in neither the result's error nor the job's record,
// and the error still matches what the handler returned.
func TestWorkQuotesNoSensitiveValue(t *testing.T) {
	env, _ := newEnv(t)
	ctx := context.Background()
	const card = "4111111111111111"
	declined := jobs.Permanent(fmt.Errorf("card %s declined", card))
	for name, fn := range map[string]func(context.Context, *jobs.Job[cardCharge]) error{
		"error": func(_ context.Context, j *jobs.Job[cardCharge]) error { return declined },
		"panic": func(_ context.Context, j *jobs.Job[cardCharge]) error { panic("card " + j.Args.Card + " declined") },
	} {
		r := fencedqtest.Work(ctx, t, env, jobs.WorkFunc[cardCharge](fn), cardCharge{Card: card}, jobs.MaxRetries(0))
		if r.Err == nil || strings.Contains(r.Err.Error(), card) || strings.Contains(r.Record.Error, card) ||
			!strings.Contains(r.Record.Error, "card "+jobs.Redacted+" declined") {
			t.Errorf("%s: error %v, record's %q: want the card redacted", name, r.Err, r.Record.Error)
		}
		if name == "error" && !errors.Is(r.Err, declined) {
			t.Errorf("error: %v does not match the handler's error", r.Err)
		}
	}
}

// cardCheck's Validate passes at enqueue and panics, quoting the card, at
// the attempt.
type cardCheck struct {
	Card string `json:"card" fencedq:"sensitive"`
}

func (cardCheck) Kind() string { return "card-check" }

var cardChecks atomic.Int32

func (c cardCheck) Validate() error {
	if cardChecks.Add(1) > 1 {
		panic("cannot check card " + c.Card)
	}
	return nil
}

// TestValidatePanicQuotesNoSensitiveValue: as in a pool, a Validate that
// panics at the attempt is the handler's panic (retried), its value's text
// without the sensitive card.
func TestValidatePanicQuotesNoSensitiveValue(t *testing.T) {
	env, _ := newEnv(t)
	const card = "4111111111111111"
	cardChecks.Store(0)
	w := jobs.WorkFunc[cardCheck](func(context.Context, *jobs.Job[cardCheck]) error { return nil })
	r := fencedqtest.Work(context.Background(), t, env, w, cardCheck{Card: card}, jobs.MaxRetries(0))
	if r.Err == nil || strings.Contains(r.Err.Error(), card) || strings.Contains(r.Record.Error, card) ||
		!strings.Contains(r.Err.Error(), "handler panicked: cannot check card "+jobs.Redacted) {
		t.Errorf("error %v, record's %q: want the handler's panic with the card redacted", r.Err, r.Record.Error)
	}
}
