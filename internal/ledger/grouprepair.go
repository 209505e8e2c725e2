package ledger

import (
	"context"
	_ "embed"
)

//go:embed lua/group_repair.lua
var groupRepairSrc string

var groupRepairScript = script("group_repair", groupRepairSrc)

// groupRepairCount is how many groups one group_repair.lua call scans.
const groupRepairCount = 500

// RepairGroups gives every fair group of queue q a head in the due index
// and returns how many it repaired: a group whose head's record or
// due-index entry was lost (an eviction, a deleted key, a ledger that went
// back) would otherwise not run until its next enqueue. A head still
// pending returns to the due index; otherwise the group's next job becomes
// its head. A head whose due-index entry is scored more than a year ahead
// of its due time (edited by hand: +inf, 1e300) is put back at its due time
// (its run_at when sane, else now), logged at warning level with its id; a
// head scheduled that far ahead is left as it is. It scans the whole groups
// hash, a bounded slice per call.
func (l *Ledger) RepairGroups(ctx context.Context, q string) (int64, error) {
	keys := l.layoutOf(q).keys
	cursor, fixed := "0", int64(0)
	for {
		v, err := groupRepairScript.Run(ctx, l.rdb, keys, l.prefix(q), cursor, groupRepairCount).Result()
		r := newReply("group repair", v, err)
		if err := r.need(2); err != nil {
			return fixed, wrap("group repair", err)
		}
		cursor = r.str(0)
		fixed += r.int(1)
		for i := 2; i < r.len(); i++ {
			if id := r.str(i); r.err == nil {
				l.cfg.Logger.Warn("a fair group's head was scored more than a year past its due time in the due index (edited by hand?), holding up its group; put back at its due time",
					"queue", q, "job_id", id)
			}
		}
		if r.err != nil {
			return fixed, wrap("group repair", r.err)
		}
		if cursor == "0" || ctx.Err() != nil {
			return fixed, ctx.Err()
		}
	}
}
