package lease

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/argtype"
	"github.com/fencedq/fencedq/internal/durable"
	"github.com/fencedq/fencedq/internal/epoch"
	"github.com/fencedq/fencedq/internal/luafunc"
	"github.com/fencedq/fencedq/internal/namespace"
	"github.com/fencedq/fencedq/internal/scriptbatch"
)

// Token is a fencing token: strictly increasing per resource and never
// handed to two owners. Protected storage accepts a write only from the
// highest token it has seen.
type Token uint64

// String formats the token in decimal, the form used in headers and logs.
func (t Token) String() string { return strconv.FormatUint(uint64(t), 10) }

// ParseToken parses a decimal token.
func ParseToken(s string) (Token, error) {
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil || v == 0 {
		return 0, fmt.Errorf("%w: token %q is not a positive decimal integer", ErrInvalid, s)
	}
	return Token(v), nil
}

// Lease is one holding of a resource.
type Lease struct {
	// Resource is the name of the thing the lease excludes others from.
	Resource string
	// Owner identifies the holder (worker id, attempt id, process name).
	Owner string
	// Token is the fencing token minted for this holding.
	Token Token
	// Deadline is when the lease expires by the Redis server's clock, as of
	// the last acquire or Renew of this Lease (a lease a handler's context
	// carries: see FromContext). Compare it with server time, not local
	// time.
	Deadline time.Time

	// sent is the local monotonic time at which the request that set
	// Deadline was sent: the local view of the deadline is sent + ttl.
	sent time.Time
	ttl  time.Duration
}

// Sentinel errors. Match them with errors.Is.
var (
	// ErrHeld means another owner holds a live lease on the resource; the
	// error is a *HeldError naming the holder.
	ErrHeld = errors.New("lease: held by another owner")
	// ErrLost means the lease expired or a newer token took the resource.
	ErrLost = errors.New("lease: lost")
	// ErrNotHeld means a release came from a token that no longer holds the
	// lease; nothing was changed.
	ErrNotHeld = errors.New("lease: not held")
	// ErrInvalid means an argument was rejected before anything was written.
	ErrInvalid = errors.New("lease: invalid argument")
	// ErrReplicas means fewer replicas than Config.Durability asks for
	// acknowledged the new token in time; the acquisition was undone.
	ErrReplicas = errors.New("lease: not enough replicas acknowledged")
	// ErrExhausted means the resource's counter reached 2^64 - 1 (raised
	// there by Raise): no token is left to mint, and every Acquire of the
	// resource fails with it; nothing was written.
	ErrExhausted = errors.New("lease: no token left to mint")
	// ErrUnsettled means the Redis primary changed on every attempt of an
	// acquire (a failover in progress); nothing was acquired. Retry later.
	ErrUnsettled = epoch.ErrUnsettled
	// ErrUnknownMaster means the Sentinels of Config.Sentinel that answered
	// monitor no master of its MasterName: a configuration error, not an
	// outage; nothing was acquired.
	ErrUnknownMaster = epoch.ErrUnknownMaster
	// ErrNotSentinel means an address of Config.Sentinel's SentinelAddrs is
	// a Redis server, not a Sentinel, and no Sentinel gave the epoch: a
	// configuration error, not an outage; nothing was acquired.
	ErrNotSentinel = epoch.ErrNotSentinel
)

// HeldError reports the live holder of a resource. It matches ErrHeld.
type HeldError struct {
	// Resource is the resource asked for.
	Resource string
	// Owner identifies the holder (Lease.Owner).
	Owner string
	// Token is the holder's fencing token.
	Token Token
	// Deadline is when the holder's lease expires unless renewed, by the
	// Redis server's clock (Lease.Deadline).
	Deadline time.Time
}

// Error names the resource, its holder and the lease's deadline, not its
// token: with the owner it authorises fenced writes as the holder, and
// error texts travel (to logs, job records).
func (e *HeldError) Error() string {
	return fmt.Sprintf("lease: %q held by owner %q until %s",
		e.Resource, e.Owner, e.Deadline.UTC().Format(time.RFC3339Nano))
}

// Is makes errors.Is(err, ErrHeld) true.
func (e *HeldError) Is(target error) bool { return target == ErrHeld }

// Lease returns the holding e names, for its owner to Release (see
// Acquire: an acquisition whose outcome was unknown).
func (e *HeldError) Lease() *Lease {
	return &Lease{Resource: e.Resource, Owner: e.Owner, Token: e.Token, Deadline: e.Deadline}
}

// MaxResourceLen bounds a resource name, so a key stays a sane size.
const MaxResourceLen = 512

// MaxOwnerLen bounds an owner name, which every acquire and renew writes
// into the lease key and every script on the resource reads back (a worker
// pool's owners, "<WorkerID>/<job id>", are at most 401 bytes).
const MaxOwnerLen = 512

// Config configures a Manager. The zero value is usable.
type Config struct {
	// Namespace prefixes every key (default "fq"), so tenants and tests
	// never collide: 1-64 letters, digits or ._:-, the rule of
	// jobs.ValidateNamespace (no brace, which would move the keys' hash
	// tag). Any other makes every call fail with ErrInvalid.
	Namespace string
	// Durability, when Replicas is above zero, makes Acquire wait until
	// that many replicas hold the new token (Redis WAIT, or WAITAOF),
	// and fail with ErrReplicas otherwise, the acquisition undone.
	Durability Durability
	// SafetyMargin is subtracted from the local view of the deadline in
	// KeepAlive, against clock drift between this process and Redis and
	// network delay (default: a tenth of the TTL, at least 10ms, never more
	// than half the TTL; KeepAlive refuses a margin above half its TTL).
	SafetyMargin time.Duration
	// Sentinel, for a client made by redis.NewFailoverClient, is the same
	// options. The Manager then takes the fencing epoch of each new primary
	// from the Sentinels' config epoch for the master (agreed by election,
	// raised by every failover); without it the epoch is counted in Redis
	// (see "Failover" in the package documentation).
	Sentinel *redis.FailoverOptions
	// Logger receives the Manager's logs: the fencing epoch's (a new
	// primary, an epoch capped, epochs off) and the wait for replicas'
	// (no WAITAOF). nil means slog.Default().
	Logger *slog.Logger
}

// Durability says how many replicas must hold a write before it is
// acknowledged. The zero value (Replicas 0) acknowledges a write when the
// primary applied it, as Redis does.
type Durability struct {
	// Replicas is how many replicas must acknowledge each write (0: off).
	Replicas int
	// Timeout bounds each wait for replicas (default 1s; at most 80 % of
	// the Redis client's read timeout, which the wait's reply is read
	// under: go-redis's default 5s).
	Timeout time.Duration
	// AOF waits with WAITAOF (the replicas also fsynced the write to their
	// append-only file) where the server has it (Redis 7.2 and later),
	// with WAIT otherwise (detected once, logged).
	AOF bool
}

// Manager acquires, renews and releases fenced leases in Redis. It is safe
// for concurrent use. It works with a single Redis, Sentinel (failover
// client) and Redis Cluster: every script touches one hash slot.
//
// Concurrent Acquire, Renew and Release calls on one Manager share
// pipelines: a few calls go out at once, each on its own connection, and a
// call made while those are in flight waits for the first to return and
// goes out with the others that arrived meanwhile, one round trip for all
// (internal/scriptbatch); on a single primary the queued acquisitions and
// releases of one epoch run as one script call. Share one Manager between
// goroutines to get this.
type Manager struct {
	client redis.UniversalClient
	cfg    Config
	batch  *scriptbatch.Batcher
	// acquires batches Acquire's calls: batch, or with Config.Durability
	// a batcher whose pipelines end with the wait for replicas.
	acquires *scriptbatch.Batcher
	epoch    *epoch.Tracker
	merges   atomic.Pointer[stateMerge]
	cfgErr   error // a nil Redis client or a durability refused: every call fails with it
}

var (
	//go:embed linger.lua
	lingerLua string
	//go:embed ops.lua
	opsLua    string
	opsSrc    = epoch.Lua + lingerLua + opsLua
	opsScript = luafunc.NewPlain(opsSrc)
	//go:embed release.lua
	releaseLua    string
	releaseScript = luafunc.NewPlain(lingerLua + releaseLua)
	//go:embed raise.lua
	raiseLua    string
	raiseScript = luafunc.NewPlain(epoch.Lua + lingerLua + raiseLua)
	//go:embed renew.lua
	renewSrc    string
	renewScript = luafunc.NewPlain(epoch.Lua + renewSrc)
	//go:embed holder.lua
	holderSrc    string
	holderScript = luafunc.NewPlain(epoch.Lua + holderSrc)
)

// NewManager returns a Manager over client. A nil client (or a typed nil
// pointer), a Config that does not validate (see Config.Validate: its
// Durability, its Sentinel options) or a Durability that client's read
// timeout cannot hold makes every call fail with an error matching
// ErrInvalid instead, as does every call on a nil or zero Manager.
func NewManager(client redis.UniversalClient, cfg Config) *Manager {
	if cfg.Namespace == "" {
		cfg.Namespace = "fq"
	}
	if argtype.IsNil(client) {
		return &Manager{cfg: cfg, cfgErr: fmt.Errorf("%w: NewManager was given a nil Redis client", ErrInvalid)}
	}
	m := &Manager{client: client, cfg: cfg, batch: scriptbatch.New(client, scriptbatch.Options{Yield: true}),
		epoch: epoch.New(client, cfg.Namespace, epoch.Options{Sentinel: cfg.Sentinel, Logger: cfg.Logger})}
	m.acquires = m.batch
	if err := cfg.Validate(); err != nil {
		m.cfgErr = err
		return m
	}
	if err := durable.CheckClient(client, durable.Options(cfg.Durability)); err != nil {
		m.cfgErr = fmt.Errorf("%w: %v", ErrInvalid, err)
		return m
	}
	if d := durable.Options(cfg.Durability); d.Enabled() {
		w := durable.New(client, d, cfg.Logger)
		m.acquires = scriptbatch.New(client, scriptbatch.Options{Append: w.Append, Yield: true})
	}
	return m
}

// Validate checks the configuration (the namespace, the durability's
// numbers, Sentinel options that name a master and a Sentinel).
func (c Config) Validate() error {
	if c.Namespace != "" { // "" is the default
		if err := namespace.Check(c.Namespace); err != nil {
			return fmt.Errorf("%w: %v", ErrInvalid, err)
		}
	}
	if err := durable.Options(c.Durability).Validate(); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if err := epoch.ValidateSentinel(c.Sentinel); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return nil
}

// Namespace returns the key prefix in use ("" for a nil Manager).
func (m *Manager) Namespace() string {
	if m == nil {
		return ""
	}
	return m.cfg.Namespace
}

// err is what every call fails with: the mistake NewManager found, or
// ErrInvalid for a nil or zero Manager, which NewManager did not make.
func (m *Manager) err() error {
	if m == nil || (m.client == nil && m.cfgErr == nil) {
		return fmt.Errorf("%w: a nil or zero lease.Manager: create it with NewManager", ErrInvalid)
	}
	return m.cfgErr
}

// Key returns the Redis key of resource's lease: "<token> <deadline µs>
// <owner>". It keeps the last token minted; released (or raised), it
// expires once every token minted afresh would be above it (see "Keys" in
// the package documentation).
//
// It is <ns>:lease:{<resource>}, hash-tagged by the resource. Redis hashes
// a whole key whose tag is empty, which a resource starting with "}"
// makes, so on Redis Cluster such a lease key and its epoch record
// (clockKey) would be in different slots: there a resource starting with
// "}" is tagged by a digest instead, <ns>:lease:#{<16 hex digits of its
// SHA-256>}:<resource>, a key no other resource produces.
func (m *Manager) Key(resource string) string {
	if m.epoch != nil && m.epoch.Cluster() && strings.HasPrefix(resource, "}") {
		return m.cfg.Namespace + ":lease:" + digestTag(resource) + ":" + resource
	}
	return m.cfg.Namespace + ":lease:{" + resource + "}"
}

// digestTag is the hash tag of a resource starting with "}" on Redis
// Cluster: #{<16 hex digits of its SHA-256>}.
func digestTag(resource string) string {
	sum := sha256.Sum256([]byte(resource))
	return "#{" + hex.EncodeToString(sum[:8]) + "}"
}

// validateResource refuses a resource name no lease may have.
func validateResource(resource string) error {
	switch {
	case resource == "":
		return fmt.Errorf("%w: empty resource", ErrInvalid)
	case len(resource) > MaxResourceLen:
		return fmt.Errorf("%w: resource longer than %d bytes", ErrInvalid, MaxResourceLen)
	}
	return nil
}

// validateOwner refuses an owner name no lease may have.
func validateOwner(owner string) error {
	switch {
	case owner == "":
		return fmt.Errorf("%w: empty owner", ErrInvalid)
	case len(owner) > MaxOwnerLen:
		return fmt.Errorf("%w: owner longer than %d bytes", ErrInvalid, MaxOwnerLen)
	case strings.ContainsAny(owner, "\r\n"):
		return fmt.Errorf("%w: owner contains a line break", ErrInvalid)
	}
	return nil
}

func validate(resource, owner string, ttl time.Duration) error {
	if err := validateResource(resource); err != nil {
		return err
	}
	if err := validateOwner(owner); err != nil {
		return err
	}
	switch {
	case ttl < time.Millisecond:
		return fmt.Errorf("%w: ttl %v must be at least 1ms", ErrInvalid, ttl)
	}
	return nil
}

func usec(s string) time.Time {
	v, _ := strconv.ParseInt(s, 10, 64)
	return time.UnixMicro(v)
}

func str(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	}
	return fmt.Sprint(v)
}

// Acquire takes the lease on resource for owner, or fails at once with a
// *HeldError (matching ErrHeld) naming the current holder.
//
// After a failover (or a restart) the first Acquire on the new primary
// learns its fencing epoch before minting, so the token is above every
// token minted before, whatever the new primary's clock says. While the
// primary keeps changing under it, Acquire fails with ErrUnsettled.
//
// An Acquire that fails after its request was sent (ctx ended, a network
// error) may still have taken the lease, and a retry by the same owner
// then fails with a *HeldError naming that owner. Acquire is not
// idempotent by owner on purpose: an owner name is not proof of one
// holding (a pool's owner for a job is the same for two attempts of it, a
// process name may be reused), and handing a second caller the held token
// would let storage accept both callers' writes. To recover, release the
// holding the error names and acquire again, which mints a higher token:
//
//	var held *lease.HeldError
//	if errors.As(err, &held) && held.Owner == owner {
//		_ = m.Release(ctx, held.Lease()) // ErrNotHeld: it ended meanwhile
//		l, err = m.Acquire(ctx, resource, owner, ttl)
//	}
//
// or wait until held.Deadline, when the lease ends by itself.
func (m *Manager) Acquire(ctx context.Context, resource, owner string, ttl time.Duration) (*Lease, error) {
	if err := m.err(); err != nil {
		return nil, err
	}
	if err := validate(resource, owner, ttl); err != nil {
		return nil, err
	}
	keys := m.keys(resource)
	var got string // '<token> <deadline_us>' when acquired
	var held []any
	var sent time.Time
	err := m.epoch.Mint(ctx, func(st epoch.State) (bool, error) {
		sent = time.Now()
		cmd := m.run(ctx, m.acquires, st, keys, "a", owner, ttl.Milliseconds())
		v, err := cmd.Result()
		if errors.Is(err, durable.ErrUnacknowledged) {
			if s, ok := v.(string); ok {
				return false, m.undo(ctx, resource, owner, s, err)
			}
			// Nothing was acquired (held, or another primary): the
			// reply says so whatever the replicas hold.
			err = nil
		}
		if err != nil {
			return false, err
		}
		if s, ok := v.(string); ok {
			got = s
			return false, nil
		}
		reply, _ := v.([]any)
		switch {
		case len(reply) > 0 && reply[0] == int64(-1):
			return true, nil // another primary, or a higher epoch recorded: refresh
		case len(reply) == 2 && reply[0] == int64(-2):
			return false, fmt.Errorf("%w (%s)", ErrExhausted, str(reply[1]))
		case len(reply) == 4 && reply[0] == int64(0):
			held = reply
			return false, nil
		}
		return false, fmt.Errorf("malformed reply %v", v)
	})
	if err != nil {
		return nil, fmt.Errorf("lease: acquire %q: %w", resource, err)
	}
	if held != nil {
		tok, _ := strconv.ParseUint(str(held[2]), 10, 64)
		return nil, &HeldError{Resource: resource, Owner: str(held[1]), Token: Token(tok), Deadline: usec(str(held[3]))}
	}
	ts, dl, _ := strings.Cut(got, " ")
	tok, err := strconv.ParseUint(ts, 10, 64)
	if err != nil || tok == 0 {
		return nil, fmt.Errorf("lease: acquire %q: malformed reply %q", resource, got)
	}
	l := &Lease{Resource: resource, Owner: owner, Token: Token(tok), Deadline: usec(dl), sent: sent, ttl: ttl}
	return l, nil
}

// opsMerge merges queued acquires and releases of one epoch state into one
// call of ops.lua: each operation's lease key, then the epoch record they
// share (KeyTail); the state's three arguments, then three per operation.
// Used on a single primary only (epoch.Tracker.Enabled), where one script
// may touch any keys; the Merge key is the state.
func opsMerge(st epoch.State) *scriptbatch.Merge {
	return &scriptbatch.Merge{Key: st.ReplID + "\x00" + strconv.FormatUint(st.Epoch, 10) + "\x00" + st.Born, Head: 3, KeyTail: 1, Max: 3 * 32, Alone: alone, Split: splitOps}
}

// alone runs a release that goes out on its own as release.lua, which
// needs neither the time nor the epoch library (its reply is the
// operation's value); an acquire stays a call of ops.lua.
func alone(s scriptbatch.Script, keys []string, args []any) (scriptbatch.Script, []string, []any) {
	if len(args) == 6 && args[3] == "r" {
		rid, _ := args[0].(string)
		ep, _ := args[1].(uint64)
		st := epoch.State{ReplID: rid, Epoch: ep}
		return releaseScript, keys[:1], []any{args[4], args[5], lingerEpoch(st, len(keys) > 1)}
	}
	return s, keys, args
}

// lingerEpoch is the epoch argument of a script that lets a lease key
// linger out (linger.lua): st's epoch when the namespace's epoch record
// keeps the time (timed: the keys name it), empty when the key is to stay:
// without a clock record, and on Redis Cluster, where the slot's master
// decides the epoch.
func lingerEpoch(st epoch.State, timed bool) string {
	if !timed || st.ReplID == epoch.Node.ReplID {
		return ""
	}
	return strconv.FormatUint(st.Epoch, 10)
}

// splitOps gives each merged operation its own value of ops.lua's reply.
func splitOps(reply any, n []int) ([]any, error) {
	r, ok := reply.([]any)
	if !ok || len(r) != len(n) {
		return nil, fmt.Errorf("malformed reply %v", reply)
	}
	return r, nil
}

// run runs one operation of ops.lua (op, owner and its third argument) on
// keys (m.keys) through b with epoch state st, merged with others queued
// on a single primary, and returns the operation's own reply.
func (m *Manager) run(ctx context.Context, b *scriptbatch.Batcher, st epoch.State, keys []string, op, owner string, x any) *redis.Cmd {
	args := []any{st.ReplID, st.Epoch, st.Born, op, owner, x}
	if !m.epoch.Enabled() {
		s, k, a := alone(opsScript, keys, args)
		return unwrap(ctx, b.Run(ctx, s, k, a...))
	}
	mg := m.merges.Load()
	if mg == nil || mg.st != st {
		mg = &stateMerge{st: st, m: opsMerge(st)}
		m.merges.Store(mg)
	}
	return unwrap(ctx, b.RunMerged(ctx, mg.m, opsScript, keys, args...))
}

// stateMerge is the Merge of the epoch state calls last ran with.
type stateMerge struct {
	st epoch.State
	m  *scriptbatch.Merge
}

// unwrap turns the reply of a lone ops.lua call (a list of one operation's
// value) into that value; a merged call's part is that value already.
func unwrap(ctx context.Context, cmd *redis.Cmd) *redis.Cmd {
	// No operation's value is a list of one.
	if r, ok := cmd.Val().([]any); ok && len(r) == 1 {
		out := redis.NewCmd(ctx)
		out.SetVal(r[0])
		out.SetErr(cmd.Err())
		return out
	}
	return cmd
}

// undo frees a resource whose acquisition too few replicas acknowledged
// (reply is the acquisition's value in ops.lua's reply, '<token>
// <deadline_us>' when it acquired). The burned token is
// harmless: tokens only rise.
func (m *Manager) undo(ctx context.Context, resource, owner, reply string, ackErr error) error {
	if tok, _, ok := strings.Cut(reply, " "); ok {
		_ = m.run(ctx, m.batch, m.epoch.Last(), m.keys(resource), "r", owner, tok).Err()
	}
	return fmt.Errorf("%w: %w", ErrReplicas, ackErr)
}

// AcquireWait retries Acquire with jittered exponential backoff while the
// resource is held, until it succeeds or ctx ends. Other errors end it at once.
func (m *Manager) AcquireWait(ctx context.Context, resource, owner string, ttl time.Duration) (*Lease, error) {
	backoff := 5 * time.Millisecond
	for {
		l, err := m.Acquire(ctx, resource, owner, ttl)
		if err == nil || !errors.Is(err, ErrHeld) {
			return l, err
		}
		sleep := backoff/2 + rand.N(backoff/2+1)
		t := time.NewTimer(sleep)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("%w (%w)", context.Cause(ctx), err)
		case <-t.C:
		}
		if backoff < 500*time.Millisecond {
			backoff *= 2
		}
	}
}

// Renew extends l by ttl from now (Redis time) and updates l.Deadline. It
// fails with ErrLost once the lease expired or a newer token exists.
func (m *Manager) Renew(ctx context.Context, l *Lease, ttl time.Duration) error {
	if err := m.err(); err != nil {
		return err
	}
	if l == nil {
		return fmt.Errorf("%w: nil lease", ErrInvalid)
	}
	if err := validate(l.Resource, l.Owner, ttl); err != nil {
		return err
	}
	sent := time.Now()
	reply, err := m.batch.Run(ctx, renewScript, m.keys(l.Resource),
		l.Owner, l.Token.String(), ttl.Milliseconds()).Slice()
	if err != nil {
		return fmt.Errorf("lease: renew %q: %w", l.Resource, err)
	}
	if reply[0].(int64) == 0 {
		return fmt.Errorf("%w: %q token %d %s", ErrLost, l.Resource, l.Token, str(reply[1]))
	}
	l.Deadline = usec(str(reply[1]))
	l.sent, l.ttl = sent, ttl
	return nil
}

// Release frees l if its token still holds the resource. A stale release
// (superseded by a newer token, already released, or raised past) changes
// nothing and returns ErrNotHeld. A lease that expired while no one
// acquired the resource since is still freed (nil): Release reads no
// clock, and the next token is above l's either way.
func (m *Manager) Release(ctx context.Context, l *Lease) error {
	if err := m.err(); err != nil {
		return err
	}
	if l == nil {
		return fmt.Errorf("%w: nil lease", ErrInvalid)
	}
	if err := validateResource(l.Resource); err != nil {
		return err
	}
	if err := validateOwner(l.Owner); err != nil {
		return err
	}
	n, err := m.run(ctx, m.batch, m.epoch.Last(), m.keys(l.Resource), "r", l.Owner, l.Token.String()).Int()
	if err != nil {
		return fmt.Errorf("lease: release %q: %w", l.Resource, err)
	}
	if n == 0 {
		return fmt.Errorf("%w: %q token %d", ErrNotHeld, l.Resource, l.Token)
	}
	return nil
}

// Raise makes every token minted for resource from now on greater than
// mark. Call it with the high-water mark of a storage refusal (the
// StoredToken of a *fence.StaleError): storage has seen a token the lease
// counter no longer knows (a failover lost it, and the epochs could not
// tell), and the next Acquire then mints above it at once instead of
// being refused until the clock catches up. Tokens only rise, so a wrong
// mark costs nothing but token space. A live lease on resource whose token
// is below mark ends (storage refuses that token anyway): its Renew
// reports ErrLost and the next Acquire may start at once. A mark the key
// already reaches changes nothing. Raise takes any mark below 2^64 - 1,
// and a counter raised near 2^64 can mint no more (Acquire fails with
// ErrExhausted): bound marks from
// storage you do not trust (pools and the asynq bridge feed back no mark
// whose time part, its low 52 bits, lies more than a year past their
// clock: no counter mints such a token).
func (m *Manager) Raise(ctx context.Context, resource string, mark Token) error {
	if err := m.err(); err != nil {
		return err
	}
	if err := validateResource(resource); err != nil {
		return err
	}
	switch {
	case uint64(mark) == math.MaxUint64:
		return fmt.Errorf("%w: no token is above mark %d", ErrInvalid, mark)
	case mark == 0:
		return nil
	}
	ep := lingerEpoch(m.epoch.Last(), m.epoch.Enabled())
	if err := m.batch.Run(ctx, raiseScript, []string{m.Key(resource)}, mark.String(), ep).Err(); err != nil {
		return fmt.Errorf("lease: raise %q: %w", resource, err)
	}
	return nil
}

// keys returns the KEYS of a script on resource's lease that reads the
// namespace's time: the lease key, then the epoch record that keeps the
// time and the epochs (on Redis Cluster the resource's own, in its slot:
// clockKey; absent when epochs are off).
func (m *Manager) keys(resource string) []string {
	switch {
	case m.epoch.Enabled():
		return []string{m.Key(resource), m.epoch.Key()}
	case m.epoch.Cluster():
		return []string{m.Key(resource), m.clockKey(resource)}
	}
	return []string{m.Key(resource)}
}

// clockKey is resource's epoch record on Redis Cluster, where a script
// touches one slot: <ns>:lease:{<resource>}:clock, the same fields as the
// namespace's record (internal/epoch), in the lease's slot. No lease key
// has this name (a lease key ends with the resource's closing brace). A
// resource Key tags by a digest has <ns>:lease:#{<digest>}:clock:<resource>
// (its lease key has the resource, starting with "}", after the tag).
func (m *Manager) clockKey(resource string) string {
	if strings.HasPrefix(resource, "}") {
		return m.cfg.Namespace + ":lease:" + digestTag(resource) + ":clock:" + resource
	}
	return m.Key(resource) + ":clock"
}

// Holder returns the live lease on resource, or nil when it is free.
func (m *Manager) Holder(ctx context.Context, resource string) (*Lease, error) {
	if err := m.err(); err != nil {
		return nil, err
	}
	if err := validateResource(resource); err != nil {
		return nil, err
	}
	h, err := holderScript.Run(ctx, m.client, m.keys(resource)).Slice()
	if err != nil {
		return nil, fmt.Errorf("lease: holder %q: %w", resource, err)
	}
	if len(h) < 3 {
		return nil, nil
	}
	tok, _ := strconv.ParseUint(str(h[1]), 10, 64)
	return &Lease{Resource: resource, Owner: str(h[0]), Token: Token(tok), Deadline: usec(str(h[2]))}, nil
}
