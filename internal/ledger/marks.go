package ledger

import (
	"context"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Marks returns a change mark for each of queues, in one pipelined round
// trip of plain reads: the queue's write sequence with its history and
// tenure (see rewind.go). Every script call that changes a queue's jobs
// raises the sequence, so a queue whose mark did not move between two reads
// has the same job counts, except for what no script call does: Prune (the
// caller that prunes knows), and index entries of expired records a listing
// drops or keys written by hand (a full read now and then catches those).
// A lost or rewound record gives another mark. A queue whose read failed
// gets "", which equals no mark a read returns.
func (l *Ledger) Marks(ctx context.Context, queues []string) ([]string, error) {
	if len(queues) == 0 {
		return nil, nil
	}
	pipe := l.rdb.Pipeline()
	cmds := make([]*redis.SliceCmd, len(queues))
	for i, q := range queues {
		cmds[i] = pipe.HMGet(ctx, l.prefix(q)+"stats", "seq", seqHistField, seqTenureField)
	}
	_, _ = pipe.Exec(ctx) // read per command below
	out := make([]string, len(queues))
	var first error
	ok := false
	for i, c := range cmds {
		vs, err := c.Result()
		if err != nil {
			if first == nil {
				first = wrap("marks of "+queues[i], err)
			}
			continue
		}
		ok = true
		var b strings.Builder
		b.WriteByte('m')
		for _, v := range vs {
			s, _ := v.(string)
			b.WriteByte('|')
			b.WriteString(s)
		}
		out[i] = b.String()
	}
	if !ok {
		return nil, first // every queue failed: the connection, most likely
	}
	return out, nil
}
