package fence

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fencedq/fencedq/internal/epoch"
	"github.com/fencedq/fencedq/lease"
)

// Sentinel errors shared by every adapter. Match them with errors.Is.
var (
	// ErrStale means storage has seen a higher token for the resource (or the
	// same token from another owner); the write was rejected and nothing changed.
	ErrStale = errors.New("fence: stale token")
	// ErrAlreadyApplied means the operation id was applied before; nothing changed.
	ErrAlreadyApplied = errors.New("fence: operation already applied")
	// ErrInvalid means the fence is incomplete; nothing was written.
	ErrInvalid = errors.New("fence: invalid fence")
	// ErrRefused means the store refused the write for a reason a retry
	// does not fix (data it found is not as the write needs, such as one
	// of its own keys edited by hand); nothing was written. An operator
	// has to repair the data first.
	ErrRefused = errors.New("fence: write refused by the store")
)

// Fence is what a write must carry to protected storage: the resource it
// touches, the lease token and owner that authorise it, and the operation id
// that makes it idempotent.
type Fence struct {
	// Resource names what the write touches: the leased resource.
	Resource string
	// Token is the lease token that authorises the write.
	Token lease.Token
	// Owner identifies the lease holder.
	Owner string
	// OperationID identifies the write's effect, so it applies once.
	OperationID string
}

// Validate reports with ErrInvalid an incomplete fence, or one no lease
// can have issued: a resource longer than lease.MaxResourceLen, an owner
// longer than lease.MaxOwnerLen bytes or holding a line break ("\r" or
// "\n"), which package lease refuses in an owner, or a token whose time
// part lies more than a year past the clock (a token is (epoch << 52) +
// Redis time in µs, whatever its epoch): stored as a resource's mark, such
// a token (2^64-1, say) would refuse every later holder for good.
func (f Fence) Validate() error {
	switch {
	case f.Resource == "":
		return fmt.Errorf("%w: empty resource", ErrInvalid)
	case len(f.Resource) > lease.MaxResourceLen:
		return fmt.Errorf("%w: resource longer than %d bytes", ErrInvalid, lease.MaxResourceLen)
	case f.Token == 0:
		return fmt.Errorf("%w: zero token", ErrInvalid)
	case !epoch.Plausible(uint64(f.Token), time.Now()):
		return fmt.Errorf("%w: token %d is no lease token: its time part lies more than a year ahead", ErrInvalid, f.Token)
	case f.Owner == "":
		return fmt.Errorf("%w: empty owner", ErrInvalid)
	case len(f.Owner) > lease.MaxOwnerLen:
		return fmt.Errorf("%w: owner longer than %d bytes", ErrInvalid, lease.MaxOwnerLen)
	case strings.ContainsAny(f.Owner, "\r\n"):
		return fmt.Errorf("%w: owner contains a line break", ErrInvalid)
	case f.OperationID == "":
		return fmt.Errorf("%w: empty operation id", ErrInvalid)
	}
	return nil
}

// Accepts reports whether storage holding (storedToken, storedOwner) accepts
// a write from f: a higher token, or the same token from the same owner.
func (f Fence) Accepts(storedToken lease.Token, storedOwner string) bool {
	return f.Token > storedToken || (f.Token == storedToken && f.Owner == storedOwner)
}

// StaleError describes a rejected write. It matches ErrStale.
type StaleError struct {
	// Fence is the rejected fence.
	Fence Fence
	// StoredToken is the token of the resource's high-water mark that
	// rejected it.
	StoredToken lease.Token
	// StoredOwner is the owner of that high-water mark. Tell it to no one
	// who could send it back.
	StoredOwner string
}

// Error describes the rejection. It does not name StoredOwner: with
// StoredToken it authorises writes as the holder, and error texts travel
// (to HTTP answers, logs, job records).
func (e *StaleError) Error() string {
	other := ""
	if e.StoredToken == e.Fence.Token {
		other = " of another owner"
	}
	return fmt.Sprintf("fence: stale token %d for %q (storage has token %d%s)",
		e.Fence.Token, e.Fence.Resource, e.StoredToken, other)
}

// Is makes errors.Is(err, ErrStale) true.
func (e *StaleError) Is(target error) bool { return target == ErrStale }

// Effect is the effect log's record of one applied operation: which fence
// (resource, token, owner) applied it. It is distinct from the reconcile
// verdict jobs.Applied, which only says that an effect happened.
type Effect struct {
	// OperationID is the operation asked about.
	OperationID string
	// Resource is the resource of the fence that applied it.
	Resource string
	// Token is the token of the fence that applied it.
	Token lease.Token
	// Owner is the owner of the fence that applied it.
	Owner string
}

// EffectLog answers whether an operation was applied. The reconciler uses it
// to resolve uncertain jobs whose effects go through a fence store.
type EffectLog interface {
	// Applied returns the record of operationID, or ok=false if it was never applied.
	Applied(ctx context.Context, operationID string) (rec Effect, ok bool, err error)
}

// Fencer is implemented by stores that can raise a resource's high-water
// mark without recording an operation (pgfence's and redisfence's Store,
// through their FenceOnAcquire). A maintenance leader (or an asynq bridge)
// whose EffectLog is also a Fencer raises the mark of an uncertain
// attempt's resource past that attempt before it asks the log about the
// attempt's operation, so that the attempt, should it still run (a paused
// process, a handler that ignores its context), can no longer write there
// and "not applied" stays true.
type Fencer interface {
	// FenceOnAcquire raises f.Resource's mark to (f.Token, f.Owner), or
	// fails with a *StaleError (matching ErrStale) when a higher token, or
	// the same token of another owner, is stored.
	FenceOnAcquire(ctx context.Context, f Fence) error
}

type ctxKey struct{}

// NewContext returns ctx carrying f. Worker pools put each attempt's fence
// in the handler's context.
func NewContext(ctx context.Context, f Fence) context.Context {
	return context.WithValue(ctx, ctxKey{}, f)
}

// FromContext returns the fence carried by ctx.
func FromContext(ctx context.Context) (Fence, bool) {
	f, ok := ctx.Value(ctxKey{}).(Fence)
	return f, ok
}
