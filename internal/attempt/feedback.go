package attempt

import (
	"errors"

	"github.com/fencedq/fencedq/fence"
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
