package pgfence_test

import (
	"errors"
	"log/slog"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/fencedq/fencedq/fence/pgfence"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/pgtest"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/syncbuf"
	"github.com/fencedq/fencedq/jobs"
)

// TestOutboxRefusesValuesThatDoNotFit: a value the outbox's columns cannot
// hold is refused at Enqueue (ErrInvalid, nothing written), never wrapped
// around into a row every relay would then refuse.
func TestOutboxRefusesValuesThatDoNotFit(t *testing.T) {
	e := newOutboxEnv(t)
	ctx := t.Context()
	e.inTx(t, true, func(tx pgx.Tx) {
		_, err := e.outbox.EnqueueMany(ctx, tx, []jobs.Params{
			{Args: orderArgs{Order: "fine"}},
			{Args: orderArgs{Order: "wraps"}, Options: []jobs.Option{jobs.MaxRetries(math.MaxInt32 + 1)}},
		})
		if !errors.Is(err, jobs.ErrInvalid) || !strings.Contains(err.Error(), "job 1") {
			t.Fatalf("max retries above int32: %v, want ErrInvalid naming job 1", err)
		}
	})
	e.inTx(t, true, func(tx pgx.Tx) {
		_, err := e.outbox.Enqueue(ctx, tx, orderArgs{Order: "far"}, jobs.RunAt(time.Date(300_000_000, 1, 1, 0, 0, 0, 0, time.UTC)))
		if !errors.Is(err, jobs.ErrInvalid) {
			t.Fatalf("run at in year 300000000 (its milliseconds wrap around): %v, want ErrInvalid", err)
		}
	})
	if n := e.rows(t); n != 0 {
		t.Fatalf("%d rows written by a refused call", n)
	}
}

// poisonRows are outbox rows no relay can enqueue, as a row edited by hand
// (or written by an older, buggier version) may be: each is set aside with
// a reason naming what is wrong.
var poisonRows = []struct {
	name, set, reason string
}{
	{"payload not JSON", `payload = 'not json'`, "JSON"},
	{"payload an array", `payload = '[1,2]'`, "JSON object"},
	{"payload too large", `payload = '{"a":"' || repeat('x', 1100000) || '"}'`, "exceeds"},
	{"empty kind", `kind = ''`, "kind"},
	{"bad queue", `queue = 'no spaces allowed'`, "queue name"},
	{"negative retries", `max_retries = -1`, "max retries"},
	{"negative timeout", `timeout_ms = -5`, "timeout_ms -5 out of range"},
	{"timeout overflows", `timeout_ms = 9223372036854775807`, "out of range"},
	{"infinite run_at", `run_at = 'infinity'`, "run_at is infinite"},
	{"control character in the operation id", `operation_id = E'op\x01'`, "operation id"},
	{"brace in the resource", `resource = '{account}'`, "resource"},
	{"options of the wrong shape", `options = '{"limit": "export"}'`, "options column"},
	{"limit of max 0", `options = '{"limit": {"key": "export", "max": 0}}'`, "limit"},
	{"bad group", `options = '{"group": "no spaces"}'`, "group"},
	// Milliseconds whose nanoseconds wrap around into the allowed range.
	{"rate period overflows", `options = '{"rate": {"key": "export", "max": 1, "per_ms": 18446744073711}}'`, "out of range"},
	{"unique period overflows", `options = '{"unique": {"by_args": true, "by_period_ms": 18446744073711}}'`, "out of range"},
}

// TestOutboxRelaySetsPoisonRowsAside: poison rows, the oldest first and
// spread among good ones, never stop a batch. Relay enqueues every good
// row, sets every poison row aside with its reason (logged, listed by
// Failed, never taken again), and a row fixed by hand goes out after
// Retry.
func TestOutboxRelaySetsPoisonRowsAside(t *testing.T) {
	pool := pgtest.New(t)
	ctx := t.Context()
	if err := pgfence.Migrate(ctx, pool, pgfence.Options{}); err != nil {
		t.Fatal(err)
	}
	logs := &syncbuf.Buffer{}
	ob, err := pgfence.NewOutbox(pool, pgfence.Options{Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	rdb, ns := redistest.New(t)
	client := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	e := &outboxEnv{pool: pool, outbox: ob, client: client, ledger: ledger.New(rdb, ledger.Config{Namespace: ns})}

	// good-0, poison-0, good-1, poison-1, ...: a poison row sorts first.
	var good []string
	poison := map[string]string{} // row id -> poison case
	for _, p := range poisonRows {
		var ops []string
		e.inTx(t, true, func(tx pgx.Tx) {
			var err error
			ops, err = ob.EnqueueMany(ctx, tx, []jobs.Params{{Args: orderArgs{Order: "poison"}}, {Args: orderArgs{Order: "good"}}})
			if err != nil {
				t.Fatal(err)
			}
		})
		id := strings.TrimPrefix(ops[0], pgfence.OutboxOperationPrefix)
		if _, err := pool.Exec(ctx, `UPDATE `+ob.Table()+` SET `+p.set+` WHERE id = $1`, id); err != nil {
			t.Fatalf("%s: %v", p.name, err)
		}
		poison[id] = p.name
		good = append(good, ops[1])
	}
	// The first batch of 3 is poison, good, poison; Relay says so.
	if n, aside, err := ob.Relay(ctx, client, 10, 3); n != 1 || aside != 2 || err != nil {
		t.Fatalf("first batch of 3: %d relayed, %d set aside, %v; want 1 and 2", n, aside, err)
	}
	if n, aside, err := ob.Relay(ctx, client, 10, 1000); n != len(poisonRows)-1 || aside != len(poisonRows)-2 || err != nil {
		t.Fatalf("the rest: %d relayed, %d set aside, %v; want %d and %d", n, aside, err, len(poisonRows)-1, len(poisonRows)-2)
	}
	if n, aside, err := ob.Relay(ctx, client, 10, 1000); n != 0 || aside != 0 || err != nil {
		t.Fatalf("set-aside rows taken again: %d, %d, %v", n, aside, err)
	}
	for _, op := range good {
		if _, err := e.ledger.FindByOperation(ctx, op); err != nil {
			t.Errorf("good row %s not relayed: %v", op, err)
		}
	}
	failed, err := ob.Failed(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(failed) != len(poisonRows) || e.rows(t) != len(poisonRows) {
		t.Fatalf("%d rows set aside, %d rows left; want %d", len(failed), e.rows(t), len(poisonRows))
	}
	for i, f := range failed {
		p := poisonRows[i]
		if poison[f.ID] != p.name || !strings.Contains(f.Error, p.reason) || f.FailedAt.IsZero() || f.Created.IsZero() {
			t.Errorf("set aside %+v, want %s with a reason containing %q", f, p.name, p.reason)
		}
		if !strings.Contains(logs.String(), f.ID) {
			t.Errorf("row %s (%s) set aside without a warning", f.ID, p.name)
		}
	}

	// An operator fixes a row by hand and puts it back.
	fixed := failed[0].ID
	if _, err := pool.Exec(ctx, `UPDATE `+ob.Table()+` SET payload = '{"order":"fixed"}' WHERE id = $1`, fixed); err != nil {
		t.Fatal(err)
	}
	if n, err := ob.Retry(ctx, fixed, uuid.NewString()); n != 1 || err != nil {
		t.Fatalf("retry: %d, %v", n, err)
	}
	if _, err := ob.Retry(ctx, "not-a-uuid"); !errors.Is(err, pgfence.ErrOptions) {
		t.Fatalf("retry of a bad id: %v", err)
	}
	if _, err := ob.Failed(ctx, -1); !errors.Is(err, pgfence.ErrOptions) {
		t.Fatalf("failed rows with a negative limit: %v, want ErrOptions", err)
	}
	if n, _, err := ob.Relay(ctx, client, 10, 1000); n != 1 || err != nil {
		t.Fatalf("relay of the fixed row: %d, %v", n, err)
	}
	rec, err := e.ledger.FindByOperation(ctx, pgfence.OutboxOperationPrefix+fixed)
	if err != nil || string(rec.Payload) != `{"order":"fixed"}` {
		t.Fatalf("fixed row: %+v, %v", rec, err)
	}
	left, err := ob.Failed(ctx, 100)
	if err != nil || len(left) != len(poisonRows)-1 || slices.ContainsFunc(left, func(f pgfence.FailedRow) bool { return f.ID == fixed }) {
		t.Fatalf("after the fix: %+v, %v", left, err)
	}
}

// TestOutboxSetAsideLogQuotesNamesCut: a row set aside for a kind or a
// queue no relay can enqueue (written with SQL: any text the column
// holds) is logged with the name cut to 64 bytes, as the error quotes it,
// never the whole text.
func TestOutboxSetAsideLogQuotesNamesCut(t *testing.T) {
	pool := pgtest.New(t)
	ctx := t.Context()
	if err := pgfence.Migrate(ctx, pool, pgfence.Options{}); err != nil {
		t.Fatal(err)
	}
	logs := &syncbuf.Buffer{}
	ob, err := pgfence.NewOutbox(pool, pgfence.Options{Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	rdb, ns := redistest.New(t)
	client := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	e := &outboxEnv{pool: pool, outbox: ob, client: client, ledger: ledger.New(rdb, ledger.Config{Namespace: ns})}
	for _, set := range []string{`kind = 'kind ' || repeat('k', 100000)`, `queue = 'queue ' || repeat('q', 100000)`} {
		e.inTx(t, true, func(tx pgx.Tx) {
			if _, err := ob.Enqueue(ctx, tx, orderArgs{Order: "poison"}); err != nil {
				t.Fatal(err)
			}
		})
		if _, err := pool.Exec(ctx, `UPDATE `+ob.Table()+` SET `+set+` WHERE failed_at IS NULL`); err != nil {
			t.Fatal(err)
		}
	}
	if n, aside, err := ob.Relay(ctx, client, 10, 1000); n != 0 || aside != 2 || err != nil {
		t.Fatalf("relay: %d relayed, %d set aside, %v; want 0 and 2", n, aside, err)
	}
	out := logs.String()
	if got := strings.Count(out, "outbox row set aside"); got != 2 {
		t.Fatalf("%d set-aside lines, want 2: %.300q", got, out)
	}
	if strings.Contains(out, strings.Repeat("k", 100)) || strings.Contains(out, strings.Repeat("q", 100)) || len(out) > 4000 {
		t.Fatalf("a set-aside line quotes the whole name (%d bytes of log): %.300q", len(out), out)
	}
	if !strings.Contains(out, "kind "+strings.Repeat("k", 59)+"...") || !strings.Contains(out, "queue "+strings.Repeat("q", 58)+"...") {
		t.Fatalf("the names cut to 64 bytes are missing: %q", out)
	}
}

// rawBytesArgs encode as a JSON string holding bytes that are not UTF-8,
// which json.Marshal keeps from a MarshalJSON as they are.
type rawBytesArgs struct{}

func (rawBytesArgs) Kind() string                 { return "raw-bytes" }
func (rawBytesArgs) MarshalJSON() ([]byte, error) { return []byte("{\"id\":\"\xff\xfe\"}"), nil }

// customArgs encode themselves: their unique fields' names are not checked.
type customArgs struct{}

func (customArgs) Kind() string                 { return "custom" }
func (customArgs) MarshalJSON() ([]byte, error) { return []byte(`{"id":"x"}`), nil }

// TestOutboxRefusesTextItsColumnsCannotHold: a partition key, unique field
// name or args that PostgreSQL's text and jsonb cannot hold as given (a NUL byte, bytes that
// are not UTF-8) are refused at Enqueue with ErrInvalid, nothing written,
// instead of failing the caller's transaction with a database error or
// relaying a job whose key was changed (json.Marshal replaces bytes that
// are not UTF-8, moving the job to another partition).
func TestOutboxRefusesTextItsColumnsCannotHold(t *testing.T) {
	e := newOutboxEnv(t)
	ctx := t.Context()
	for name, p := range map[string]jobs.Params{
		"NUL in the partition key":        {Args: orderArgs{Order: "nul"}, Options: []jobs.Option{jobs.PartitionKey("tenant\x00a")}},
		"partition key that is not UTF-8": {Args: orderArgs{Order: "binary"}, Options: []jobs.Option{jobs.PartitionKey("\xff\x01")}},
		"args that are not UTF-8":         {Args: rawBytesArgs{}},
		"NUL in a unique field name":      {Args: customArgs{}, Options: []jobs.Option{jobs.Unique(jobs.UniqueOpts{ByFields: []string{"i\x00d"}})}},
	} {
		e.inTx(t, true, func(tx pgx.Tx) {
			if _, err := e.outbox.EnqueueMany(ctx, tx, []jobs.Params{p}); !errors.Is(err, jobs.ErrInvalid) {
				t.Errorf("%s: %v, want ErrInvalid", name, err)
			}
		})
	}
	if n := e.rows(t); n != 0 {
		t.Fatalf("%d rows written by refused calls", n)
	}
}
