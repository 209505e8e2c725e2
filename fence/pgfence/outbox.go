package pgfence

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
)

// OutboxOperationPrefix starts the operation id of a job enqueued through
// an outbox without an OperationID of its own: "outbox:<row id>".
const OutboxOperationPrefix = "outbox:"

// relayOwner is the owner the relay's fence carries (the name the
// maintenance leader had when the first fences were recorded; kept so the
// owner column means one thing across versions).
const relayOwner = "reconciler"

// Outbox is a transactional outbox: Enqueue writes a job into the outbox
// table inside the caller's transaction, and the maintenance leader relays
// committed rows into the queue (Relay). It implements worker.OutboxRelay:
// put it in worker.Config.Maintenance.Outboxes. Run Migrate first.
type Outbox struct {
	pool    *pgxpool.Pool
	t       tables
	channel string
	store   *Store
	q       outboxQueries
	log     *slog.Logger
	// listening is signalled each time Listen's LISTEN is in place; inert
	// unless a test initialised it (export_test.go).
	listening testsignal.Signal[struct{}]
}

type outboxQueries struct {
	insert, take, remove, setAside, failed, retry string
}

// NewOutbox returns the outbox in the tables Options names. pool serves
// the relay and its LISTEN connection; enqueues use the caller's
// transaction.
func NewOutbox(pool *pgxpool.Pool, opts Options) (*Outbox, error) {
	store, err := New(pool, opts)
	if err != nil {
		return nil, err
	}
	t := store.t
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Outbox{pool: pool, t: t, channel: channelOf(t), store: store, q: queriesOf(t), log: log}, nil
}

func queriesOf(t tables) outboxQueries {
	return outboxQueries{
		insert: `INSERT INTO ` + t.outbox + ` (id, kind, queue, operation_id, resource, payload, sensitive,
				max_retries, timeout_ms, run_at, options)
			SELECT id, kind, queue, NULLIF(op, ''), NULLIF(res, ''), payload, sensitive, max_retries, timeout_ms,
				CASE WHEN run_at_ms > 0 THEN to_timestamp(run_at_ms / 1000.0) END, NULLIF(opts, '')::jsonb
			FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::boolean[],
				$8::integer[], $9::bigint[], $10::bigint[], $11::text[])
				AS r(id, kind, queue, op, res, payload, sensitive, max_retries, timeout_ms, run_at_ms, opts)`,
		// Every column comes out in a form that always scans, so one row
		// edited by hand cannot fail the batch's read: an infinite run_at
		// (which has no time.Time) is flagged instead, and so is a NULL in
		// a column whose NOT NULL constraint was dropped.
		take: `SELECT id, COALESCE(kind, ''), COALESCE(queue, ''), COALESCE(operation_id, ''), COALESCE(resource, ''),
				COALESCE(payload, ''), COALESCE(sensitive, true), COALESCE(max_retries, 0), COALESCE(timeout_ms, 0),
				CASE WHEN isfinite(run_at) THEN run_at END,
				run_at IS NOT NULL AND NOT isfinite(run_at), COALESCE(options::text, ''),
				array_remove(ARRAY[CASE WHEN kind IS NULL THEN 'kind' END, CASE WHEN queue IS NULL THEN 'queue' END,
					CASE WHEN payload IS NULL THEN 'payload' END, CASE WHEN sensitive IS NULL THEN 'sensitive' END,
					CASE WHEN max_retries IS NULL THEN 'max_retries' END, CASE WHEN timeout_ms IS NULL THEN 'timeout_ms' END], NULL)
			FROM ` + t.outbox + ` WHERE failed_at IS NULL ORDER BY seq LIMIT $1 FOR UPDATE SKIP LOCKED`,
		remove: `DELETE FROM ` + t.outbox + ` WHERE id = ANY($1::uuid[])`,
		setAside: `UPDATE ` + t.outbox + ` AS o SET failed_at = now(), error = r.error
			FROM unnest($1::uuid[], $2::text[]) AS r(id, error) WHERE o.id = r.id`,
		failed: `SELECT id, COALESCE(kind, ''), COALESCE(queue, ''), COALESCE(operation_id, ''), created_at, failed_at, COALESCE(error, '')
			FROM ` + t.outbox + ` WHERE failed_at IS NOT NULL ORDER BY seq LIMIT $1`,
		retry: `UPDATE ` + t.outbox + ` SET failed_at = NULL, error = NULL
			WHERE id = ANY($1::uuid[]) AND failed_at IS NOT NULL`,
	}
}

// channelOf is the NOTIFY channel of an outbox table: a channel name is
// at most 63 bytes, so it is derived from the table's qualified name.
func channelOf(t tables) string {
	h := sha256.Sum256([]byte(t.outbox))
	return "fencedq_outbox_" + hex.EncodeToString(h[:8])
}

// Enqueue writes a job into the default outbox (Options{}) inside tx: see
// Outbox.Enqueue.
func Enqueue(ctx context.Context, tx pgx.Tx, args jobs.JobArgs, opts ...jobs.Option) (string, error) {
	return defaultOutbox.Enqueue(ctx, tx, args, opts...)
}

// EnqueueMany writes jobs into the default outbox (Options{}) inside tx:
// see Outbox.EnqueueMany.
func EnqueueMany(ctx context.Context, tx pgx.Tx, ps []jobs.Params) ([]string, error) {
	return defaultOutbox.EnqueueMany(ctx, tx, ps)
}

// defaultOutbox serves the package-level functions (they never relay).
var defaultOutbox = func() *Outbox {
	t := Options{}.tables()
	return &Outbox{t: t, channel: channelOf(t), q: queriesOf(t)}
}()

// Enqueue validates args and opts as jobs.Client.Enqueue does (an error
// matches jobs.ErrInvalid, and nothing is written) and writes the job into
// the outbox inside tx. Nothing is visible to workers before tx commits,
// and nothing is enqueued if it rolls back. After the commit the leader's
// relay enqueues the job (at once when the commit's notification reaches
// it, else within Maintenance.Interval). It returns the job's operation id:
// the OperationID option's, else "outbox:<row id>"; find the job with
// jobs.Inspector.FindByOperation once relayed. A Delay counts from Enqueue.
func (o *Outbox) Enqueue(ctx context.Context, tx pgx.Tx, args jobs.JobArgs, opts ...jobs.Option) (string, error) {
	ops, err := o.EnqueueMany(ctx, tx, []jobs.Params{{Args: args, Options: opts}})
	if err != nil {
		return "", err
	}
	return ops[0], nil
}

// EnqueueMany is Enqueue for several jobs in one statement: every job is
// validated first (one invalid job rejects the call, nothing written). A
// job whose args, partition key or unique field names PostgreSQL cannot
// hold as given (not UTF-8, or a NUL byte) is invalid here.
// Operation ids come back in the order of ps.
func (o *Outbox) EnqueueMany(ctx context.Context, tx pgx.Tx, ps []jobs.Params) ([]string, error) {
	if err := o.usable(); err != nil {
		return nil, err
	}
	if tx == nil {
		return nil, fmt.Errorf("%w: nil transaction", ErrOptions)
	}
	n := len(ps)
	var (
		ids, kinds, queues, opIDs, resources, payloads = make([]string, n), make([]string, n), make([]string, n),
			make([]string, n), make([]string, n), make([]string, n)
		sensitive        = make([]bool, n)
		retries          = make([]int32, n)
		timeouts, runAts = make([]int64, n), make([]int64, n)
		options          = make([]string, n)
		out              = make([]string, n)
	)
	for i, p := range ps {
		prep, err := jobs.Prepare(p.Args, p.Options...)
		if err != nil {
			return nil, fmt.Errorf("pgfence: outbox: job %d: %w", i, err)
		}
		ids[i] = uuid.NewString()
		kinds[i], queues[i], opIDs[i], resources[i], payloads[i] = prep.Kind, prep.Queue, prep.OperationID, prep.Resource, string(prep.Payload)
		sensitive[i] = string(prep.Display) != string(prep.Payload)
		if prep.MaxRetries > math.MaxInt32 {
			// The column is an integer: a larger value would wrap around.
			return nil, fmt.Errorf("pgfence: outbox: job %d: %w: max retries %d above %d", i, jobs.ErrInvalid, prep.MaxRetries, math.MaxInt32)
		}
		retries[i] = int32(prep.MaxRetries)
		if !prep.RunAt.IsZero() && (prep.RunAt.Year() < 1 || prep.RunAt.Year() > 9999) {
			// Milliseconds since 1970 would wrap around, or leave the column's range.
			return nil, fmt.Errorf("pgfence: outbox: job %d: %w: run at %v outside years 1-9999", i, jobs.ErrInvalid, prep.RunAt)
		}
		if err := fitsText(prep); err != nil {
			return nil, fmt.Errorf("pgfence: outbox: job %d: %w: %s", i, jobs.ErrInvalid, err)
		}
		timeouts[i] = prep.Timeout.Milliseconds()
		if !prep.RunAt.IsZero() {
			runAts[i] = prep.RunAt.UnixMilli()
		}
		options[i] = optionsOf(prep)
		out[i] = prep.OperationID
		if out[i] == "" {
			out[i] = OutboxOperationPrefix + ids[i]
		}
	}
	if n == 0 {
		return out, nil
	}
	if _, err := tx.Exec(ctx, o.q.insert, ids, kinds, queues, opIDs, resources, payloads, sensitive, retries, timeouts, runAts, options); err != nil {
		return nil, fmt.Errorf("pgfence: outbox: insert: %w", notMigrated(err))
	}
	// Delivered at commit only, and once however many rows the
	// transaction wrote.
	if _, err := tx.Exec(ctx, `SELECT pg_notify($1, '')`, o.channel); err != nil {
		return nil, fmt.Errorf("pgfence: outbox: notify: %w", err)
	}
	return out, nil
}

// usable is what every call fails with on a nil or zero Outbox (one
// NewOutbox did not make), instead of panicking or writing to no table.
func (o *Outbox) usable() error {
	if o == nil || o.q.insert == "" {
		return fmt.Errorf("%w: a nil or zero pgfence.Outbox: create it with NewOutbox", ErrOptions)
	}
	return nil
}

// relayable is what Relay, Failed and Retry fail with on an outbox they
// cannot serve.
func (o *Outbox) relayable() error {
	if err := o.usable(); err != nil {
		return err
	}
	if o.pool == nil {
		return fmt.Errorf("%w: the package-level outbox has no pool; use NewOutbox", ErrOptions)
	}
	return nil
}

// Name names the outbox (its table) in logs.
func (o *Outbox) Name() string { return o.t.outbox }

// Table returns the outbox table's quoted, schema-qualified name.
func (o *Outbox) Table() string { return o.t.outbox }

// relayHook, when set (by tests), runs between a batch's enqueue and its
// removal from the outbox; an error aborts the batch there.
var relayHook func() error

// Relay moves up to max committed rows, oldest first, into the queue
// through client, and returns how many rows it relayed and how many it set
// aside (their sum is how many it took off the outbox; after an error both
// are 0). In one transaction it
//
//  1. locks up to max rows not set aside (FOR UPDATE SKIP LOCKED: a
//     second relay takes others, or none);
//  2. checks each row as Enqueue checks a job (jobs.Prepare) and sets
//     aside every row that fails (see below);
//  3. fences the relay by leader: the high-water row of the resource
//     "fencedq:outbox:<table>" is raised to leader's token, or Relay
//     returns a *fence.StaleError (a newer leader relays now);
//  4. enqueues the other rows with client.EnqueueMany, each with its
//     operation id ("outbox:<row id>" unless the job set its own), and,
//     when the client refuses the batch, a row at a time, setting aside
//     the rows it refuses (see below);
//  5. deletes them, marks the rows set aside, and commits.
//
// A relay that dies after 4 leaves the rows in the outbox: the next relay
// enqueues them again and the ledger returns the jobs already written for
// their operation ids, so no row is enqueued twice and none is lost. A
// job whose args have sensitive fields is shown as "[redacted]" as a whole
// (the relay has the raw payload, not the Go type that marks the fields).
//
// One bad row never stops the others. A row that cannot become a job (a
// value out of range or a payload that is not a JSON object, as a row
// edited by hand may hold, or a NULL in a column whose NOT NULL constraint
// was dropped), or whose job the client refuses (its enqueue
// middleware returns an error, or amends the job out of bounds:
// jobs.ErrInvalid), stays in the table with failed_at and error set, is
// logged as a warning (Options.Logger) and is not taken again: list such
// rows with Failed, fix them (or the middleware) and put them back with
// Retry, or delete them. A row whose enqueue panics (in the client's
// enqueue middleware) is refused so too, the panic its error, and the rows
// beside it relayed. A row whose job the client wrote (a result came
// back for it) is relayed whatever error came with it (an enqueue
// middleware failing after the write), logged as a warning. An error
// matching jobs.ErrEnqueueUnknown (Redis
// failing, or a middleware that cannot tell for now), jobs.ErrNotSent
// (Redis unreachable), jobs.ErrOutOfMemory or jobs.ErrWriteRefused (a
// demoted primary) sets nothing aside:
// Relay returns it, naming the rows it keeps (the first ten ids), and the
// rows stay for the next relay.
//
// A nil or zero client (one jobs.NewClient did not make), or one it
// refused, fails the call with ErrOptions (and jobs.ErrInvalid) before
// anything is touched: no row is set aside for the client's sake.
func (o *Outbox) Relay(ctx context.Context, client *jobs.Client, leader lease.Token, max int) (relayed, setAside int, err error) {
	if err := o.relayable(); err != nil {
		return 0, 0, err
	}
	if err := client.Err(); err != nil {
		return 0, 0, fmt.Errorf("%w: relay through an unusable client: %w", ErrOptions, err)
	}
	if max <= 0 {
		return 0, 0, nil
	}
	tx, err := o.pool.Begin(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("pgfence: relay: begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	rows, err := tx.Query(ctx, o.q.take, max)
	if err != nil {
		return 0, 0, fmt.Errorf("pgfence: relay: %w", notMigrated(err))
	}
	var (
		good []outboxRow
		ps   []jobs.Params
		bad  []asideRow
	)
	for rows.Next() {
		var r outboxRow
		if err := rows.Scan(&r.id, &r.kind, &r.queue, &r.op, &r.res, &r.payload, &r.sensitive,
			&r.retries, &r.timeoutMS, &r.runAt, &r.runAtInfinite, &r.options, &r.nulls); err != nil {
			rows.Close()
			return 0, 0, fmt.Errorf("pgfence: relay: read: %w", err)
		}
		p, err := r.params()
		if err != nil {
			bad = append(bad, asideRow{row: r, err: err})
			continue
		}
		good = append(good, r)
		ps = append(ps, p)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, 0, fmt.Errorf("pgfence: relay: read: %w", err)
	}
	if len(good) == 0 && len(bad) == 0 {
		return 0, 0, nil
	}
	f := fence.Fence{Resource: "fencedq:outbox:" + o.t.outbox, Token: leader, Owner: relayOwner, OperationID: "-"}
	if err := f.Validate(); err != nil {
		return 0, 0, err
	}
	if err := o.store.raise(ctx, tx, f); err != nil {
		return 0, 0, err
	}
	refused, written, err := enqueueRows(ctx, client, ps)
	if err != nil {
		return 0, 0, fmt.Errorf("%w (kept for the next relay: %s)", err, rowIDs(good))
	}
	ids := make([]string, 0, len(good))
	for i, r := range good {
		if err, ok := refused[i]; ok {
			bad = append(bad, asideRow{row: r, err: err})
			continue
		}
		ids = append(ids, r.id)
	}
	if relayHook != nil {
		if err := relayHook(); err != nil {
			return 0, 0, err
		}
	}
	if len(ids) > 0 {
		if _, err := tx.Exec(ctx, o.q.remove, ids); err != nil {
			return 0, 0, fmt.Errorf("pgfence: relay: remove: %w", err)
		}
	}
	if len(bad) > 0 {
		badIDs, reasons := make([]string, len(bad)), make([]string, len(bad))
		for i, b := range bad {
			badIDs[i], reasons[i] = b.row.id, storable(b.err.Error())
		}
		if _, err := tx.Exec(ctx, o.q.setAside, badIDs, reasons); err != nil {
			return 0, 0, fmt.Errorf("pgfence: relay: set aside: %w", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, 0, fmt.Errorf("pgfence: relay: commit: %w", err)
	}
	for i, err := range written {
		r := good[i]
		o.log.Warn("outbox row relayed: its job was written, though the enqueue returned an error (the client's enqueue middleware failed after the write)",
			"outbox", o.t.outbox, "row_id", r.id, "kind", ledger.Clip(r.kind), "queue", ledger.Clip(r.queue), "error", err)
	}
	for _, b := range bad {
		// The kind and queue may be any text the columns hold: cut, as the
		// error quotes them.
		o.log.Warn("outbox row set aside: it cannot be enqueued; fix it and call Outbox.Retry, or delete it",
			"outbox", o.t.outbox, "row_id", b.row.id, "kind", ledger.Clip(b.row.kind), "queue", ledger.Clip(b.row.queue), "error", b.err)
	}
	return len(ids), len(bad), nil
}

// enqueueRows enqueues ps with one EnqueueMany call and returns the jobs
// the client refused, by position in ps, and those it wrote though it
// returned an error (written: a result came back for the job, as from an
// enqueue middleware that failed after calling next), which are relayed,
// not set aside: their jobs are in the queue. A batch refused as a whole for
// one job's sake (jobs.ErrInvalid, or an error of the client's enqueue
// middleware, which sees the batch at once) is enqueued again one job at a
// time, so only the jobs refused on their own are returned. An error
// matching jobs.ErrEnqueueUnknown, jobs.ErrNotSent, jobs.ErrOutOfMemory or
// jobs.ErrWriteRefused (a demoted primary), or the end of
// ctx, says nothing about a job without a result: the call returns it, and every row stays in the outbox for the
// next relay (the operation ids make enqueueing them again safe).
func enqueueRows(ctx context.Context, client *jobs.Client, ps []jobs.Params) (refused, written map[int]error, err error) {
	if len(ps) == 0 {
		return nil, nil, nil
	}
	res, err := guarded(func() ([]*jobs.Result, error) { return client.EnqueueMany(ctx, ps) })
	if err == nil {
		return nil, nil, nil
	}
	if len(res) == len(ps) && !slices.Contains(res, nil) {
		written = make(map[int]error, len(ps))
		for i := range ps {
			written[i] = err // every job written: the error is the middleware's own
		}
		return nil, written, nil
	}
	if transient(ctx, err) {
		return nil, nil, fmt.Errorf("pgfence: relay: %w", err)
	}
	refused, written = map[int]error{}, map[int]error{}
	for i, p := range ps {
		res, err := guarded(func() ([]*jobs.Result, error) {
			r, err := client.Enqueue(ctx, p.Args, p.Options...)
			return []*jobs.Result{r}, err
		})
		var r *jobs.Result
		if len(res) == 1 {
			r = res[0]
		}
		switch {
		case err == nil:
		case r != nil:
			written[i] = err
		case transient(ctx, err):
			return nil, nil, fmt.Errorf("pgfence: relay: %w", err)
		default:
			refused[i] = err
		}
	}
	return refused, written, nil
}

// errEnqueuePanicked is the error of a relayed row whose enqueue panicked
// (in the client's enqueue middleware, or encoding its args).
var errEnqueuePanicked = errors.New("pgfence: relay: the enqueue panicked")

// guarded returns what enqueue returns, or, when it panics, no result and
// an error matching errEnqueuePanicked with the panic's value (not
// wrapped: it is no class of the client's, so the row is refused, set
// aside, rather than kept and taken again, panicking at every relay and
// holding back the rows after it). The job may have been written if the
// panic came after the write: the row's operation id keeps a later Retry
// from enqueueing it twice.
func guarded(enqueue func() ([]*jobs.Result, error)) (res []*jobs.Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			res, err = nil, fmt.Errorf("%w (the job may have been written if it panicked after the write; Retry enqueues it at most once): %s", errEnqueuePanicked, ledger.CapError(fmt.Sprint(r)))
		}
	}()
	return enqueue()
}

// maxRowIDs bounds the row ids an error names.
const maxRowIDs = 10

// rowIDs names rs by id for an error, the first maxRowIDs of them.
func rowIDs(rs []outboxRow) string {
	ids := make([]string, 0, min(len(rs), maxRowIDs))
	for _, r := range rs[:min(len(rs), maxRowIDs)] {
		ids = append(ids, r.id)
	}
	s := fmt.Sprintf("%d rows, %s", len(rs), strings.Join(ids, ", "))
	if len(rs) > maxRowIDs {
		s += fmt.Sprintf(" and %d more", len(rs)-maxRowIDs)
	}
	return s
}

// transient reports whether an enqueue's error may go away by itself (the
// job may even have been written): the row stays for the next relay
// instead of being set aside.
func transient(ctx context.Context, err error) bool {
	return ctx.Err() != nil || errors.Is(err, jobs.ErrEnqueueUnknown) || errors.Is(err, jobs.ErrOutOfMemory) ||
		errors.Is(err, jobs.ErrWriteRefused) || errors.Is(err, jobs.ErrNotSent) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// fitsText returns why p holds text the outbox's text and jsonb columns
// cannot keep as given (a NUL byte, bytes that are not UTF-8), nil when
// none: such a value would fail the caller's transaction, or (json.Marshal
// replaces bytes that are not UTF-8) relay another partition key.
func fitsText(p *jobs.Prepared) error {
	fits := func(s string) bool { return utf8.ValidString(s) && !strings.Contains(s, "\x00") }
	switch {
	case !utf8.Valid(p.Payload):
		return errors.New("args are not UTF-8")
	case !fits(p.PartitionKey):
		return errors.New("partition key is not UTF-8 without NUL bytes")
	case p.Unique != nil && slices.ContainsFunc(p.Unique.ByFields, func(f string) bool { return !fits(f) }):
		return errors.New("a unique field name is not UTF-8 without NUL bytes")
	}
	return nil
}

// storable makes s fit a text column: PostgreSQL refuses a NUL byte or
// invalid UTF-8, which an error's text (an enqueue middleware's, say) may
// hold, and the row would then never be set aside.
func storable(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// outboxRow is one row as the relay reads it.
type outboxRow struct {
	id, kind, queue, op, res, payload string
	sensitive                         bool
	retries                           int32
	timeoutMS                         int64
	runAt                             *time.Time
	runAtInfinite                     bool
	options                           string   // the options column's JSON, "" when NULL
	nulls                             []string // the NOT NULL columns that hold NULL (constraints dropped by hand)
}

// asideRow is a row the relay could not enqueue, and why.
type asideRow struct {
	row outboxRow
	err error
}

// params returns the row as the job Enqueue wrote, checked as Enqueue
// checks it: an error (matching jobs.ErrInvalid) says why the row cannot
// be enqueued.
func (r outboxRow) params() (jobs.Params, error) {
	if len(r.nulls) > 0 {
		return jobs.Params{}, fmt.Errorf("%w: %s is NULL (the outbox table's NOT NULL constraint was dropped)", jobs.ErrInvalid, strings.Join(r.nulls, ", "))
	}
	op := r.op
	if op == "" {
		op = OutboxOperationPrefix + r.id
	}
	opts := []jobs.Option{jobs.Queue(r.queue), jobs.OperationID(op), jobs.MaxRetries(int(r.retries))}
	if r.res != "" {
		opts = append(opts, jobs.Resource(r.res))
	}
	switch {
	case r.timeoutMS > math.MaxInt64/int64(time.Millisecond) || r.timeoutMS < 0:
		return jobs.Params{}, fmt.Errorf("%w: timeout_ms %d out of range", jobs.ErrInvalid, r.timeoutMS)
	case r.timeoutMS > 0:
		opts = append(opts, jobs.Timeout(time.Duration(r.timeoutMS)*time.Millisecond))
	}
	if r.runAtInfinite {
		return jobs.Params{}, fmt.Errorf("%w: run_at is infinite", jobs.ErrInvalid)
	}
	if r.runAt != nil {
		opts = append(opts, jobs.RunAt(*r.runAt))
	}
	more, err := parseOptions(r.options)
	if err != nil {
		return jobs.Params{}, err
	}
	opts = append(opts, more...)
	var args jobs.JobArgs = rawArgs{kind: r.kind, payload: json.RawMessage(r.payload)}
	if r.sensitive {
		args = sensitiveArgs{rawArgs: args.(rawArgs)}
	}
	if _, err := jobs.Prepare(args, opts...); err != nil {
		return jobs.Params{}, err
	}
	return jobs.Params{Args: args, Options: opts}, nil
}

// FailedRow is an outbox row the relay set aside (see Relay).
type FailedRow struct {
	// ID is the row's id; OperationID the job's own, "" when it set none
	// (its jobs would have been "outbox:<ID>").
	ID, Kind, Queue, OperationID string
	// Created is when the row was written, FailedAt when it was set aside.
	Created, FailedAt time.Time
	// Error says why the row could not be enqueued.
	Error string
}

// Failed returns up to limit rows the relay set aside, oldest first. A
// negative limit fails with ErrOptions.
func (o *Outbox) Failed(ctx context.Context, limit int) ([]FailedRow, error) {
	if err := o.relayable(); err != nil {
		return nil, err
	}
	if limit < 0 {
		return nil, fmt.Errorf("%w: negative limit %d", ErrOptions, limit)
	}
	rows, err := o.pool.Query(ctx, o.q.failed, limit)
	if err != nil {
		return nil, fmt.Errorf("pgfence: outbox: failed rows: %w", notMigrated(err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (FailedRow, error) {
		var f FailedRow
		err := row.Scan(&f.ID, &f.Kind, &f.Queue, &f.OperationID, &f.Created, &f.FailedAt, &f.Error)
		return f, err
	})
	if err != nil {
		return nil, fmt.Errorf("pgfence: outbox: failed rows: %w", err)
	}
	return out, nil
}

// Retry puts rows the relay set aside back into the outbox (after the
// cause was fixed, with SQL): the next relay takes them again, and sets
// aside again any that still cannot be enqueued. It returns how many rows
// it put back (ids of rows not set aside are ignored).
func (o *Outbox) Retry(ctx context.Context, ids ...string) (int, error) {
	if err := o.relayable(); err != nil {
		return 0, err
	}
	for _, id := range ids {
		if uuid.Validate(id) != nil {
			return 0, fmt.Errorf("%w: row id %q is not a UUID", ErrOptions, id)
		}
	}
	tag, err := o.pool.Exec(ctx, o.q.retry, ids)
	if err != nil {
		return 0, fmt.Errorf("pgfence: outbox: retry: %w", notMigrated(err))
	}
	if tag.RowsAffected() > 0 {
		_, _ = o.pool.Exec(ctx, `SELECT pg_notify($1, '')`, o.channel) // wake the relay; polling covers a miss
	}
	return int(tag.RowsAffected()), nil
}

// rawArgs re-enqueues an outbox row's args as they were written.
type rawArgs struct {
	kind    string
	payload json.RawMessage
}

func (a rawArgs) Kind() string                 { return a.kind }
func (a rawArgs) MarshalJSON() ([]byte, error) { return a.payload, nil }

// sensitiveArgs are the args of a row whose job had sensitive fields: the
// marked field makes jobs.RedactJSON hide the whole value.
type sensitiveArgs struct {
	rawArgs
	_ struct{} `fencedq:"sensitive"`
}

// Listen holds a connection LISTENing on the outbox's channel until ctx
// ends and signals the returned channel on every notification (commits of
// Enqueue). A lost connection is reopened after a second; meanwhile, and
// for any lost notification, the leader's polling covers. The first
// failure of an outage is logged as a warning (Options.Logger) with its
// error, and the LISTEN back in place once at info level with the number
// of failed tries; the retries between are not logged.
func (o *Outbox) Listen(ctx context.Context) <-chan struct{} {
	if o.relayable() != nil {
		return nil
	}
	ch := make(chan struct{}, 1)
	go func() {
		failures := 0 // failed tries since the LISTEN was last in place
		listened := func() {
			if failures > 0 {
				o.log.Info("pgfence: outbox listening again", "outbox", o.t.outbox, "failures", failures)
			}
			failures = 0
		}
		for ctx.Err() == nil {
			err := o.listen(ctx, ch, listened)
			if ctx.Err() != nil {
				return
			}
			if failures++; failures == 1 {
				// pgx's errors name the user and database, never a password.
				o.log.Warn("pgfence: outbox LISTEN failed; relaying at the poll interval until it listens again",
					"outbox", o.t.outbox, "error", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}()
	return ch
}

// listen LISTENs on one connection, calls listened once the LISTEN is in
// place, and forwards notifications to ch until the connection fails or
// ctx ends.
func (o *Outbox) listen(ctx context.Context, ch chan<- struct{}, listened func()) error {
	conn, err := o.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer func() {
		// The connection still listens: close it rather than return it.
		_ = conn.Conn().Close(context.WithoutCancel(ctx))
		conn.Release()
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{o.channel}.Sanitize()); err != nil {
		return err
	}
	listened()
	o.listening.Signal(struct{}{})
	for {
		if _, err := conn.Conn().WaitForNotification(ctx); err != nil {
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return nil
			}
			return err
		}
		select {
		case ch <- struct{}{}:
		default: // a wake-up is already pending
		}
	}
}
