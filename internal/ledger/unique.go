package ledger

import (
	"context"
	"strings"
	"time"

	"github.com/fencedq/fencedq/internal/luafunc"
)

// Unique makes a job unique within its queue (enqueue_unique.lua): while a
// job holding the same key is in one of its unique states, enqueueing
// another returns that job, deduplicated, and writes nothing.
type Unique struct {
	// Digest identifies the kind and the chosen args (hex).
	Digest string
	// Period, when set, scopes the key to the period of the namespace's
	// time (epoch_now) the enqueue falls in (whole milliseconds).
	Period time.Duration
	// States are the states in which the job holds its key.
	States []State
	// Age, for a re-submission, is the time since the job's first
	// enqueue: its key stays in that enqueue's period.
	Age time.Duration
}

// args are enqueue_unique.lua's four per-job values after enqueue.lua's
// (a nil u: not unique).
func (u *Unique) args() []any {
	if u == nil {
		return []any{"", 0, "", 0}
	}
	s := make([]string, len(u.States))
	for i, st := range u.States {
		s[i] = string(st)
	}
	return []any{u.Digest, u.Period.Milliseconds(), strings.Join(s, ","), u.Age.Milliseconds()}
}

// uniqueKeys returns the KEYS of the unique scripts of queue q: the ledger
// layout, then the queue's unique index.
func (l *Ledger) uniqueKeys(q string) []string {
	return append(l.keys(q), l.uniqueKey(q))
}

// uniquePruneCount is how many entries one unique_prune.lua call scans.
const uniquePruneCount = 500

// PruneUnique removes released entries from queue q's unique index (their
// job gone, out of its unique states, or their period over) and returns how
// many it removed. Enqueues treat such entries as free already; pruning
// bounds the index. It scans the whole index, a bounded slice per call.
func (l *Ledger) PruneUnique(ctx context.Context, q string) (int64, error) {
	keys := l.uniqueKeys(q)
	cursor, removed := "0", int64(0)
	for {
		v, err := uniquePruneScript.Run(ctx, l.rdb, keys, l.prefix(q), cursor, uniquePruneCount).Result()
		r := newReply("unique prune", v, err)
		if err := r.need(2); err != nil {
			return removed, wrap("unique prune", err)
		}
		cursor = r.str(0)
		removed += r.int(1)
		if r.err != nil {
			return removed, wrap("unique prune", r.err)
		}
		if cursor == "0" || ctx.Err() != nil {
			return removed, ctx.Err()
		}
	}
}

// enqueueCall returns the enqueue script and the KEYS for a call of
// queue q carrying unique jobs (u) or not.
func (l *Ledger) enqueueCall(q string, u bool) (*luafunc.Script, []string) {
	if u {
		return enqueueUniqueScript, l.uniqueKeys(q)
	}
	return enqueueScript, l.layoutOf(q).keys
}
