package pgfence_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/fencedq/fencedq/fence/pgfence"
	"github.com/fencedq/fencedq/jobs"
)

// A relay through a nil or zero jobs.Client (one NewClient did not make),
// or one NewClient refused, is the caller's mistake, not the rows': Relay
// fails with ErrOptions (and jobs.ErrInvalid) before touching anything.
// Every row stays in the outbox, none set aside, and the relay's fence
// mark is not raised, so a good client relays them all afterwards.
func TestRelayThroughAnUnusableClientTouchesNothing(t *testing.T) {
	e := newOutboxEnv(t)
	ctx := t.Context()
	e.inTx(t, true, func(tx pgx.Tx) {
		for _, o := range []string{"A-1", "A-2"} {
			if _, err := e.outbox.Enqueue(ctx, tx, orderArgs{Order: o}); err != nil {
				t.Fatal(err)
			}
		}
	})
	for name, c := range map[string]*jobs.Client{
		"nil":       nil,
		"zero":      {},
		"nil redis": jobs.NewClient(nil, jobs.Config{}),
	} {
		relayed, aside, err := e.outbox.Relay(ctx, c, 100, 10)
		if !errors.Is(err, pgfence.ErrOptions) || !errors.Is(err, jobs.ErrInvalid) || relayed != 0 || aside != 0 {
			t.Errorf("%s client: Relay = %d, %d, %v; want ErrOptions and jobs.ErrInvalid", name, relayed, aside, err)
		}
	}
	if failed, err := e.outbox.Failed(ctx, 10); err != nil || len(failed) != 0 {
		t.Fatalf("rows set aside: %v, %v", failed, err)
	}
	s, err := pgfence.New(e.pool, pgfence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if tok, _, err := s.HighWater(ctx, "fencedq:outbox:"+e.outbox.Table()); err != nil || tok != 0 {
		t.Fatalf("the relay fence was raised to %d (%v)", tok, err)
	}
	// A leader token below the one refused above still relays.
	if relayed, aside, err := e.outbox.Relay(ctx, e.client, 50, 10); err != nil || relayed != 2 || aside != 0 {
		t.Fatalf("Relay with a good client = %d, %d, %v; want 2, 0", relayed, aside, err)
	}
}

// Every call on a nil or zero Outbox (one NewOutbox did not make) fails
// with ErrOptions instead of panicking or writing rows to no table.
func TestNilOrZeroOutboxIsRefused(t *testing.T) {
	e := newOutboxEnv(t)
	ctx := context.Background()
	for name, o := range map[string]*pgfence.Outbox{"nil": nil, "zero": {}} {
		calls := map[string]func() error{
			"Enqueue": func() error {
				var err error
				e.inTx(t, false, func(tx pgx.Tx) { _, err = o.Enqueue(ctx, tx, orderArgs{Order: "x"}) })
				return err
			},
			"EnqueueMany": func() error {
				var err error
				e.inTx(t, false, func(tx pgx.Tx) {
					_, err = o.EnqueueMany(ctx, tx, []jobs.Params{{Args: orderArgs{Order: "x"}}})
				})
				return err
			},
			"Relay":  func() error { _, _, err := o.Relay(ctx, e.client, 1, 10); return err },
			"Failed": func() error { _, err := o.Failed(ctx, 10); return err },
			"Retry":  func() error { _, err := o.Retry(ctx); return err },
		}
		for call, do := range calls {
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Errorf("%s Outbox: %s panicked: %v", name, call, r)
					}
				}()
				if err := do(); !errors.Is(err, pgfence.ErrOptions) {
					t.Errorf("%s Outbox: %s: %v, want ErrOptions", name, call, err)
				}
			}()
		}
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s Outbox: Listen panicked: %v", name, r)
				}
			}()
			if ch := o.Listen(ctx); ch != nil {
				t.Errorf("%s Outbox: Listen returned a channel", name)
			}
		}()
	}
}
