package pgfence_test

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fencedq/fencedq/jobs"
)

// TestOutboxKeepsUniquePeriod: a unique period that is not a whole number
// of milliseconds is rounded up, by the outbox as by Enqueue, so the
// relayed job is unique in the period a direct enqueue would use (a
// period below a millisecond must not turn into no period at all).
func TestOutboxKeepsUniquePeriod(t *testing.T) {
	e := newOutboxEnv(t)
	ctx := t.Context()
	for _, period := range []time.Duration{500 * time.Microsecond, 1500 * time.Microsecond} {
		u := jobs.Unique(jobs.UniqueOpts{ByArgs: true, ByPeriod: period})
		var op string
		e.inTx(t, true, func(tx pgx.Tx) {
			var err error
			if op, err = e.outbox.Enqueue(ctx, tx, orderArgs{Order: "outbox-" + period.String()}, u); err != nil {
				t.Fatal(err)
			}
		})
		if _, _, err := e.outbox.Relay(ctx, e.client, 10, 100); err != nil {
			t.Fatal(err)
		}
		relayed, err := e.ledger.FindByOperation(ctx, op)
		if err != nil {
			t.Fatal(err)
		}
		res, err := e.client.Enqueue(ctx, orderArgs{Order: "direct-" + period.String()}, u)
		if err != nil {
			t.Fatal(err)
		}
		direct, err := e.ledger.Get(ctx, res.Queue, res.JobID)
		if err != nil {
			t.Fatal(err)
		}
		periodOf := func(key string) string {
			parts := strings.Split(key, ":")
			if len(parts) != 3 {
				return "none"
			}
			return parts[1] + "ms"
		}
		if got, want := periodOf(relayed.UniqueKey), periodOf(direct.UniqueKey); got != want {
			t.Errorf("ByPeriod %v: relayed job unique per %s, a direct enqueue per %s", period, got, want)
		}
	}
}
