package pgfence_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/fencedq/fencedq/fence/pgfence"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/pgtest"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/syncbuf"
	"github.com/fencedq/fencedq/jobs"
)

// refusingMiddleware is a pool's enqueue middleware with opinions of its
// own: it amends jobs of queue "amended" out of bounds (the write refuses
// them with jobs.ErrInvalid), refuses jobs of queue "refused" itself, and
// fails as Redis would (jobs.ErrEnqueueUnknown) for queue "flaky" while
// *flaky is set.
func refusingMiddleware(flaky *bool) jobs.EnqueueMiddleware {
	return func(next jobs.EnqueueFunc) jobs.EnqueueFunc {
		return func(ctx context.Context, reqs []*jobs.EnqueueRequest) ([]*jobs.Result, error) {
			for _, r := range reqs {
				switch r.Queue {
				case "amended":
					r.MaxRetries = -1
				case "refused":
					return nil, errors.New("tenant unknown")
				case "flaky":
					if *flaky {
						return nil, fmt.Errorf("%w: the tenant registry timed out", jobs.ErrEnqueueUnknown)
					}
				}
			}
			return next(ctx, reqs)
		}
	}
}

// newMiddlewareOutboxEnv is newOutboxEnv whose client has mw and whose
// outbox logs into the returned buffer.
func newMiddlewareOutboxEnv(t *testing.T, mw jobs.EnqueueMiddleware) (*outboxEnv, *syncbuf.Buffer) {
	pool := pgtest.New(t)
	if err := pgfence.Migrate(t.Context(), pool, pgfence.Options{}); err != nil {
		t.Fatal(err)
	}
	logs := &syncbuf.Buffer{}
	ob, err := pgfence.NewOutbox(pool, pgfence.Options{Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	rdb, ns := redistest.New(t)
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns, EnqueueMiddleware: []jobs.EnqueueMiddleware{mw}})
	return &outboxEnv{pool: pool, outbox: ob, client: c, ledger: ledger.New(rdb, ledger.Config{Namespace: ns})}, logs
}

// TestOutboxRelayMiddlewareRefusesOneRow: the client's enqueue middleware
// (a pool's Jobs.EnqueueMiddleware) refusing one job of a batch, by
// amending it out of bounds or with an error of its own, never holds back
// the others: they are relayed, each refused row is set aside with its
// reason (logged with its id, listed by Failed, not taken again), and a
// relay pass ends instead of taking the same batch again and again.
func TestOutboxRelayMiddlewareRefusesOneRow(t *testing.T) {
	flaky := false
	e, logs := newMiddlewareOutboxEnv(t, refusingMiddleware(&flaky))
	ctx := t.Context()
	var ops []string
	e.inTx(t, true, func(tx pgx.Tx) {
		var err error
		ops, err = e.outbox.EnqueueMany(ctx, tx, []jobs.Params{
			{Args: orderArgs{Order: "amended"}, Options: []jobs.Option{jobs.Queue("amended")}},
			{Args: orderArgs{Order: "good-1"}},
			{Args: orderArgs{Order: "refused"}, Options: []jobs.Option{jobs.Queue("refused")}},
			{Args: orderArgs{Order: "good-2"}},
		})
		if err != nil {
			t.Fatal(err)
		}
	})
	if n, aside, err := e.outbox.Relay(ctx, e.client, 10, 100); n != 2 || aside != 2 || err != nil {
		t.Fatalf("relay: %d relayed, %d set aside, %v; want 2 and 2", n, aside, err)
	}
	for _, op := range []string{ops[1], ops[3]} {
		if _, err := e.ledger.FindByOperation(ctx, op); err != nil {
			t.Errorf("good row %s held back by a refused one: %v", op, err)
		}
	}
	for _, op := range []string{ops[0], ops[2]} {
		if _, err := e.ledger.FindByOperation(ctx, op); !errors.Is(err, jobs.ErrNotFound) {
			t.Errorf("refused row %s: %v, want no job", op, err)
		}
	}
	failed, err := e.outbox.Failed(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(failed) != 2 || e.rows(t) != 2 {
		t.Fatalf("set aside %+v, %d rows left; want the 2 refused rows", failed, e.rows(t))
	}
	for i, want := range []struct{ op, reason string }{{ops[0], "max retries"}, {ops[2], "tenant unknown"}} {
		f := failed[i]
		if pgfence.OutboxOperationPrefix+f.ID != want.op || !strings.Contains(f.Error, want.reason) {
			t.Errorf("set aside %+v, want row %s with a reason containing %q", f, want.op, want.reason)
		}
		if !strings.Contains(logs.String(), f.ID) {
			t.Errorf("row %s set aside without a warning", f.ID)
		}
	}
	if n, _, err := e.outbox.Relay(ctx, e.client, 10, 100); n != 0 || err != nil {
		t.Fatalf("set-aside rows taken again: %d, %v", n, err)
	}
}

// TestOutboxRelayMiddlewareFailsTransiently: a middleware failing with
// jobs.ErrEnqueueUnknown (it could not tell, as for a Redis error) sets
// nothing aside: the batch stays in the outbox and the next relay, once
// the middleware works again, enqueues every row once.
func TestOutboxRelayMiddlewareFailsTransiently(t *testing.T) {
	flaky := true
	e, _ := newMiddlewareOutboxEnv(t, refusingMiddleware(&flaky))
	ctx := t.Context()
	var ops []string
	e.inTx(t, true, func(tx pgx.Tx) {
		var err error
		ops, err = e.outbox.EnqueueMany(ctx, tx, []jobs.Params{
			{Args: orderArgs{Order: "good-1"}},
			{Args: orderArgs{Order: "flaky"}, Options: []jobs.Option{jobs.Queue("flaky")}},
			{Args: orderArgs{Order: "good-2"}},
		})
		if err != nil {
			t.Fatal(err)
		}
	})
	if _, _, err := e.outbox.Relay(ctx, e.client, 10, 100); !errors.Is(err, jobs.ErrEnqueueUnknown) {
		t.Fatalf("relay through a failing middleware: %v, want jobs.ErrEnqueueUnknown", err)
	}
	if failed, err := e.outbox.Failed(ctx, 10); len(failed) != 0 || err != nil || e.rows(t) != 3 {
		t.Fatalf("after a transient failure: set aside %+v (%v), %d rows; want every row kept", failed, err, e.rows(t))
	}
	flaky = false
	if n, _, err := e.outbox.Relay(ctx, e.client, 10, 100); n != 3 || err != nil {
		t.Fatalf("relay once the middleware works: %d, %v", n, err)
	}
	for _, op := range ops {
		if _, err := e.ledger.FindByOperation(ctx, op); err != nil {
			t.Errorf("row %s: %v", op, err)
		}
	}
	if e.rows(t) != 0 || e.pending(t) != 2 {
		t.Fatalf("%d rows left, %d jobs on the default queue; want 0 and 2", e.rows(t), e.pending(t))
	}
}

// TestOutboxRelaySetsAsideARowRefusedWithAnyText: a middleware's refusal
// whose text PostgreSQL cannot store as is (a NUL byte, a name cut inside
// a UTF-8 sequence) still sets its row aside, with the text made storable,
// instead of failing every relay of the batch and holding back the rows
// after it for good.
func TestOutboxRelaySetsAsideARowRefusedWithAnyText(t *testing.T) {
	mw := func(next jobs.EnqueueFunc) jobs.EnqueueFunc {
		return func(ctx context.Context, reqs []*jobs.EnqueueRequest) ([]*jobs.Result, error) {
			for _, r := range reqs {
				if r.Queue == "refused" {
					return nil, fmt.Errorf("tenant %s\x00 unknown", "café"[:4])
				}
			}
			return next(ctx, reqs)
		}
	}
	e, _ := newMiddlewareOutboxEnv(t, mw)
	ctx := t.Context()
	var ops []string
	e.inTx(t, true, func(tx pgx.Tx) {
		var err error
		ops, err = e.outbox.EnqueueMany(ctx, tx, []jobs.Params{
			{Args: orderArgs{Order: "refused"}, Options: []jobs.Option{jobs.Queue("refused")}},
			{Args: orderArgs{Order: "good"}},
		})
		if err != nil {
			t.Fatal(err)
		}
	})
	if n, aside, err := e.outbox.Relay(ctx, e.client, 10, 100); n != 1 || aside != 1 || err != nil {
		t.Fatalf("relay: %d relayed, %d set aside, %v; want 1 and 1", n, aside, err)
	}
	if _, err := e.ledger.FindByOperation(ctx, ops[1]); err != nil {
		t.Errorf("good row held back by the refused one: %v", err)
	}
	failed, err := e.outbox.Failed(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(failed) != 1 || pgfence.OutboxOperationPrefix+failed[0].ID != ops[0] || !strings.Contains(failed[0].Error, "unknown") {
		t.Fatalf("set aside %+v, want row %s with its reason", failed, ops[0])
	}
}
