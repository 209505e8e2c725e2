package pgfence

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencedq/fencedq/fence"
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
	// listening is signalled each time Listen's LISTEN is in place; inert
	// unless a test initialised it (export_test.go).
	listening testsignal.Signal[struct{}]
}

type outboxQueries struct {
	insert, take, remove string
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
	return &Outbox{pool: pool, t: t, channel: channelOf(t), store: store, q: queriesOf(t)}, nil
}

func queriesOf(t tables) outboxQueries {
	return outboxQueries{
		insert: `INSERT INTO ` + t.outbox + ` (id, kind, queue, operation_id, resource, payload, sensitive,
				max_retries, timeout_ms, run_at)
			SELECT id, kind, queue, NULLIF(op, ''), NULLIF(res, ''), payload, sensitive, max_retries, timeout_ms,
				CASE WHEN run_at_ms > 0 THEN to_timestamp(run_at_ms / 1000.0) END
			FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::boolean[],
				$8::integer[], $9::bigint[], $10::bigint[])
				AS r(id, kind, queue, op, res, payload, sensitive, max_retries, timeout_ms, run_at_ms)`,
		take: `SELECT id, kind, queue, COALESCE(operation_id, ''), COALESCE(resource, ''), payload, sensitive,
				max_retries, timeout_ms, run_at
			FROM ` + t.outbox + ` ORDER BY seq LIMIT $1 FOR UPDATE SKIP LOCKED`,
		remove: `DELETE FROM ` + t.outbox + ` WHERE id = ANY($1::uuid[])`,
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
// validated first (one invalid job rejects the call, nothing written).
// Operation ids come back in the order of ps.
func (o *Outbox) EnqueueMany(ctx context.Context, tx pgx.Tx, ps []jobs.Params) ([]string, error) {
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
		retries[i] = int32(prep.MaxRetries)
		timeouts[i] = prep.Timeout.Milliseconds()
		if !prep.RunAt.IsZero() {
			runAts[i] = prep.RunAt.UnixMilli()
		}
		out[i] = prep.OperationID
		if out[i] == "" {
			out[i] = OutboxOperationPrefix + ids[i]
		}
	}
	if n == 0 {
		return out, nil
	}
	if _, err := tx.Exec(ctx, o.q.insert, ids, kinds, queues, opIDs, resources, payloads, sensitive, retries, timeouts, runAts); err != nil {
		return nil, fmt.Errorf("pgfence: outbox: insert: %w", err)
	}
	// Delivered at commit only, and once however many rows the
	// transaction wrote.
	if _, err := tx.Exec(ctx, `SELECT pg_notify($1, '')`, o.channel); err != nil {
		return nil, fmt.Errorf("pgfence: outbox: notify: %w", err)
	}
	return out, nil
}

// Name names the outbox (its table) in logs.
func (o *Outbox) Name() string { return o.t.outbox }

// Table returns the outbox table's quoted, schema-qualified name.
func (o *Outbox) Table() string { return o.t.outbox }

// relayHook, when set (by tests), runs between a batch's enqueue and its
// removal from the outbox; an error aborts the batch there.
var relayHook func() error

// Relay moves up to max committed rows, oldest first, into the queue
// through client, and returns how many it moved. In one transaction it
//
//  1. locks up to max rows (FOR UPDATE SKIP LOCKED: a second relay takes
//     others, or none);
//  2. fences the relay by leader: the high-water row of the resource
//     "fencedq:outbox:<table>" is raised to leader's token, or Relay
//     returns a *fence.StaleError (a newer leader relays now);
//  3. enqueues the rows with client.EnqueueMany, each with its operation
//     id ("outbox:<row id>" unless the job set its own);
//  4. deletes the rows and commits.
//
// A relay that dies after 3 leaves the rows in the outbox: the next relay
// enqueues them again and the ledger returns the jobs already written for
// their operation ids, so no row is enqueued twice and none is lost. A
// job whose args have sensitive fields is shown as "[redacted]" as a whole
// (the relay has the raw payload, not the Go type that marks the fields).
func (o *Outbox) Relay(ctx context.Context, client *jobs.Client, leader lease.Token, max int) (int, error) {
	if o.pool == nil {
		return 0, fmt.Errorf("%w: the package-level outbox cannot relay; use NewOutbox", ErrOptions)
	}
	if max <= 0 {
		return 0, nil
	}
	tx, err := o.pool.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("pgfence: relay: begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	rows, err := tx.Query(ctx, o.q.take, max)
	if err != nil {
		return 0, fmt.Errorf("pgfence: relay: %w", err)
	}
	var (
		ids []string
		ps  []jobs.Params
	)
	for rows.Next() {
		var (
			id, kind, queue, op, res, payload string
			sensitive                         bool
			retries                           int32
			timeout                           int64
			runAt                             *time.Time
		)
		if err := rows.Scan(&id, &kind, &queue, &op, &res, &payload, &sensitive, &retries, &timeout, &runAt); err != nil {
			rows.Close()
			return 0, fmt.Errorf("pgfence: relay: read: %w", err)
		}
		if op == "" {
			op = OutboxOperationPrefix + id
		}
		opts := []jobs.Option{jobs.Queue(queue), jobs.OperationID(op), jobs.MaxRetries(int(retries))}
		if res != "" {
			opts = append(opts, jobs.Resource(res))
		}
		if timeout > 0 {
			opts = append(opts, jobs.Timeout(time.Duration(timeout)*time.Millisecond))
		}
		if runAt != nil {
			opts = append(opts, jobs.RunAt(*runAt))
		}
		var args jobs.JobArgs = rawArgs{kind: kind, payload: json.RawMessage(payload)}
		if sensitive {
			args = sensitiveArgs{rawArgs: args.(rawArgs)}
		}
		ids = append(ids, id)
		ps = append(ps, jobs.Params{Args: args, Options: opts})
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("pgfence: relay: read: %w", err)
	}
	if len(ids) == 0 {
		return 0, nil
	}
	f := fence.Fence{Resource: "fencedq:outbox:" + o.t.outbox, Token: leader, Owner: relayOwner, OperationID: "-"}
	if err := f.Validate(); err != nil {
		return 0, err
	}
	if err := o.store.raise(ctx, tx, f); err != nil {
		return 0, err
	}
	if _, err := client.EnqueueMany(ctx, ps); err != nil {
		return 0, fmt.Errorf("pgfence: relay: %w", err)
	}
	if relayHook != nil {
		if err := relayHook(); err != nil {
			return 0, err
		}
	}
	if _, err := tx.Exec(ctx, o.q.remove, ids); err != nil {
		return 0, fmt.Errorf("pgfence: relay: remove: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("pgfence: relay: commit: %w", err)
	}
	return len(ids), nil
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
// for any lost notification, the leader's polling covers.
func (o *Outbox) Listen(ctx context.Context) <-chan struct{} {
	if o.pool == nil {
		return nil
	}
	ch := make(chan struct{}, 1)
	go func() {
		for ctx.Err() == nil {
			err := o.listen(ctx, ch)
			if ctx.Err() != nil {
				return
			}
			_ = err // the leader's polling covers until the next try
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}()
	return ch
}

func (o *Outbox) listen(ctx context.Context, ch chan<- struct{}) error {
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
