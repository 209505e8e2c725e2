package ledger

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/lease"
)

// bridgeWait is the pending score of a bridged job put back to pending
// (BRIDGE_WAIT in prelude.lua).
const bridgeWait = "253402300799999"

// Undelivered is a bridged job that waits for a delivery by its own queue:
// pending (a retry or a re-run), running (an attempt that may have ended
// without a commit) or uncertain (to be reconciled at its next delivery).
type Undelivered struct {
	ID      string
	Kind    string
	State   State
	Token   lease.Token
	Payload []byte
	// MaxRetries is the job's retry limit; Timeout its handler's (0: none).
	MaxRetries int
	Timeout    time.Duration
	// Bridge names the delivering queue ("asynq").
	Bridge string
	// TaskQueue and TaskID name the task that delivered the job last in
	// its own queue (Delivery.TaskQueue, Delivery.TaskID); empty for a job
	// claimed before they were recorded.
	TaskQueue, TaskID string
	// Headers are the headers of the job's first delivering task
	// (Delivery.Headers), for the task that replaces a lost one; nil: none.
	Headers map[string]string
}

// Undelivered returns bridged jobs of queue q in the states pending,
// running (earliest lease deadline first) and uncertain: the jobs whose progress depends on their own queue delivering
// them again. It looks at up to limit jobs of each state from the offset-th
// on; more is true when a state may hold more jobs after them (call again
// with offset + limit to see them).
func (l *Ledger) Undelivered(ctx context.Context, q string, offset, limit int) (us []Undelivered, more bool, err error) {
	if err := ValidateQueueRef(q); err != nil {
		return nil, false, err
	}
	if limit <= 0 {
		return nil, false, nil
	}
	off, n := int64(max(offset, 0)), int64(limit)
	pipe := l.rdb.Pipeline()
	lists := []*redis.StringSliceCmd{
		pipe.ZRangeArgs(ctx, redis.ZRangeArgs{Key: l.StateKey(q, Pending), ByScore: true, Start: bridgeWait, Stop: "+inf", Offset: off, Count: n}),
		pipe.ZRange(ctx, l.StateKey(q, Running), off, off+n-1),
		pipe.ZRange(ctx, l.StateKey(q, Uncertain), off, off+n-1),
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, false, wrap("undelivered", err)
	}
	var ids []string
	for _, c := range lists {
		ids = append(ids, c.Val()...)
		more = more || len(c.Val()) == limit
	}
	if len(ids) == 0 {
		return nil, false, nil
	}
	pipe = l.rdb.Pipeline()
	fields := make([]*redis.SliceCmd, len(ids))
	for i, id := range ids {
		fields[i] = pipe.HMGet(ctx, l.JobKey(q, id), "state", "token", "bridge", "kind", "payload", "max_retries",
			"bridge_queue", "bridge_task", "timeout_ms", "headers")
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, false, wrap("undelivered", err)
	}
	out := make([]Undelivered, 0, len(ids))
	for i, id := range ids {
		v := fields[i].Val()
		str := func(j int) string { s, _ := v[j].(string); return s }
		if len(v) != 10 || str(2) == "" {
			continue // a native job, or gone
		}
		out = append(out, Undelivered{
			ID: id, State: State(str(0)), Token: token(str(1)), Bridge: str(2), Kind: str(3), Payload: []byte(str(4)),
			MaxRetries: atoi(str(5)), TaskQueue: str(6), TaskID: str(7),
			Timeout: time.Duration(atoi(str(8))) * time.Millisecond, Headers: decodeHeaders(str(9)),
		})
	}
	return out, more, nil
}

// Redeliver records that bridged job u (as Undelivered returned it) is
// delivered again by a new task in its own queue taskQueue, because the
// task that delivered it last is gone or finished there. It returns the
// new task's id (stem~n, n counting the job's redeliveries), which the
// caller then enqueues; ok is false, and nothing is written, when the job
// is no longer in u's state under u's token with u's task recorded, or is
// running under a live lease, so of concurrent callers that saw the same
// job only one delivers it. The job's history and the queue's events say so, and the 'redelivered'
// counter counts it.
func (l *Ledger) Redeliver(ctx context.Context, q string, u Undelivered, taskQueue, stem string) (task string, ok bool, err error) {
	if err := ValidateQueueRef(q); err != nil {
		return "", false, err
	}
	tok := ""
	if u.Token != 0 {
		tok = u.Token.String()
	}
	v, err := l.run(ctx, l.lanes.other, bridgeRedeliverScript, q, u.ID, string(u.State), tok, u.TaskID, taskQueue, stem).Result()
	r := newReply("bridge redeliver", v, err)
	if err := r.need(2); err != nil {
		return "", false, wrap("redeliver "+u.ID, err)
	}
	if r.int(0) != 1 {
		return "", false, nil
	}
	return r.str(1), true, wrap("redeliver "+u.ID, r.err)
}
