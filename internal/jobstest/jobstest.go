// Package jobstest waits for a job to reach a state, for the tests of the
// packages built on jobs (worker, asynqfence, dashboard, the bank example).
// The wait is woken by Redis keyspace notifications on the job's keys (see
// redistest.Await), never by polling. Package jobs's own tests do not use
// it: it imports jobs.
package jobstest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
)

// WaitState waits until job id of queue q is in state s and returns its
// record. It fails the test, showing the job's last state and history, if
// that does not happen within testsignal.Timeout.
func WaitState(tb testing.TB, l *ledger.Ledger, q, id string, s jobs.State) *jobs.Record {
	tb.Helper()
	return WaitStateWithin(tb, l, q, id, s, testsignal.DefaultTimeout)
}

// WaitStateWithin is WaitState with bound (scaled by testsignal.Scale)
// instead of the default, for a path known to take longer (a lease to
// lapse, a helper process to start); the caller says why.
func WaitStateWithin(tb testing.TB, l *ledger.Ledger, q, id string, s jobs.State, bound time.Duration) *jobs.Record {
	tb.Helper()
	ctx := context.Background()
	var last *jobs.Record
	var lastErr error
	// The job's keys: its hash and its history list.
	err := redistest.Wait(l.Redis(), l.JobKey(q, id), bound, func() bool {
		r, err := l.Get(ctx, q, id)
		if err != nil {
			lastErr = err
			return false
		}
		last, lastErr = r, nil
		return r.State == s
	})
	if err == nil {
		return last
	}
	switch {
	case last == nil && errors.Is(lastErr, jobs.ErrNotFound):
		tb.Fatalf("job %s of queue %s: want state %s: %v; the job was never found", id, q, s, err)
	case last == nil:
		tb.Fatalf("job %s of queue %s: want state %s: %v; reading it: %v", id, q, s, err, lastErr)
	default:
		h, _ := l.History(ctx, q, id)
		tb.Fatalf("job %s of queue %s: want state %s: %v; it is %s (attempts %d, reason %q, error %q)\nhistory:%s",
			id, q, s, err, last.State, last.Attempts, last.Reason, last.Error, History(h))
	}
	return nil
}

// History renders a job's history one JSON entry a line, for failure
// messages.
func History(h []jobs.Entry) string {
	var b strings.Builder
	for _, en := range h {
		j, err := json.Marshal(en)
		if err != nil {
			j = fmt.Appendf(nil, "%+v", en)
		}
		b.WriteString("\n  ")
		b.Write(j)
	}
	return b.String()
}
