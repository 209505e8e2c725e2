package ledger

import (
	"context"
	_ "embed"
)

//go:embed lua/due_repair.lua
var dueRepairSrc string

var dueRepairScript = script("due_repair", dueRepairSrc)

// dueRepairCount is how many far-ahead entries one due_repair.lua call reads.
const dueRepairCount = 500

// dueFarAheadMS is how far past now a due-index entry may be scored before
// it is taken as edited by hand: beyond jobs.MaxDelay (100 years), the
// furthest due time a write makes (a RunAt, a retry put off, a deferral).
const dueFarAheadMS = 101 * 366 * 86400000

// RepairDue puts back the entries of queue q's due index scored beyond any
// due time a write makes (more than 101 x 366 days ahead: edited by hand,
// +inf, 1e300), which no claim would ever reach, and returns how many it
// put back: a pending job's entry goes back to its run_at when sane (else
// now), a bridged pending job's to its wait for its queue's next delivery,
// an entry whose record is in another state or gone to now, for the claim
// to drop. Each is logged at warning level with its id. A job scheduled
// far ahead (jobs.RunAt, a retry put off up to jobs.MaxDelay), a bridged
// job waiting for its next delivery and a fair group's head (left to
// RepairGroups) keep their entries.
func (l *Ledger) RepairDue(ctx context.Context, q string) (int64, error) {
	keys := l.layoutOf(q).keys
	var fixed int64
	for {
		v, err := dueRepairScript.Run(ctx, l.rdb, keys, l.prefix(q), dueRepairCount).Result()
		r := newReply("due repair", v, err)
		if err := r.need(1); err != nil {
			return fixed, wrap("due repair", err)
		}
		read := r.int(0)
		moved := int64(0)
		for i := 1; i < r.len(); i++ {
			if id := r.str(i); r.err == nil {
				moved++
				l.cfg.Logger.Warn("a due-index entry was scored beyond any due time (edited by hand?), so no claim would reach its job; put back at its due time",
					"queue", q, "job_id", id)
			}
		}
		if r.err != nil {
			return fixed, wrap("due repair", r.err)
		}
		fixed += moved
		// the entries put back leave the top of the range; read again only
		// while a full read moved some, as legitimate ones stay
		if moved == 0 || read < dueRepairCount || ctx.Err() != nil {
			return fixed, ctx.Err()
		}
	}
}
