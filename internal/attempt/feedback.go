package attempt

import (
	"errors"
	"time"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/internal/epoch"
	"github.com/fencedq/fencedq/lease"
)

// StorageMark returns the mark a storage refusal of f carries: the token
// storage holds for f's resource, when err is (or wraps) a
// *fence.StaleError refusing f's own token with a higher stored token.
// Such a token is one the lease counter or the ledger no longer knows (a
// failover lost it), and the next token for the resource must be minted
// above it: the caller raises the counter (lease.Manager.Raise for a
// resource lease, ledger.Ledger.StorageRefused for a job's own token). A refusal
// of another fence (a handler writing with a fence of its own), or one by
// a mark at or below f's token (the same token of another owner), says
// nothing about f's counter.
func StorageMark(err error, f fence.Fence) (lease.Token, bool) {
	var stale *fence.StaleError
	if !errors.As(err, &stale) {
		return 0, false
	}
	if stale.Fence.Resource != f.Resource || stale.Fence.Token != f.Token || stale.StoredToken <= f.Token {
		return 0, false
	}
	return stale.StoredToken, true
}

// MaxMarkAhead is how far past the pool's clock the time part of a storage
// mark may be: epoch.MaxAhead, the bound of every token a counter mints.
const MaxMarkAhead = epoch.MaxAhead

// PlausibleMark reports whether storage mark may raise the counter of
// token at now: a mark at or below token, or one whose time part is at most
// MaxMarkAhead past now. Every token a fencedq counter mints is so, in
// any epoch (a mark many epochs ahead, after failovers that lost the
// epoch record, is fed back as before). A mark whose time part lies
// further ahead (near 2^64, say) is a buggy or hostile storage's: raised to
// it, the counter could mint no more tokens and the resource could never
// be acquired again.
func PlausibleMark(mark, token lease.Token, now time.Time) bool {
	if mark <= token {
		return true
	}
	return epoch.Plausible(uint64(mark), now)
}
