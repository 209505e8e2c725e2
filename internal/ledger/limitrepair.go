package ledger

import (
	"context"
	_ "embed"
)

//go:embed lua/limit_repair.lua
var limitRepairSrc string

var limitRepairScript = script("limit_repair", limitRepairSrc)

// limitRepairCount is how many limit keys one limit_repair.lua call scans.
const limitRepairCount = 500

// RepairLimits ends the concurrency-limit permits of queue q whose holder
// was lost (its record gone or no longer a running job of the key: an
// eviction, a deleted key), and the promises to jobs no longer due, and
// returns how many it ended: such a permit would otherwise never be
// released, and the key's parked jobs never run (a lost promise, on a key
// some job always holds, would take one of its permits for ever).
// The key's parked jobs the freed permits admit are woken. It scans the
// keys with parked jobs (the limits hash), a bounded slice per call.
func (l *Ledger) RepairLimits(ctx context.Context, q string) (int64, error) {
	keys := l.layoutOf(q).keys
	cursor, fixed := "0", int64(0)
	for {
		v, err := limitRepairScript.Run(ctx, l.rdb, keys, l.prefix(q), cursor, limitRepairCount).Result()
		r := newReply("limit repair", v, err)
		if err := r.need(2); err != nil {
			return fixed, wrap("limit repair", err)
		}
		cursor = r.str(0)
		fixed += r.int(1)
		if r.err != nil {
			return fixed, wrap("limit repair", r.err)
		}
		if cursor == "0" || ctx.Err() != nil {
			return fixed, ctx.Err()
		}
	}
}
