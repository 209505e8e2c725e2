package redisfence

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/internal/argtype"
	"github.com/fencedq/fencedq/internal/luafunc"
	"github.com/fencedq/fencedq/internal/namespace"
	"github.com/fencedq/fencedq/lease"
)

// DefaultEffectTTL is how long effect records are kept when
// Config.EffectTTL is zero.
const DefaultEffectTTL = 7 * 24 * time.Hour

// DefaultPendingTTL is how long Guard's pending record lives when
// Config.PendingTTL is zero.
const DefaultPendingTTL = time.Minute

// indexSlack is how much longer an index entry lives than the effect
// record it points to.
const indexSlack = time.Hour

// Sentinel errors of this package. The fence contract's errors come from
// package fence (fence.ErrStale, fence.ErrAlreadyApplied, fence.ErrInvalid).
var (
	// ErrConfig means Config was rejected.
	ErrConfig = errors.New("redisfence: invalid config")
	// ErrMutation means a mutation could not apply to the data it found (a
	// wrong key type, a counter Redis does not read as a 64-bit integer, a
	// sum that would overflow one), or one of the store's own keys holds
	// another type than the store writes there, or a high-water mark a
	// token that is not a decimal uint64 (edited by hand); nothing was
	// written, and the operation id is left unbound. Such a refused write
	// (Apply, FenceOnAcquire, Guard before its callback) matches
	// fence.ErrRefused too. Reads (HighWater,
	// Applied, AppliedOn) of such a key (or of an effect record whose token
	// is not one) fail with it too, naming the key. Redis refusing a write
	// of its own accord (READONLY from a replica, such as a primary a
	// failover demoted; NOREPLICAS; OOM) is not ErrMutation: its error is
	// returned as it is, and a retry through the primary applies.
	ErrMutation = errors.New("redisfence: mutation rejected")
)

// Config configures a Store. The zero value is usable.
type Config struct {
	// Namespace prefixes every key (default "fq"): 1-64 letters, digits
	// or ._:-, the rule of jobs.ValidateNamespace (no brace, which would
	// move the keys' hash tag); New refuses any other.
	Namespace string
	// EffectTTL is how long an effect record (and its index entry) is kept
	// after the operation was applied (default DefaultEffectTTL, 7 days).
	// Within it a repeated operation id is recognised as applied; after it,
	// it is not. Keep it longer than any job can be retried or reconciled.
	// A negative value keeps records forever.
	EffectTTL time.Duration
	// PendingTTL bounds how long Guard holds an operation as pending while
	// its callback runs (default DefaultPendingTTL, 1 minute). The callback's
	// context ends when it expires.
	PendingTTL time.Duration
}

// Store fences writes to Redis: a per-resource high-water mark (token,
// owner), an effect log keyed by operation id, and the caller's mutations,
// all checked and applied by one Lua script. It works on a single Redis,
// Sentinel and Redis Cluster. It is safe for concurrent use.
type Store struct {
	client redis.UniversalClient
	cfg    Config
}

var (
	_ fence.EffectLog = (*Store)(nil)
	_ fence.Fencer    = (*Store)(nil)
)

var (
	//go:embed apply.lua
	applySrc    string
	applyScript = luafunc.NewPlain(applySrc)
	//go:embed raise.lua
	raiseSrc    string
	raiseScript = luafunc.NewPlain(raiseSrc)
	//go:embed finish.lua
	finishSrc    string
	finishScript = luafunc.NewPlain(finishSrc)
	//go:embed abort.lua
	abortSrc    string
	abortScript = luafunc.NewPlain(abortSrc)
	//go:embed claim.lua
	claimSrc    string
	claimScript = luafunc.NewPlain(claimSrc)
	//go:embed release.lua
	releaseSrc    string
	releaseScript = luafunc.NewPlain(releaseSrc)
)

// New returns a Store over client. A nil client (or a typed nil pointer)
// fails with ErrConfig.
func New(client redis.UniversalClient, cfg Config) (*Store, error) {
	if argtype.IsNil(client) {
		return nil, fmt.Errorf("%w: nil client", ErrConfig)
	}
	if cfg.Namespace == "" {
		cfg.Namespace = "fq"
	}
	if err := namespace.Check(cfg.Namespace); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	if cfg.EffectTTL == 0 {
		cfg.EffectTTL = DefaultEffectTTL
	}
	if cfg.EffectTTL > 0 && cfg.EffectTTL < time.Millisecond {
		return nil, fmt.Errorf("%w: EffectTTL %v below 1ms", ErrConfig, cfg.EffectTTL)
	}
	if cfg.PendingTTL == 0 {
		cfg.PendingTTL = DefaultPendingTTL
	}
	if cfg.PendingTTL < time.Millisecond {
		return nil, fmt.Errorf("%w: PendingTTL %v below 1ms", ErrConfig, cfg.PendingTTL)
	}
	return &Store{client: client, cfg: cfg}, nil
}

// usable is what every call fails with on a nil or zero Store (one New
// did not make), instead of panicking.
func (s *Store) usable() error {
	if s == nil || s.client == nil {
		return fmt.Errorf("%w: a nil or zero redisfence.Store: create it with New", ErrConfig)
	}
	return nil
}

// Namespace returns the key prefix in use.
func (s *Store) Namespace() string { return s.cfg.Namespace }

// HighWaterKey returns the key of resource's high-water hash
// (<ns>:fence:{<resource>}:hw; fields token, owner, updated_us). It never
// expires.
func (s *Store) HighWaterKey(resource string) string {
	return s.cfg.Namespace + ":fence:{" + resource + "}:hw"
}

// EffectKey returns the key of the effect record of operationID on resource
// (<ns>:fence:{<resource>}:op:<operation id>; fields state, resource,
// operation_id, token, owner, applied_us). It expires after Config.EffectTTL.
func (s *Store) EffectKey(resource, operationID string) string {
	return s.cfg.Namespace + ":fence:{" + resource + "}:op:" + operationID
}

// IndexKey returns the key binding operationID to the one resource it may
// apply on (<ns>:fence:opindex:{<operation id>}, see opKey), which also
// lets Applied answer from the operation id alone.
func (s *Store) IndexKey(operationID string) string { return s.opKey("opindex", operationID) }

// ClaimsKey returns the key counting the writes of operationID in flight
// or applied on the resource IndexKey binds it to
// (<ns>:fence:opclaims:{<operation id>}, see opKey). It is always in
// IndexKey's hash slot.
func (s *Store) ClaimsKey(operationID string) string { return s.opKey("opclaims", operationID) }

// opKey is the key of family (opindex, opclaims) for an operation id,
// hash-tagged by the operation id so that both keys of one operation share
// a slot on Redis Cluster, whatever its characters: <ns>:fence:<family>:{<op>}.
// Redis hashes the text between the first "{" and the next "}", or the
// whole key when that text is empty, so an operation id starting with "}"
// ("}x{") would make the two keys hash whole, into different slots. Such
// an id is tagged by a digest instead, in keys no other id produces:
// <ns>:fence:<family>:#{<16 hex digits of its SHA-256>}:<op>.
func (s *Store) opKey(family, op string) string {
	if strings.HasPrefix(op, "}") {
		sum := sha256.Sum256([]byte(op))
		return s.cfg.Namespace + ":fence:" + family + ":#{" + hex.EncodeToString(sum[:8]) + "}:" + op
	}
	return s.cfg.Namespace + ":fence:" + family + ":{" + op + "}"
}

// legacyIndexKey is where versions before opKey's digest tag bound an
// operation id starting with "}" (on a single Redis; on Cluster such ids
// failed), read so that bindings made before an upgrade are still seen
// until they expire; "" for every other id, whose key did not change.
func (s *Store) legacyIndexKey(op string) string {
	if !strings.HasPrefix(op, "}") {
		return ""
	}
	return s.cfg.Namespace + ":fence:opindex:{" + op + "}"
}

// legacyBinding returns the resource a binding made before the upgrade
// (legacyIndexKey) holds for op, "" when there is none.
func (s *Store) legacyBinding(ctx context.Context, op string) (string, error) {
	k := s.legacyIndexKey(op)
	if k == "" {
		return "", nil
	}
	v, err := s.client.Get(ctx, k).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return "", readError(fmt.Sprintf("binding of %q", op), k, "a string", err)
	}
	return v, nil
}

// DataKey returns a key for application data in resource's hash slot
// (<ns>:data:{<resource>}:<name>), usable in the ops of Apply.
func (s *Store) DataKey(resource, name string) string {
	return s.cfg.Namespace + ":data:{" + resource + "}:" + name
}

func validateFence(f fence.Fence) error {
	if err := f.Validate(); err != nil {
		return err
	}
	return validateResource(f.Resource)
}

func validateResource(resource string) error {
	switch {
	case resource == "":
		return fmt.Errorf("%w: empty resource", fence.ErrInvalid)
	case len(resource) > lease.MaxResourceLen:
		return fmt.Errorf("%w: resource longer than %d bytes", fence.ErrInvalid, lease.MaxResourceLen)
	case strings.ContainsAny(resource, "{}"):
		return fmt.Errorf("%w: resource %q contains a brace (it is the keys' hash tag)", fence.ErrInvalid, resource)
	}
	return nil
}

func ms(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return max(d.Milliseconds(), 1)
}

// claim binds f.OperationID to f.Resource before the fenced script runs
// (claim.lua), so that an operation id applies on one resource only and
// Applied never misses an applied operation. If the operation id is bound
// to another resource, the write must not go ahead and claim returns why:
// a *fence.StaleError if f is stale on its own resource (the fence is
// checked first, as on any write), a *fence.AlreadyAppliedError carrying
// the other resource's record if the operation was applied there, and
// fence.ErrInProgress otherwise (a write of it on the other resource is in
// flight, or ended with an unknown outcome).
func (s *Store) claim(ctx context.Context, f fence.Fence) error {
	var ttl time.Duration
	if s.cfg.EffectTTL > 0 {
		ttl = s.cfg.EffectTTL + indexSlack
	}
	other, err := s.legacyBinding(ctx, f.OperationID)
	if err != nil {
		return err
	}
	if other == f.Resource {
		other = ""
	}
	if other == "" {
		keys := []string{s.IndexKey(f.OperationID), s.ClaimsKey(f.OperationID)}
		reply, err := claimScript.Run(ctx, s.client, keys, f.Resource, ms(ttl)).Slice()
		if err != nil {
			return scriptError(fmt.Sprintf("claim %q", f.OperationID), err)
		}
		if code, _ := reply[0].(int64); code == 1 {
			return nil
		}
		other = str(reply[1])
	}
	tok, owner, err := s.HighWater(ctx, f.Resource)
	if err != nil {
		return err
	}
	if tok != 0 && !f.Accepts(tok, owner) {
		return &fence.StaleError{Fence: f, StoredToken: tok, StoredOwner: owner}
	}
	rec, ok, err := s.AppliedOn(ctx, other, f.OperationID)
	if err != nil {
		return err
	}
	if ok {
		return &fence.AlreadyAppliedError{Record: rec, Fence: f}
	}
	return fmt.Errorf("%w: %q is being written on %q; refused on %q", fence.ErrInProgress, f.OperationID, other, f.Resource)
}

// release gives up f's claim after the write was refused without applying
// anything (release.lua). A failure to release only keeps the operation id
// bound to f.Resource until the binding expires.
func (s *Store) release(ctx context.Context, f fence.Fence) {
	keys := []string{s.IndexKey(f.OperationID), s.ClaimsKey(f.OperationID)}
	_ = releaseScript.Run(context.WithoutCancel(ctx), s.client, keys, f.Resource).Err()
}

// refused reports whether err from the fenced script proves that nothing
// was written.
func refused(err error) bool {
	return errors.Is(err, fence.ErrStale) || errors.Is(err, fence.ErrInProgress) || errors.Is(err, ErrMutation)
}

// Apply checks f and applies ops in one atomic script:
//
//  1. f and ops are validated first; an incomplete fence, a resource with a
//     brace, or an op whose key is not tagged by the resource or is
//     one of fencedq's own keys in the store's namespace (<ns>:fence:...,
//     <ns>:lease:..., <ns>:epoch, <ns>:{<queue>}:... and the others the
//     package documentation lists under Keys) fails with an error
//     matching fence.ErrInvalid and nothing is written.
//  2. The operation id is bound to f.Resource (IndexKey), so that it applies
//     on one resource only and Applied can find it. If it is bound to
//     another resource, Apply returns without writing: a *fence.StaleError
//     if f is stale, a *fence.AlreadyAppliedError with the other resource's
//     record if the operation was applied there, fence.ErrInProgress if a
//     write of it is still in flight there.
//  3. The script compares f with the resource's stored (token, owner): a
//     higher token, or the same token from the same owner, is accepted;
//     anything else returns a *fence.StaleError (matching fence.ErrStale).
//  4. If the effect record of f.OperationID exists, it returns a
//     *fence.AlreadyAppliedError (matching fence.ErrAlreadyApplied) with the
//     recorded token; fence.ErrInProgress if a Guard holds it pending.
//  5. Every op's precondition (key type, integer values, sums within the
//     signed 64-bit range) is checked; a failing one returns an error
//     matching ErrMutation, as does a store key (see Keys in the package
//     documentation) holding another type than the store writes there.
//  6. Only then does it write: the high-water mark, the effect record
//     (expiring after Config.EffectTTL) and the ops, in order.
//
// Each key may appear in at most one op. A rejected Apply changes nothing:
// it gives its binding up again. A network error leaves the outcome
// unknown (ask Applied) and keeps the binding until it expires.
func (s *Store) Apply(ctx context.Context, f fence.Fence, ops ...Op) error {
	if err := s.usable(); err != nil {
		return err
	}
	if err := validateFence(f); err != nil {
		return err
	}
	if err := validateOps(f.Resource, s.cfg.Namespace, ops); err != nil {
		return err
	}
	if err := s.claim(ctx, f); err != nil {
		return refusedWrite(err)
	}
	err := s.run(ctx, f, "apply", ms(s.cfg.EffectTTL), "", ops)
	if refused(err) {
		s.release(ctx, f)
	}
	return refusedWrite(err)
}

// refusedWrite marks with fence.ErrRefused an ErrMutation of a write that
// wrote nothing: a retry fails the same way until the data is repaired.
func refusedWrite(err error) error {
	if errors.Is(err, ErrMutation) {
		return fmt.Errorf("%w (%w)", err, fence.ErrRefused)
	}
	return err
}

func (s *Store) run(ctx context.Context, f fence.Fence, mode string, ttl int64, nonce string, ops []Op) error {
	keys := make([]string, 0, 2+len(ops))
	keys = append(keys, s.HighWaterKey(f.Resource), s.EffectKey(f.Resource, f.OperationID))
	args := []any{f.Token.String(), f.Owner, f.Resource, f.OperationID, mode, ttl, nonce, len(ops)}
	for _, o := range ops {
		keys = append(keys, o.key)
		args = append(args, o.cmd, len(o.args))
		for _, a := range o.args {
			args = append(args, a)
		}
	}
	reply, err := applyScript.Run(ctx, s.client, keys, args...).Slice()
	if err != nil {
		return scriptError(fmt.Sprintf("apply %q on %q", f.OperationID, f.Resource), err)
	}
	switch code, _ := reply[0].(int64); code {
	case 1:
		return nil
	case 0:
		return &fence.StaleError{Fence: f, StoredToken: parseToken(reply[1]), StoredOwner: str(reply[2])}
	case 2:
		return &fence.AlreadyAppliedError{Record: fence.Effect{
			OperationID: f.OperationID, Resource: str(reply[4]), Token: parseToken(reply[1]), Owner: str(reply[2]),
		}, Fence: f}
	case 3:
		return fmt.Errorf("%w: %q on %q (token %s)", fence.ErrInProgress, f.OperationID, f.Resource, str(reply[1]))
	default:
		return fmt.Errorf("redisfence: apply %q: unexpected reply %v", f.OperationID, reply)
	}
}

// FenceOnAcquire raises f.Resource's high-water mark to (f.Token, f.Owner)
// without recording an operation, so a stale holder is cut off before the
// new holder's first write. Call it right after acquiring the lease;
// f.OperationID is ignored. It returns a *fence.StaleError (matching
// fence.ErrStale) if a higher token, or the same token of another owner, is
// already stored.
func (s *Store) FenceOnAcquire(ctx context.Context, f fence.Fence) error {
	if err := s.usable(); err != nil {
		return err
	}
	if f.OperationID == "" {
		f.OperationID = "-" // not recorded; only satisfies Validate
	}
	if err := validateFence(f); err != nil {
		return err
	}
	reply, err := raiseScript.Run(ctx, s.client, []string{s.HighWaterKey(f.Resource)}, f.Token.String(), f.Owner).Slice()
	if err != nil {
		return refusedWrite(scriptError(fmt.Sprintf("fence %q", f.Resource), err))
	}
	if code, _ := reply[0].(int64); code != 1 {
		return &fence.StaleError{Fence: f, StoredToken: parseToken(reply[1]), StoredOwner: str(reply[2])}
	}
	return nil
}

// HighWater returns the highest accepted token of resource and its owner,
// or a zero token when the resource was never fenced. A resource no write
// can name (empty, too long, with a brace) fails with fence.ErrInvalid. A
// mark whose token is not a decimal uint64 above 0 (edited by hand) fails
// with ErrMutation naming the key, as every write on the resource does.
func (s *Store) HighWater(ctx context.Context, resource string) (lease.Token, string, error) {
	if err := s.usable(); err != nil {
		return 0, "", err
	}
	if err := validateResource(resource); err != nil {
		return 0, "", err
	}
	key := s.HighWaterKey(resource)
	h, err := s.client.HMGet(ctx, key, "token", "owner").Result()
	if err != nil {
		return 0, "", readError(fmt.Sprintf("high-water of %q", resource), key, "a hash", err)
	}
	if h[0] == nil && h[1] == nil {
		return 0, "", nil
	}
	tok, ok := markToken(h[0])
	if !ok {
		return 0, "", fmt.Errorf("%w: store key %s holds a token that is not a decimal uint64", ErrMutation, key)
	}
	return tok, str(h[1]), nil
}

// Applied reports whether operationID was applied, implementing
// fence.EffectLog: it reads the binding (IndexKey) for the operation's
// resource, then that resource's effect record. The binding is written
// before every Apply or Guard and kept once the operation applied, so an
// applied operation is never missed while its records are retained
// (Config.EffectTTL). A pending Guard operation is not
// applied (yet). If the reconciler knows the resource, AppliedOn saves the
// index lookup.
func (s *Store) Applied(ctx context.Context, operationID string) (fence.Effect, bool, error) {
	if err := s.usable(); err != nil {
		return fence.Effect{}, false, err
	}
	if operationID == "" {
		return fence.Effect{}, false, fmt.Errorf("%w: empty operation id", fence.ErrInvalid)
	}
	key := s.IndexKey(operationID)
	resource, err := s.client.Get(ctx, key).Result()
	if errors.Is(err, redis.Nil) {
		if resource, err = s.legacyBinding(ctx, operationID); err != nil || resource == "" {
			return fence.Effect{}, false, err
		}
	}
	if err != nil {
		return fence.Effect{}, false, readError(fmt.Sprintf("applied %q", operationID), key, "a string", err)
	}
	return s.AppliedOn(ctx, resource, operationID)
}

// AppliedOn reports whether operationID was applied on resource, reading
// the effect record directly (one round trip, no index).
func (s *Store) AppliedOn(ctx context.Context, resource, operationID string) (fence.Effect, bool, error) {
	if err := s.usable(); err != nil {
		return fence.Effect{}, false, err
	}
	if operationID == "" {
		return fence.Effect{}, false, fmt.Errorf("%w: empty operation id", fence.ErrInvalid)
	}
	if err := validateResource(resource); err != nil {
		return fence.Effect{}, false, err
	}
	key := s.EffectKey(resource, operationID)
	h, err := s.client.HMGet(ctx, key, "state", "token", "owner").Result()
	if err != nil {
		return fence.Effect{}, false, readError(fmt.Sprintf("applied %q on %q", operationID, resource), key, "a hash", err)
	}
	if str(h[0]) != "applied" {
		return fence.Effect{}, false, nil
	}
	tok, ok := markToken(h[1])
	if !ok {
		return fence.Effect{}, false, fmt.Errorf("%w: store key %s holds a token that is not a decimal uint64", ErrMutation, key)
	}
	return fence.Effect{OperationID: operationID, Resource: resource, Token: tok, Owner: str(h[2])}, true, nil
}

// scriptError wraps a script's error: a refusal the script raised
// ("FENCEDQ <reason>": a mutation that cannot apply, a store key of another
// type) matches ErrMutation, anything else is what doing failed with.
func scriptError(doing string, err error) error {
	if msg, ok := strings.CutPrefix(err.Error(), "FENCEDQ "); ok {
		return fmt.Errorf("%w: %s", ErrMutation, msg)
	}
	return fmt.Errorf("redisfence: %s: %w", doing, err)
}

// readError wraps the error of a read of store key key, which the store
// keeps as kind ("a hash", "a string"): a key holding another type (edited
// by hand, or written by another program) matches ErrMutation and names
// the key, as the scripts' refusals do; anything else is what doing failed
// with.
func readError(doing, key, kind string, err error) error {
	if strings.HasPrefix(err.Error(), "WRONGTYPE") {
		return fmt.Errorf("%w: store key %s is not %s", ErrMutation, key, kind)
	}
	return fmt.Errorf("redisfence: %s: %w", doing, err)
}

func str(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	}
	return fmt.Sprint(v)
}

// markToken reads a token the store wrote (a decimal uint64 above 0
// without leading zeros); ok is false for anything else.
func markToken(v any) (tok lease.Token, ok bool) {
	s, isStr := v.(string)
	if !isStr || s == "" || s[0] < '1' || s[0] > '9' {
		return 0, false
	}
	t, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, false
	}
	return lease.Token(t), true
}

func parseToken(v any) lease.Token {
	t, _ := strconv.ParseUint(str(v), 10, 64)
	return lease.Token(t)
}
