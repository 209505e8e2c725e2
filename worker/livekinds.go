package worker

import (
	"context"
	"sync"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
)

// liveKinds caches which kinds the live pools run on which queues, read
// from their heartbeats at most once per heartbeat interval. Only a job past
// its pool's UnknownKindDefers asks it, so the claim path reads nothing.
type liveKinds struct {
	mu   sync.Mutex
	at   time.Time
	runs map[queueKind]bool
}

type queueKind struct{ queue, kind string }

// servedElsewhere reports whether a live pool serving logical queue q runs
// kind (this pool, which does not, never counts). A failed read answers
// true: a job is not declared dead on a read Redis did not answer.
func (p *Pool) servedElsewhere(ctx context.Context, q, kind string) bool {
	lk := &p.liveKinds
	lk.mu.Lock()
	defer lk.mu.Unlock()
	if lk.runs == nil || time.Since(lk.at) >= registerEvery {
		pools, err := p.ledger.Pools(ctx)
		if err != nil {
			p.log.Warn("reading the live pools' kinds failed; job of a kind this pool has no worker for put back", "queue", q, "kind", kind, "error", err)
			return true
		}
		lk.runs = map[queueKind]bool{}
		for _, pi := range pools {
			if pi.ID == p.cfg.WorkerID {
				continue
			}
			for k := range pi.Kinds {
				for qn := range pi.Queues {
					lk.runs[queueKind{qn, k}] = true
				}
			}
		}
		lk.at = time.Now()
	}
	return lk.runs[queueKind{ledger.Logical(q), kind}]
}
