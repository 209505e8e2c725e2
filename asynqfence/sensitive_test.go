package asynqfence_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hibiken/asynq"

	"github.com/fencedq/fencedq/asynqfence"
	"github.com/fencedq/fencedq/jobs"
)

type secretPay struct {
	Mode string `json:"mode"`
	Card string `json:"card" fencedq:"sensitive"`
}

func (secretPay) Kind() string { return "secret-pay" }

func (a secretPay) Validate() error {
	if a.Mode == "validate" {
		return fmt.Errorf("card %s is refused", a.Card)
	}
	if a.Mode == "validate-panic" && secretPayPanics.Load() {
		panic(fmt.Errorf("card %s cannot be checked", a.Card))
	}
	return nil
}

// secretPayPanics makes Validate panic in mode validate-panic, once the
// task is made.
var secretPayPanics atomic.Bool

// TestTypedWorkerTextsQuoteNoSensitiveValue: a typed worker of a kind with
// a sensitive field whose Validate (error or panic), error and panic quote the field's
// value returns to asynq, and leaves in the ledger, texts without it.
func TestTypedWorkerTextsQuoteNoSensitiveValue(t *testing.T) {
	const card = "4111111111111111"
	p := startInProcess(t, func(mux *asynq.ServeMux) {
		asynqfence.Handle(mux, jobs.Worker[secretPay](jobs.WorkFunc[secretPay](func(_ context.Context, j *jobs.Job[secretPay]) error {
			if j.Args.Mode == "panic" {
				panic("card " + j.Args.Card + " declined")
			}
			return jobs.Permanent(fmt.Errorf("card %s declined", j.Args.Card))
		})))
	})
	for _, mode := range []string{"validate", "validate-panic", "error", "panic"} {
		secretPayPanics.Store(false)
		task, err := asynqfence.NewTask(secretPay{Mode: mode, Card: card}, "")
		if err != nil {
			t.Fatal(err)
		}
		secretPayPanics.Store(true)
		if _, err := p.client.Enqueue(task, asynq.TaskID(mode), asynq.MaxRetry(0)); err != nil {
			t.Fatal(err)
		}
		err = p.next()
		if err == nil || strings.Contains(err.Error(), card) || !strings.Contains(err.Error(), "card "+jobs.Redacted) {
			t.Errorf("%s: returned %v: want the card redacted", mode, err)
		}
		if !strings.HasSuffix(mode, "panic") && !errors.Is(err, asynq.SkipRetry) {
			t.Errorf("%s: returned %v: want no retry", mode, err)
		}
		rec := p.record(mode)
		if strings.Contains(rec.Error, card) || !strings.Contains(rec.Error, jobs.Redacted) {
			t.Errorf("%s: record error %q: want the card redacted", mode, rec.Error)
		}
	}
}
