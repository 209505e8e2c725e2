package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/lease"
)

// Record is a job as the ledger stores it. Args holds the arguments with
// sensitive fields redacted; the raw payload is never part of a Record's
// JSON form.
type Record struct {
	ID             string          `json:"id"`
	Kind           string          `json:"kind"`
	Queue          string          `json:"queue"`
	OperationID    string          `json:"operation_id"`
	Resource       string          `json:"resource"`
	State          State           `json:"state"`
	Token          lease.Token     `json:"token,string"`
	Owner          string          `json:"owner,omitempty"`
	Deadline       time.Time       `json:"deadline,omitzero"`
	Attempts       int             `json:"attempts"`
	MaxRetries     int             `json:"max_retries"`
	Runs           int             `json:"runs"`
	ReconcileTries int             `json:"reconcile_tries"`
	Timeout        time.Duration   `json:"timeout_ns,omitempty"`
	Args           json.RawMessage `json:"args"`
	Error          string          `json:"error,omitempty"`
	Reason         string          `json:"reason,omitempty"`
	Task           string          `json:"task"`
	Created        time.Time       `json:"created"`
	Updated        time.Time       `json:"updated,omitzero"`
	RunAt          time.Time       `json:"run_at,omitzero"`
	Started        time.Time       `json:"started,omitzero"`
	Finished       time.Time       `json:"finished,omitzero"`
	UncertainSince time.Time       `json:"uncertain_since,omitzero"`

	// Payload is the raw JSON args, sensitive fields included. Never show it.
	Payload []byte `json:"-"`
}

// LeaseResource returns the resource the job's attempts lease.
func (r *Record) LeaseResource() string {
	if r.Resource != "" {
		return r.Resource
	}
	return "job:" + r.ID
}

func msTime(s string) time.Time {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v)
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

func recordFrom(h map[string]string) *Record {
	tok, _ := strconv.ParseUint(h["token"], 10, 64)
	args := json.RawMessage(h["args"])
	if len(args) == 0 {
		args = json.RawMessage("null")
	}
	return &Record{
		ID: h["id"], Kind: h["kind"], Queue: h["queue"], OperationID: h["op"], Resource: h["resource"],
		State: State(h["state"]), Token: lease.Token(tok), Owner: h["owner"], Deadline: msTime(h["deadline"]),
		Attempts: atoi(h["attempts"]), MaxRetries: atoi(h["max_retries"]), Runs: atoi(h["runs"]),
		ReconcileTries: atoi(h["reconcile_tries"]), Timeout: time.Duration(atoi(h["timeout_ms"])) * time.Millisecond,
		Args: args, Error: h["error"], Reason: h["reason"], Task: h["task"],
		Created: msTime(h["created"]), Updated: msTime(h["updated"]), RunAt: msTime(h["run_at"]),
		Started: msTime(h["started"]), Finished: msTime(h["finished"]), UncertainSince: msTime(h["uncertain_since"]),
		Payload: []byte(h["payload"]),
	}
}

// Get returns job id of queue q, or ErrNotFound.
func (l *Ledger) Get(ctx context.Context, q, id string) (*Record, error) {
	h, err := l.rdb.HGetAll(ctx, l.JobKey(q, id)).Result()
	if err != nil {
		return nil, fmt.Errorf("jobs: get %s: %w", id, err)
	}
	if len(h) == 0 {
		return nil, fmt.Errorf("%w: %s in queue %s", ErrNotFound, id, q)
	}
	return recordFrom(h), nil
}

// Find looks a job up by id in every known queue.
func (l *Ledger) Find(ctx context.Context, id string) (*Record, error) {
	qs, err := l.Queues(ctx)
	if err != nil {
		return nil, err
	}
	for _, q := range qs {
		r, err := l.Get(ctx, q, id)
		if err == nil {
			return r, nil
		}
		if !errors.Is(err, ErrNotFound) {
			return nil, err
		}
	}
	return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
}

// FindByOperation returns the job owning operation id op in any known queue.
func (l *Ledger) FindByOperation(ctx context.Context, op string) (*Record, error) {
	qs, err := l.Queues(ctx)
	if err != nil {
		return nil, err
	}
	for _, q := range qs {
		id, err := l.rdb.Get(ctx, l.opKey(q, op)).Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("jobs: find operation: %w", err)
		}
		return l.Get(ctx, q, id)
	}
	return nil, fmt.Errorf("%w: operation %s", ErrNotFound, op)
}

// Entry is one line of a job's history.
type Entry struct {
	Event    string    `json:"event"` // enqueued, attempt, end, fenced, deduplicated, resolve
	At       time.Time `json:"at"`
	Attempt  int       `json:"attempt,omitempty"`
	Token    string    `json:"token,omitempty"`
	Owner    string    `json:"owner,omitempty"`
	Outcome  string    `json:"outcome,omitempty"`
	Error    string    `json:"error,omitempty"`
	Reason   string    `json:"reason,omitempty"`
	Stage    string    `json:"stage,omitempty"`
	Task     string    `json:"task,omitempty"`
	From     string    `json:"from,omitempty"`
	Decision string    `json:"decision,omitempty"`
	Actor    string    `json:"actor,omitempty"`
	Note     string    `json:"note,omitempty"`
	Current  string    `json:"current,omitempty"`
	Job      string    `json:"job,omitempty"`
	Op       string    `json:"op,omitempty"`
	Type     string    `json:"type,omitempty"`
}

func decodeEntry(s string) Entry {
	var raw map[string]any
	_ = json.Unmarshal([]byte(s), &raw)
	get := func(k string) string {
		switch v := raw[k].(type) {
		case string:
			return v
		case float64:
			return strconv.FormatFloat(v, 'f', -1, 64)
		}
		return ""
	}
	return Entry{
		Event: get("event"), At: msTime(get("at")), Attempt: atoi(get("attempt")), Token: get("token"),
		Owner: get("owner"), Outcome: get("outcome"), Error: get("error"), Reason: get("reason"),
		Stage: get("stage"), Task: get("task"), From: get("from"), Decision: get("decision"),
		Actor: get("actor"), Note: get("note"), Current: get("current"), Job: get("job"), Op: get("op"),
		Type: get("type"),
	}
}

// History returns job id's history, oldest first.
func (l *Ledger) History(ctx context.Context, q, id string) ([]Entry, error) {
	items, err := l.rdb.LRange(ctx, l.JobKey(q, id)+":history", 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("jobs: history %s: %w", id, err)
	}
	out := make([]Entry, len(items))
	for i, s := range items {
		out[i] = decodeEntry(s)
	}
	return out, nil
}

// Events returns queue q's most recent fenced rejections and deduplications,
// newest first.
func (l *Ledger) Events(ctx context.Context, q string, n int) ([]Entry, error) {
	items, err := l.rdb.LRange(ctx, l.prefix(q)+"events", 0, int64(n)-1).Result()
	if err != nil {
		return nil, fmt.Errorf("jobs: events: %w", err)
	}
	out := make([]Entry, len(items))
	for i, s := range items {
		out[i] = decodeEntry(s)
	}
	return out, nil
}

// Queues returns the known queue names, sorted.
func (l *Ledger) Queues(ctx context.Context) ([]string, error) {
	qs, err := l.rdb.SMembers(ctx, l.QueuesKey()).Result()
	if err != nil {
		return nil, fmt.Errorf("jobs: queues: %w", err)
	}
	sort.Strings(qs)
	return qs, nil
}

// IDs returns up to limit job ids in state s of queue q, from offset, in
// index order (running: by lease deadline; others: by time entered).
func (l *Ledger) IDs(ctx context.Context, q string, s State, offset, limit int) ([]string, error) {
	if !s.Valid() {
		return nil, invalid("unknown state %q", s)
	}
	ids, err := l.rdb.ZRange(ctx, l.StateKey(q, s), int64(offset), int64(offset+limit-1)).Result()
	if err != nil {
		return nil, fmt.Errorf("jobs: list %s: %w", s, err)
	}
	return ids, nil
}

// DueIDs returns up to limit ids in state s whose index score (running:
// lease deadline; uncertain: next reconcile time) is at or before t.
func (l *Ledger) DueIDs(ctx context.Context, q string, s State, t time.Time, limit int) ([]string, error) {
	return l.rdb.ZRangeArgs(ctx, redis.ZRangeArgs{
		Key: l.StateKey(q, s), ByScore: true, Start: "-inf", Stop: strconv.FormatInt(t.UnixMilli(), 10),
		Count: int64(limit),
	}).Result()
}

// List returns up to limit jobs in state s of queue q, from offset. Ids
// whose job expired after retention are pruned from the index.
func (l *Ledger) List(ctx context.Context, q string, s State, offset, limit int) ([]*Record, error) {
	ids, err := l.IDs(ctx, q, s, offset, limit)
	if err != nil {
		return nil, err
	}
	pipe := l.rdb.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	for i, id := range ids {
		cmds[i] = pipe.HGetAll(ctx, l.JobKey(q, id))
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("jobs: list %s: %w", s, err)
	}
	out := make([]*Record, 0, len(ids))
	for i, c := range cmds {
		h := c.Val()
		if len(h) == 0 {
			l.rdb.ZRem(ctx, l.StateKey(q, s), ids[i])
			continue
		}
		out = append(out, recordFrom(h))
	}
	return out, nil
}

// Counts returns the number of jobs per state in queue q.
func (l *Ledger) Counts(ctx context.Context, q string) (map[State]int64, error) {
	pipe := l.rdb.Pipeline()
	cmds := map[State]*redis.IntCmd{}
	for _, s := range States {
		cmds[s] = pipe.ZCard(ctx, l.StateKey(q, s))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("jobs: counts: %w", err)
	}
	out := map[State]int64{}
	for s, c := range cmds {
		out[s] = c.Val()
	}
	return out, nil
}

// Stats returns queue q's counters: enqueued, attempted, succeeded, dead,
// retried, uncertain, deduplicated_enqueue, deduplicated_execute,
// fenced_commit, fenced_renew, fenced_claim, resolved_<decision>.
func (l *Ledger) Stats(ctx context.Context, q string) (map[string]int64, error) {
	h, err := l.rdb.HGetAll(ctx, l.prefix(q)+"stats").Result()
	if err != nil {
		return nil, fmt.Errorf("jobs: stats: %w", err)
	}
	out := make(map[string]int64, len(h))
	for k, v := range h {
		out[k], _ = strconv.ParseInt(v, 10, 64)
	}
	return out, nil
}

// Prune drops ids of finished jobs that expired after retention from the
// succeeded and dead indexes, and returns how many it removed.
func (l *Ledger) Prune(ctx context.Context, q string, now time.Time) (int64, error) {
	cut := strconv.FormatInt(now.Add(-l.cfg.Retention).UnixMilli(), 10)
	var n int64
	for _, s := range []State{Succeeded, Dead} {
		removed, err := l.rdb.ZRemRangeByScore(ctx, l.StateKey(q, s), "-inf", "("+cut).Result()
		if err != nil {
			return n, fmt.Errorf("jobs: prune: %w", err)
		}
		n += removed
	}
	return n, nil
}

// ServerTime returns the Redis server's clock, the clock every ledger
// deadline uses.
func (l *Ledger) ServerTime(ctx context.Context) (time.Time, error) {
	return l.rdb.Time(ctx).Result()
}
