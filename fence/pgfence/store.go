package pgfence

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/lease"
)

// ErrOptions means Options named an invalid schema or table prefix.
var ErrOptions = errors.New("pgfence: invalid options")

// Store fences writes to PostgreSQL. It keeps a per-resource high-water
// mark (token, owner) and an effect log keyed by operation id, and runs the
// caller's writes in the same transaction as both checks. It is safe for
// concurrent use; create it with New after running Migrate.
type Store struct {
	pool *pgxpool.Pool
	t    tables
	q    queries
	own  []string // the unquoted names of its objects, as PostgreSQL's errors quote them
}

var (
	_ fence.EffectLog = (*Store)(nil)
	_ fence.Fencer    = (*Store)(nil)
)

type queries struct {
	fenceOne, fenceMany, marks, raise, stored, recorded, highWater, prune, check string
}

// usable is what every call fails with on a nil or zero Store (one New
// did not make), instead of panicking.
func (s *Store) usable() error {
	if s == nil || s.pool == nil {
		return fmt.Errorf("%w: a nil or zero pgfence.Store: create it with New", ErrOptions)
	}
	return nil
}

// New returns a Store over pool using the tables Options names. It does not
// touch the database; run Migrate first.
func New(pool *pgxpool.Pool, opts Options) (*Store, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: nil pool", ErrOptions)
	}
	if err := opts.validate(); err != nil {
		return nil, err
	}
	t := opts.tables()
	// accept is the high-water rule (fence.Fence.Accepts) between the
	// proposed row EXCLUDED and the stored row f.
	const accept = `EXCLUDED.token > f.token OR (EXCLUDED.token = f.token AND EXCLUDED.owner = f.owner)`
	own := []string{`"` + opts.prefix() + "fences", `"` + opts.prefix() + "effects", opts.prefix() + "fence_check("}
	if opts.Schema != "" {
		own = append(own, `"`+opts.Schema+`"`, `"`+opts.Schema+".")
	}
	return &Store{pool: pool, t: t, own: own, q: queries{
		// Apply's checks for one fence in one statement. raised inserts or
		// locks the resource's row and raises it when the fence is
		// accepted; a rejected row is locked too (ON CONFLICT DO UPDATE
		// locks the row it conflicts with, whatever the WHERE says) and
		// is not returned. recorded inserts the operation id from
		// raised's row, so only after the raise and not at all for a
		// stale write. The result is the number of rows raised (0 or 1)
		// and whether the operation was recorded.
		fenceOne: `WITH raised AS (
				INSERT INTO ` + t.fences + ` AS f (resource, token, owner, updated_at)
				VALUES ($1, $2::text::numeric, $3, now())
				ON CONFLICT (resource) DO UPDATE
				SET token = EXCLUDED.token, owner = EXCLUDED.owner, updated_at = EXCLUDED.updated_at
				WHERE ` + accept + `
				RETURNING 1
			), recorded AS (
				INSERT INTO ` + t.effects + ` (operation_id, resource, token, owner, applied_at)
				SELECT $4, $1, $2::text::numeric, $3, now() FROM raised
				ON CONFLICT (operation_id) DO NOTHING
				RETURNING 1
			)
			SELECT (SELECT count(*) FROM raised), EXISTS (SELECT 1 FROM recorded)`,
		// The same for several fences, given as arrays sorted by the
		// caller: the rows are inserted or locked in array order, so
		// writers over overlapping resources cannot deadlock. The
		// operation is recorded only when every row was raised: the count
		// reads all of raised first.
		fenceMany: `WITH raised AS (
				INSERT INTO ` + t.fences + ` AS f (resource, token, owner, updated_at)
				SELECT w.resource, w.token::numeric, w.owner, now()
				FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS w(resource, token, owner, ord)
				ORDER BY w.ord
				ON CONFLICT (resource) DO UPDATE
				SET token = EXCLUDED.token, owner = EXCLUDED.owner, updated_at = EXCLUDED.updated_at
				WHERE ` + accept + `
				RETURNING 1
			), recorded AS (
				INSERT INTO ` + t.effects + ` (operation_id, resource, token, owner, applied_at)
				SELECT $4, $5, $6::text::numeric, $7, now()
				WHERE (SELECT count(*) FROM raised) = cardinality($1::text[])
				ON CONFLICT (operation_id) DO NOTHING
				RETURNING 1
			)
			SELECT (SELECT count(*) FROM raised), EXISTS (SELECT 1 FROM recorded)`,
		// The marks of resources whose rows this transaction locked.
		marks: `SELECT resource, token::text, owner FROM ` + t.fences + ` WHERE resource = ANY ($1::text[])`,
		// Locks the resource's row (also when the WHERE rejects the update)
		// and raises it when the fence is accepted; no row back means stale.
		raise: `INSERT INTO ` + t.fences + ` AS f (resource, token, owner, updated_at)
			VALUES ($1, $2::text::numeric, $3, now())
			ON CONFLICT (resource) DO UPDATE
			SET token = EXCLUDED.token, owner = EXCLUDED.owner, updated_at = EXCLUDED.updated_at
			WHERE ` + accept + `
			RETURNING 1`,
		// ApplyBatch's checks: the function of migration 4, which raises
		// when it refuses the fences.
		check:     `SELECT ` + t.fenceCheck + `($1::text[], $2::text[], $3::text[], $4, $5, $6, $7)`,
		stored:    `SELECT token::text, owner FROM ` + t.fences + ` WHERE resource = $1`,
		recorded:  `SELECT resource, token::text, owner FROM ` + t.effects + ` WHERE operation_id = $1`,
		highWater: `SELECT token::text, owner FROM ` + t.fences + ` WHERE resource = $1`,
		// One batch: the oldest expired records not locked by a writer.
		prune: `DELETE FROM ` + t.effects + ` WHERE operation_id IN (
			SELECT operation_id FROM ` + t.effects + `
			WHERE applied_at < now() - make_interval(secs => $1::double precision)
			ORDER BY applied_at LIMIT $2 FOR UPDATE SKIP LOCKED)`,
	}}, nil
}

// Tables returns the quoted, schema-qualified (when Options.Schema is set)
// names of the high-water table and the effect log, for queries of your own.
func (s *Store) Tables() (fences, effects string) { return s.t.fences, s.t.effects }

// Apply runs fn in one transaction that first fences f and records its
// operation id, then commits all three together:
//
//  1. f is validated; an incomplete fence, one whose resource, owner or
//     operation id holds a NUL byte or bytes that are not UTF-8 (which a
//     text column cannot hold), or one whose resource is longer than
//     lease.MaxResourceLen, owner longer than lease.MaxOwnerLen or
//     operation id longer than MaxOperationIDLen
//     (which the indexes cannot hold), fails with an error matching
//     fence.ErrInvalid before the database is touched.
//  2. The resource's high-water row is inserted or locked (SELECT ... FOR
//     UPDATE semantics through INSERT ... ON CONFLICT DO UPDATE) and raised to
//     (f.Token, f.Owner) if f is accepted: a higher token, or the same token
//     from the same owner. Otherwise Apply returns a *fence.StaleError
//     (matching fence.ErrStale) carrying the mark that rejected f.
//  3. f.OperationID is inserted into the effect log. If it is already there,
//     Apply returns a *fence.AlreadyAppliedError (matching
//     fence.ErrAlreadyApplied) carrying the recorded resource, token and owner.
//     A concurrent transaction with the same operation id waits on the
//     first one's row and then sees it, so exactly one applies. A stale
//     write never reaches the effect log: it fails at step 2 even when its
//     operation id was applied.
//  4. fn runs with the transaction; its error is returned unchanged.
//  5. The transaction commits.
//
// Steps 2 and 3 are one SQL statement, sent with the BEGIN in one round
// trip, so a write whose fn makes one statement costs three round trips:
// that one, fn's statement and the COMMIT. A refused write costs one more
// (the read of the mark or of the effect record) and the ROLLBACK.
//
// On any error everything is rolled back: the high-water mark, the effect
// log and fn's writes are unchanged. fn must not commit or roll back tx. A
// failed commit leaves the outcome unknown to the caller (the server may
// have committed); ask Applied to find out.
func (s *Store) Apply(ctx context.Context, f fence.Fence, fn func(ctx context.Context, tx pgx.Tx) error) error {
	if err := s.usable(); err != nil {
		return err
	}
	return s.ApplyMulti(ctx, []fence.Fence{f}, fn)
}

// ApplyMulti is Apply for one operation that touches several resources (a
// transfer between two accounts, say), each fenced by its own lease token.
//
// Every fence must carry the same OperationID and a distinct Resource.
// High-water rows are locked and raised in sorted resource order, so two
// operations over overlapping resources cannot deadlock. The checks are
// still one statement, sent with the BEGIN: it locks every fence's row
// (raising the accepted ones) before the verdict. If any fence is stale,
// nothing changes and the *fence.StaleError names the first stale
// resource in sorted order. The effect log records the operation once,
// with the first fence of the slice (the primary resource) as its
// resource, token and owner.
func (s *Store) ApplyMulti(ctx context.Context, fences []fence.Fence, fn func(ctx context.Context, tx pgx.Tx) error) error {
	if err := s.usable(); err != nil {
		return err
	}
	if err := validate(fences); err != nil {
		return err
	}
	sorted := sortFences(fences)
	b := &pgx.Batch{}
	b.BeginTx(pgx.TxOptions{})
	sql, args := s.fenceQuery(sorted, fences[0])
	b.Queue(sql, args...)
	br := s.pool.SendBatch(ctx, b)
	tx := br.Tx()
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		return fmt.Errorf("pgfence: begin: %w", notMigrated(err))
	}
	var raised int64
	var recorded bool
	err := br.QueryRow().Scan(&raised, &recorded)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("pgfence: fence operation %q: %w", fences[0].OperationID, notMigrated(err))
	}
	if err := s.verdict(ctx, tx, sorted, fences[0], raised, recorded); err != nil {
		return err
	}
	if fn != nil {
		if err := fn(ctx, tx); err != nil {
			return err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("pgfence: commit %q: %w", fences[0].OperationID, err)
	}
	return nil
}

// FenceTx performs Apply's checks inside a transaction the caller owns:
// it raises the high-water mark of every fence's resource (sorted order) and
// records the shared operation id, or returns the same errors as
// ApplyMulti. Use it to attach fencing to a transaction that also runs
// other work. The checks are one statement (one round trip) when they
// pass. The caller commits; on any error it must roll back, since a
// multi-resource fence may have raised some marks before failing.
func (s *Store) FenceTx(ctx context.Context, tx pgx.Tx, fences ...fence.Fence) error {
	if err := s.usable(); err != nil {
		return err
	}
	if err := validate(fences); err != nil {
		return err
	}
	sorted := sortFences(fences)
	var raised int64
	var recorded bool
	sql, args := s.fenceQuery(sorted, fences[0])
	if err := tx.QueryRow(ctx, sql, args...).Scan(&raised, &recorded); err != nil {
		return fmt.Errorf("pgfence: fence operation %q: %w", fences[0].OperationID, notMigrated(err))
	}
	return s.verdict(ctx, tx, sorted, fences[0], raised, recorded)
}

func validate(fences []fence.Fence) error {
	if len(fences) == 0 {
		return fmt.Errorf("%w: no fence", fence.ErrInvalid)
	}
	seen := make(map[string]bool, len(fences))
	for _, f := range fences {
		if err := validFence(f); err != nil {
			return err
		}
		if f.OperationID != fences[0].OperationID {
			return fmt.Errorf("%w: fences carry different operation ids %q and %q", fence.ErrInvalid, fences[0].OperationID, f.OperationID)
		}
		if seen[f.Resource] {
			return fmt.Errorf("%w: resource %q fenced twice", fence.ErrInvalid, f.Resource)
		}
		seen[f.Resource] = true
	}
	return nil
}

// MaxOperationIDLen bounds an operation id, in bytes, so that it fits the
// effect log's primary key index (PostgreSQL's index entries hold under
// 2.7 kB). A resource is bounded by lease.MaxResourceLen and an owner by
// lease.MaxOwnerLen, as leases bound them (fence.Fence.Validate).
const MaxOperationIDLen = 2048

// validFence is f.Validate, and refuses with fence.ErrInvalid what a text
// column cannot hold (textOK) and names longer than the indexes hold,
// before the database is touched.
func validFence(f fence.Fence) error {
	if err := f.Validate(); err != nil {
		return err
	}
	if len(f.OperationID) > MaxOperationIDLen {
		return fmt.Errorf("%w: operation id longer than %d bytes", fence.ErrInvalid, MaxOperationIDLen)
	}
	for _, v := range []struct{ name, s string }{{"resource", f.Resource}, {"owner", f.Owner}, {"operation id", f.OperationID}} {
		if err := textOK(v.name, v.s); err != nil {
			return err
		}
	}
	return nil
}

// textOK refuses, with fence.ErrInvalid, a string PostgreSQL's text
// cannot hold: a NUL byte, or bytes that are not UTF-8 (an HTTP header
// may carry them to Guard). The server would refuse it with an error that
// does not say the input was invalid.
func textOK(name, s string) error {
	if strings.IndexByte(s, 0) >= 0 || !utf8.ValidString(s) {
		return fmt.Errorf("%w: %s %q holds a NUL byte or bytes that are not UTF-8", fence.ErrInvalid, name, s)
	}
	return nil
}

// sortFences returns fences sorted by resource (byte order), the order
// their rows are locked in.
func sortFences(fences []fence.Fence) []fence.Fence {
	if len(fences) == 1 {
		return fences
	}
	sorted := slices.Clone(fences)
	slices.SortFunc(sorted, func(a, b fence.Fence) int { return strings.Compare(a.Resource, b.Resource) })
	return sorted
}

// fenceQuery returns the statement that makes Apply's checks for sorted
// with primary fence p, and its arguments.
func (s *Store) fenceQuery(sorted []fence.Fence, p fence.Fence) (string, []any) {
	if len(sorted) == 1 {
		return s.q.fenceOne, []any{p.Resource, p.Token.String(), p.Owner, p.OperationID}
	}
	resources := make([]string, len(sorted))
	tokens := make([]string, len(sorted))
	owners := make([]string, len(sorted))
	for i, f := range sorted {
		resources[i], tokens[i], owners[i] = f.Resource, f.Token.String(), f.Owner
	}
	return s.q.fenceMany, []any{resources, tokens, owners, p.OperationID, p.Resource, p.Token.String(), p.Owner}
}

// verdict turns the fence statement's result into Apply's error: raised
// rows of len(sorted), recorded the operation. A refused write costs one
// more statement in tx, which still holds every row the statement locked.
func (s *Store) verdict(ctx context.Context, tx pgx.Tx, sorted []fence.Fence, p fence.Fence, raised int64, recorded bool) error {
	if raised < int64(len(sorted)) {
		return s.stale(ctx, tx, sorted)
	}
	if recorded {
		return nil
	}
	rec := fence.Effect{OperationID: p.OperationID}
	var tok string
	err := tx.QueryRow(ctx, s.q.recorded, p.OperationID).Scan(&rec.Resource, &tok, &rec.Owner)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("pgfence: read record %q: %w", p.OperationID, err)
	}
	rec.Token = parseToken(tok)
	return &fence.AlreadyAppliedError{Record: rec, Fence: p}
}

// stale returns the *fence.StaleError of the first fence in sorted that
// its resource's mark rejects. The rows are locked by this transaction, so
// the marks read are the ones that rejected the fences.
func (s *Store) stale(ctx context.Context, tx pgx.Tx, sorted []fence.Fence) error {
	resources := make([]string, len(sorted))
	for i, f := range sorted {
		resources[i] = f.Resource
	}
	type mark struct {
		token lease.Token
		owner string
	}
	marks := make(map[string]mark, len(sorted))
	rows, err := tx.Query(ctx, s.q.marks, resources)
	if err != nil {
		return fmt.Errorf("pgfence: read high-water of %q: %w", resources, err)
	}
	for rows.Next() {
		var r, tok, owner string
		if err := rows.Scan(&r, &tok, &owner); err != nil {
			rows.Close()
			return fmt.Errorf("pgfence: read high-water of %q: %w", resources, err)
		}
		marks[r] = mark{parseToken(tok), owner}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("pgfence: read high-water of %q: %w", resources, err)
	}
	for _, f := range sorted {
		if m, ok := marks[f.Resource]; ok && !f.Accepts(m.token, m.owner) {
			return &fence.StaleError{Fence: f, StoredToken: m.token, StoredOwner: m.owner}
		}
	}
	// Unreachable while the rows stay locked: a rejected fence's mark rejects it.
	return fmt.Errorf("pgfence: fence %q: refused, but no mark of %q rejects it", sorted[0].OperationID, resources)
}

// raise locks f's high-water row and raises it, or returns a *fence.StaleError.
func (s *Store) raise(ctx context.Context, tx pgx.Tx, f fence.Fence) error {
	var one int
	err := tx.QueryRow(ctx, s.q.raise, f.Resource, f.Token.String(), f.Owner).Scan(&one)
	if err == nil {
		return nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("pgfence: fence %q: %w", f.Resource, notMigrated(err))
	}
	// Rejected. The row is locked by the statement above, so this reads the
	// value that rejected f.
	var tok, owner string
	if err := tx.QueryRow(ctx, s.q.stored, f.Resource).Scan(&tok, &owner); err != nil {
		return fmt.Errorf("pgfence: read high-water of %q: %w", f.Resource, err)
	}
	return &fence.StaleError{Fence: f, StoredToken: parseToken(tok), StoredOwner: owner}
}

// FenceOnAcquire raises resource f.Resource's high-water mark to (f.Token,
// f.Owner) without recording an operation, so a stale holder is cut off
// before the new holder's first write. Call it right after acquiring the
// lease. f.OperationID is ignored. It returns a *fence.StaleError (matching
// fence.ErrStale) if storage already holds a higher token, or the same
// token from another owner.
//
// It is one round trip: the raise and a read of the mark, sent together,
// run as one implicit transaction, so the mark read is the one that
// rejected f (or f's own, when accepted).
func (s *Store) FenceOnAcquire(ctx context.Context, f fence.Fence) error {
	if err := s.usable(); err != nil {
		return err
	}
	v := f
	v.OperationID = "-" // ignored: not recorded, so not checked either
	if err := validFence(v); err != nil {
		return err
	}
	b := &pgx.Batch{}
	b.Queue(s.q.raise, f.Resource, f.Token.String(), f.Owner)
	b.Queue(s.q.stored, f.Resource)
	br := s.pool.SendBatch(ctx, b)
	var one int
	accepted := true
	err := br.QueryRow().Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		accepted, err = false, nil
	}
	if err != nil {
		_ = br.Close()
		return fmt.Errorf("pgfence: fence %q: %w", f.Resource, notMigrated(err))
	}
	var tok, owner string
	err = br.QueryRow().Scan(&tok, &owner)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("pgfence: fence of %q: %w", f.Resource, notMigrated(err))
	}
	if !accepted {
		return &fence.StaleError{Fence: f, StoredToken: parseToken(tok), StoredOwner: owner}
	}
	return nil
}

// Applied reports whether operationID was applied, with the resource, token
// and owner that applied it. It implements fence.EffectLog: the reconciler
// needs only the job's operation id. For an ApplyMulti operation the record
// names its primary (first) resource.
func (s *Store) Applied(ctx context.Context, operationID string) (fence.Effect, bool, error) {
	if err := s.usable(); err != nil {
		return fence.Effect{}, false, err
	}
	if operationID == "" {
		return fence.Effect{}, false, fmt.Errorf("%w: empty operation id", fence.ErrInvalid)
	}
	if err := textOK("operation id", operationID); err != nil {
		return fence.Effect{}, false, err
	}
	rec := fence.Effect{OperationID: operationID}
	var tok string
	err := s.pool.QueryRow(ctx, s.q.recorded, operationID).Scan(&rec.Resource, &tok, &rec.Owner)
	if errors.Is(err, pgx.ErrNoRows) {
		return fence.Effect{}, false, nil
	}
	if err != nil {
		return fence.Effect{}, false, fmt.Errorf("pgfence: applied %q: %w", operationID, notMigrated(err))
	}
	rec.Token = parseToken(tok)
	return rec, true, nil
}

// HighWater returns the highest accepted token of resource and its owner,
// or a zero token when the resource was never fenced. A resource no write
// can name (empty, longer than lease.MaxResourceLen, or one a text column
// cannot hold) fails with fence.ErrInvalid.
func (s *Store) HighWater(ctx context.Context, resource string) (lease.Token, string, error) {
	if err := s.usable(); err != nil {
		return 0, "", err
	}
	if resource == "" {
		return 0, "", fmt.Errorf("%w: empty resource", fence.ErrInvalid)
	}
	if len(resource) > lease.MaxResourceLen {
		return 0, "", fmt.Errorf("%w: resource longer than %d bytes", fence.ErrInvalid, lease.MaxResourceLen)
	}
	if err := textOK("resource", resource); err != nil {
		return 0, "", err
	}
	var tok, owner string
	err := s.pool.QueryRow(ctx, s.q.highWater, resource).Scan(&tok, &owner)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, "", nil
	}
	if err != nil {
		return 0, "", fmt.Errorf("pgfence: high-water of %q: %w", resource, notMigrated(err))
	}
	return parseToken(tok), owner, nil
}

// DefaultEffectRetention is a retention for PruneEffects that outlasts the
// ledger's default job retention (7 days) with room for jobs that wait in
// review: see PruneEffects for the rule.
const DefaultEffectRetention = 30 * 24 * time.Hour

// pruneBatch bounds the records one PruneEffects statement deletes, so a
// large backlog is removed in short transactions.
var pruneBatch = 5000

// PruneEffects deletes effect records applied more than olderThan ago (by
// the database clock) and returns how many it deleted. It deletes in
// batches of a few thousand rows, each its own short statement (records a
// writer holds locked are skipped until the next call), until none
// expired is left or ctx ends; the count covers the batches done before
// an error.
//
// After pruning, a retry of a pruned operation id is no longer recognised
// as applied, and the resolver can no longer find its effect. So choose
// olderThan longer than any job can still be retried, reconciled or
// re-run: at least the ledger's job retention (jobs.Config.Retention,
// 7 days by default, after which a finished job and its operation id are
// gone) plus the longest a job may wait in review for an operator.
// DefaultEffectRetention (30 days) does that for the defaults.
//
// Pruning is safe to run from any process at any time, concurrently with
// writes and with another pruner; the maintenance leader is the natural
// place to run it on a schedule (worker.Config.Maintenance.EffectRetention).
func (s *Store) PruneEffects(ctx context.Context, olderThan time.Duration) (int64, error) {
	if err := s.usable(); err != nil {
		return 0, err
	}
	if olderThan <= 0 {
		return 0, fmt.Errorf("%w: olderThan %v must be positive", fence.ErrInvalid, olderThan)
	}
	var total int64
	for {
		tag, err := s.pool.Exec(ctx, s.q.prune, olderThan.Seconds(), pruneBatch)
		if err != nil {
			return total, fmt.Errorf("pgfence: prune effects: %w", notMigrated(err))
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < int64(pruneBatch) {
			return total, nil
		}
		if err := ctx.Err(); err != nil {
			return total, fmt.Errorf("pgfence: prune effects: %w", err)
		}
	}
}

func parseToken(s string) lease.Token {
	v, _ := strconv.ParseUint(s, 10, 64)
	return lease.Token(v)
}
