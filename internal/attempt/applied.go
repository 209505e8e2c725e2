package attempt

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/internal/ledger"
)

// appliedByTimeout bounds the lookup of NameApplier.
const appliedByTimeout = 2 * time.Second

// NameApplier makes o's reason name the job and queue that applied the
// effect, when the handler of job id of queue q ended with a
// fence.AlreadyAppliedError whose record comes from another fence (Decide
// then says only "effect already applied by another holder"). An operation id
// names one effect across a store, but the ledger deduplicates it per
// queue, so the same operation id enqueued on two queues makes two jobs
// and the second succeeds without its own effect: its record and history
// then say which job made it. The applier is the job of the namespace
// that carries the same operation id in any queue and whose id ends the
// record's owner ("<worker id>/<job id>", the owner pools and the bridge
// give fences); this job's own earlier attempt is named as such. When the
// ledger holds no such job (past its retention, another namespace, a
// writer outside fencedq) or cannot be read, o is returned unchanged.
func NameApplier(ctx context.Context, l *ledger.Ledger, q, id string, err error, o ledger.Outcome) ledger.Outcome {
	var ae *fence.AlreadyAppliedError
	if !errors.As(err, &ae) || !ae.Elsewhere() || ae.Record.OperationID == "" {
		return o
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), appliedByTimeout)
	defer cancel()
	rec := ae.Record
	what := fmt.Sprintf("token %d on %s", rec.Token, rec.Resource) // not the owner: with the token it authorises writes
	if byq, byid, ok := applier(ctx, l, rec.OperationID, rec.Owner); ok {
		if byq == q && byid == id {
			o.Reason = "effect already applied by an earlier attempt of this job (" + what + ")"
		} else {
			o.Reason = fmt.Sprintf("effect already applied by job %s in queue %s (%s)", byid, byq, what)
		}
	}
	return o
}

// applier finds the job of l that carries operation id op (as its
// operation id, or as its id when it has none) in any known queue and
// whose id ends owner.
func applier(ctx context.Context, l *ledger.Ledger, op, owner string) (q, id string, ok bool) {
	qs, err := l.Queues(ctx)
	if err != nil || len(qs) == 0 {
		return "", "", false
	}
	pipe := l.Redis().Pipeline()
	byOp := make([]*redis.StringCmd, len(qs))
	asID := make([]*redis.IntCmd, len(qs))
	byName := make([]*redis.IntCmd, len(qs)) // a job whose id names op (ledger.OpJobID)
	for i, q := range qs {
		byOp[i] = pipe.Get(ctx, l.OperationKey(q, op))
		asID[i] = pipe.Exists(ctx, l.JobKey(q, op))
		if named := ledger.OpJobID(q, op); named != "" {
			byName[i] = pipe.Exists(ctx, l.JobKey(q, named))
		}
	}
	_, _ = pipe.Exec(ctx)
	for i, q := range qs {
		if named := ledger.OpJobID(q, op); named != "" && strings.HasSuffix(owner, "/"+named) {
			if n, err := byName[i].Result(); err == nil && n == 1 {
				return q, named, true
			}
		}
		if jid, err := byOp[i].Result(); err == nil && strings.HasSuffix(owner, "/"+jid) {
			return q, jid, true
		}
		if n, err := asID[i].Result(); err == nil && n == 1 && strings.HasSuffix(owner, "/"+op) {
			return q, op, true
		}
	}
	return "", "", false
}
