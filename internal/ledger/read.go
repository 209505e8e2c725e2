package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/epoch"
	"github.com/fencedq/fencedq/internal/luafunc"
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
	Fence          lease.Token     `json:"fence,string,omitempty"` // the resource lease's token of the last attempt, when it leased a named resource
	Owner          string          `json:"-"`                      // the last attempt's worker id; never encoded: beside Token (or Fence: its lease owner is "<owner>/<id>"), the attempt's credential
	Deadline       time.Time       `json:"deadline,omitzero"`
	Attempts       int             `json:"attempts"`
	MaxRetries     int             `json:"max_retries"`
	Runs           int             `json:"runs"`
	ReconcileTries int             `json:"reconcile_tries"`
	KindDefers     int             `json:"kind_defers,omitempty"` // times put back because no pool knew the kind
	Timeout        time.Duration   `json:"timeout_ns,omitempty"`
	Args           json.RawMessage `json:"args"`
	Error          string          `json:"error,omitempty"`
	Reason         string          `json:"reason,omitempty"`
	CancelledBy    string          `json:"cancel_requested_by,omitempty"`
	Created        time.Time       `json:"created"`
	Updated        time.Time       `json:"updated,omitzero"`
	// RunAt is when the job was due to run: as enqueued (or made due by a
	// run-now); Get of a pending job gives its retry's, put-back's or rate
	// deferral's due time when later (lists carry the due time as their
	// index time).
	RunAt          time.Time `json:"run_at,omitzero"`
	Started        time.Time `json:"started,omitzero"`
	Finished       time.Time `json:"finished,omitzero"`
	UncertainSince time.Time `json:"uncertain_since,omitzero"`
	Bridge         string    `json:"bridge,omitempty"` // the queue that delivers a bridged job ("asynq"); "" for native jobs
	// Headers are the job's headers, given at enqueue (trace context, a
	// tenant id): shown as they are, never redacted.
	Headers map[string]string `json:"headers,omitempty"`
	// UniqueKey is a unique job's key in its queue's unique index (a digest
	// of its kind and chosen args, with its period when it has one), or
	// Redacted when the job's args had values redacted (a digest over them
	// could be matched against guesses); UniqueStates the states in which
	// it holds it. Both are empty for other jobs.
	UniqueKey    string  `json:"unique_key,omitempty"`
	UniqueStates []State `json:"unique_states,omitempty"`
	// Progress is the latest progress an attempt reported (jobs.Progress),
	// nil when none did. It stays after the attempt ended.
	Progress *Progress `json:"progress,omitempty"`
	// Output is what the successful attempt recorded (jobs.RecordOutput),
	// sensitive fields redacted; nil when none.
	Output json.RawMessage `json:"output,omitempty"`
	// Workflow, WorkflowHome and Step name the workflow a step belongs to
	// (its id, the queue holding its record) and the step's name; empty for
	// plain jobs.
	Workflow     string `json:"workflow,omitempty"`
	WorkflowHome string `json:"workflow_home,omitempty"`
	Step         string `json:"step,omitempty"`
	// Flow control (jobs.Limiter, jobs.RateLimiter): the job's concurrency
	// limit and rate limit ("" keys: none), and, while a pending job is held
	// back by one, what it waits for ("limit export:cust-42, 5 of 5 held",
	// "rate provider:api, next start at ..." until that start, when the job is
	// due), filled by Get.
	LimitKey   string        `json:"limit_key,omitempty"`
	LimitMax   int           `json:"limit_max,omitempty"`
	RateKey    string        `json:"rate_key,omitempty"`
	RateMax    int           `json:"rate_max,omitempty"`
	RatePer    time.Duration `json:"rate_per_ns,omitempty"`
	WaitingFor string        `json:"waiting_for,omitempty"`
	// Group is the job's fair group (jobs.Group; "" = none). WaitingFor
	// says, for a pending job waiting its group's turn, how many of its
	// group's jobs are ahead ("group acme, 3 ahead").
	Group string `json:"group,omitempty"`

	// Payload is the raw JSON args, sensitive fields included. Never show it.
	Payload []byte `json:"-"`
}

// LeaseResource returns the resource the job's attempts lease.
func (r *Record) LeaseResource() string { return LeaseResource(r.ID, r.Resource) }

// LeaseResource returns the resource an attempt of job id leases: the
// resource its args name, else the job itself.
func LeaseResource(id, resource string) string {
	if resource != "" {
		return resource
	}
	return JobResourcePrefix + id
}

// maxMS is the last millisecond of year 9999: later times do not encode
// as JSON, so a corrupt one reads as zero.
const maxMS = 253402300799999

func msTime(s string) time.Time {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v <= 0 || v > maxMS {
		return time.Time{}
	}
	return time.UnixMilli(v)
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

func token(s string) lease.Token { t, _ := strconv.ParseUint(s, 10, 64); return lease.Token(t) }

// Redacted replaces every sensitive value wherever a job is shown.
const Redacted = "[redacted]"

// redactedJSON is Redacted as a JSON value: the shown args hold it where
// a value was redacted.
const redactedJSON = `"` + Redacted + `"`

// shownUniqueKey is the unique key ukey as a job whose shown args are
// args shows it: Redacted when a value of its args was redacted, since the
// key may be a digest of that value.
func shownUniqueKey(ukey, args string) string {
	if ukey != "" && strings.Contains(args, redactedJSON) {
		return Redacted
	}
	return ukey
}

// Shown returns text, which may quote what the job's args methods built
// from its args (its resource, limit or rate key, group, and so what it
// waits for), with each value its shown args redacted (a string or
// number of at least 3 bytes, as in jobs.RedactText) replaced by
// Redacted; all of text when its raw args no longer decode. Text of a
// job whose args had nothing redacted is returned as it is.
func (r *Record) Shown(text string) string {
	if text == "" || !strings.Contains(string(r.Args), redactedJSON) {
		return text
	}
	full, err1 := decodeJSON(r.Payload)
	shown, err2 := decodeJSON(r.Args)
	if err1 != nil || err2 != nil {
		return Redacted
	}
	var hidden []string
	hiddenLeaves(full, shown, &hidden)
	sort.Slice(hidden, func(i, j int) bool { // the longest first: a value holding another is replaced whole
		return len(hidden[i]) > len(hidden[j]) || len(hidden[i]) == len(hidden[j]) && hidden[i] < hidden[j]
	})
	pairs := make([]string, 0, 2*len(hidden))
	for _, h := range hidden {
		pairs = append(pairs, h, Redacted)
	}
	return strings.NewReplacer(pairs...).Replace(text)
}

func decodeJSON(raw []byte) (any, error) {
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	var tree any
	err := dec.Decode(&tree)
	return tree, err
}

// hiddenLeaves adds to out the strings and numbers (3 bytes or longer) of
// full, the raw args, where shown, the shown args, holds Redacted.
func hiddenLeaves(full, shown any, out *[]string) {
	if s, ok := shown.(string); ok && s == Redacted {
		leavesOf(full, out)
		return
	}
	switch f := full.(type) {
	case map[string]any:
		if m, ok := shown.(map[string]any); ok {
			for k, v := range f {
				hiddenLeaves(v, m[k], out)
			}
		}
	case []any:
		if s, ok := shown.([]any); ok && len(s) == len(f) {
			for i := range f {
				hiddenLeaves(f[i], s[i], out)
			}
		}
	}
}

func leavesOf(tree any, out *[]string) {
	switch t := tree.(type) {
	case string:
		if len(t) >= 3 && t != Redacted {
			*out = append(*out, t)
		}
	case json.Number:
		if len(t) >= 3 {
			*out = append(*out, t.String())
		}
	case map[string]any:
		for _, v := range t {
			leavesOf(v, out)
		}
	case []any:
		for _, v := range t {
			leavesOf(v, out)
		}
	}
}

// recordFrom reads a job hash. Missing or corrupt fields read as zero
// values; the job's identity comes from its key.
func recordFrom(q, id string, h map[string]string) *Record {
	// args "=" means the payload holds nothing to redact; a missing args
	// field (a corrupt record) never falls back to the raw payload.
	args := h["args"]
	if args == "=" {
		args = h["payload"]
	}
	if args == "" || !json.Valid([]byte(args)) {
		args = "null"
	}
	op := opOf(id, h["op"])
	r := &Record{
		ID: id, Kind: h["kind"], Queue: q, OperationID: op, Resource: h["resource"],
		State: State(h["state"]), Token: token(h["token"]), Fence: token(h["fence"]), Owner: h["owner"],
		Deadline: msTime(h["deadline"]), Attempts: atoi(h["attempts"]), MaxRetries: atoi(h["max_retries"]),
		Runs: atoi(h["runs"]), ReconcileTries: atoi(h["reconcile_tries"]), KindDefers: atoi(h["kind_defers"]),
		Timeout: time.Duration(atoi(h["timeout_ms"])) * time.Millisecond,
		Args:    json.RawMessage(args), Error: h["error"], Reason: h["reason"], CancelledBy: h["cancel"],
		Created: msTime(h["created"]), RunAt: msTime(h["run_at"]),
		Started: msTime(h["started"]), Finished: msTime(h["finished"]), UncertainSince: msTime(h["uncertain_since"]),
		Payload: []byte(h["payload"]), Bridge: h["bridge"], Headers: decodeHeaders(h["headers"]),
		UniqueKey: shownUniqueKey(h["ukey"], args),
		Progress:  decodeProgress(h["progress"]),
		Workflow:  h["wf"], WorkflowHome: h["wf_home"], Step: h["step"],
		LimitKey: h["lkey"], LimitMax: atoi(h["lmax"]),
		RateKey: h["rkey"], RateMax: atoi(h["rmax"]), RatePer: time.Duration(atoi(h["rper"])) * time.Millisecond,
		Group: h["group"],
	}
	out := h["output_shown"] // redacted, when it differs from the output
	if out == "" {
		out = h["output"]
	}
	if out != "" && json.Valid([]byte(out)) {
		r.Output = json.RawMessage(out)
	}
	if u := h["ustates"]; u != "" {
		for _, s := range strings.Split(u, ",") {
			r.UniqueStates = append(r.UniqueStates, State(s))
		}
	}
	if r.RunAt.IsZero() {
		r.RunAt = r.Created
	}
	for _, t := range []time.Time{r.Created, r.RunAt, r.Started, r.Finished, r.UncertainSince} {
		if t.After(r.Updated) && !t.After(time.Now()) {
			r.Updated = t
		}
	}
	return r
}

// foreignReason is the reason a job key holding no hash reads with (see
// jobFields).
const foreignReason = "corrupt record: the job key holds no hash"

// jobFields returns a job record's fields as HGETALL read them. A job key
// that holds another type than a hash (written by hand, or by something
// else) reads as a record in review saying so, as the scripts treat it
// (jobread in prelude.lua), so it fails no read of other jobs.
func jobFields(c *redis.MapStringStringCmd) (map[string]string, error) {
	h, err := c.Result()
	if wrongType(err) {
		return map[string]string{"state": string(Review), "reason": foreignReason}, nil
	}
	return h, err
}

// wrongType reports whether err is Redis's refusal of a command on a key
// of another type.
func wrongType(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "WRONGTYPE")
}

// Get returns job id of queue q, or ErrNotFound.
func (l *Ledger) Get(ctx context.Context, q, id string) (*Record, error) {
	if siblingID(id) {
		return nil, noJob(q, id)
	}
	h, err := jobFields(l.rdb.HGetAll(ctx, l.JobKey(q, id)))
	if err != nil {
		return nil, wrap("get "+id, err)
	}
	if len(h) == 0 {
		return nil, noJob(q, id)
	}
	r := recordFrom(q, id, h)
	if r.State == Pending && h["wait"] != "" {
		r.WaitingFor, err = l.waitingFor(ctx, q, h)
		if err != nil {
			return nil, err
		}
	}
	if r.State == Pending && h["wait"] != "limit" { // in the due index, or its group's
		if r.Group != "" && r.WaitingFor == "" {
			if r.WaitingFor, err = l.groupAhead(ctx, q, id, r.Group); err != nil {
				return nil, err
			}
		}
		// A retry, a put-back or a rate's deferral (of a grouped job too:
		// it enters the due index outside its group's turn) is due at its
		// index score, later than the run_at its enqueue (or a run-now)
		// wrote.
		score, err := l.rdb.ZScore(ctx, l.StateKey(q, Pending), id).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, wrap("get "+id, err)
		}
		if due := msTime(strconv.FormatFloat(score, 'f', 0, 64)); due.After(r.RunAt) {
			r.RunAt = due
		}
	}
	return r, nil
}

// Find looks a job up by id in every known queue: one pipelined round
// trip finds the queues holding its record, whatever their number, and
// only those are read. A queue that could not be read (its master down)
// does not hide the job from the others; found in none of those read, the
// error matches ErrPartial, not ErrNotFound.
func (l *Ledger) Find(ctx context.Context, id string) (*Record, error) {
	qs, err := l.Queues(ctx)
	if err != nil {
		return nil, err
	}
	has, err := l.HoldJob(ctx, qs, id)
	if ferr := partialOnly(err); ferr != nil {
		return nil, ferr
	}
	for i, q := range qs {
		if !has[i] {
			continue
		}
		r, gerr := l.Get(ctx, q, id)
		if gerr == nil {
			return r, nil
		}
		if !errors.Is(gerr, ErrNotFound) {
			return nil, gerr
		}
	}
	if miss := missedIn("job "+ShownID(id), err); miss != nil {
		return nil, miss
	}
	return nil, fmt.Errorf("%w: %s", ErrNotFound, ShownID(id))
}

// FindByOperation returns the job owning operation id op in any known
// queue (a job enqueued without one has its own id as operation id), as
// FindOperation finds it over every queue.
func (l *Ledger) FindByOperation(ctx context.Context, op string) (*Record, error) {
	qs, err := l.Queues(ctx)
	if err != nil {
		return nil, err
	}
	return l.FindOperation(ctx, qs, op)
}

// FindOperation returns the job owning operation id op in the first of
// names (queue names, partitions' included) holding one, as
// FindByOperationIn finds it: one pipelined round trip finds the names
// that may hold one (see MayHoldOperation), whatever their number, and
// only those are read. A name that could not be read (its master down)
// does not hide the job from the others; found in none of those read, the
// error matches ErrPartial, not ErrNotFound.
func (l *Ledger) FindOperation(ctx context.Context, names []string, op string) (*Record, error) {
	may, err := l.MayHoldOperation(ctx, names, op)
	if ferr := partialOnly(err); ferr != nil {
		return nil, ferr
	}
	var hits []string
	for i, n := range names {
		if may[i] {
			hits = append(hits, n)
		}
	}
	r, ferr := l.FindByOperationIn(ctx, hits, op)
	if errors.Is(ferr, ErrNotFound) {
		if miss := missedIn("operation "+ShownID(op), err); miss != nil {
			return nil, miss
		}
	}
	return r, ferr
}

// FindByOperationIn returns the job owning operation id op in the first of
// queues qs that holds one (the same operation id on two queues makes two
// jobs).
func (l *Ledger) FindByOperationIn(ctx context.Context, qs []string, op string) (*Record, error) {
	for _, q := range qs {
		if id := OpJobID(q, op); id != "" {
			r, err := l.Get(ctx, q, id)
			if err == nil {
				return r, nil
			}
			if !errors.Is(err, ErrNotFound) {
				return nil, err
			}
		}
		id, err := l.rdb.Get(ctx, l.opKey(q, op)).Result()
		if errors.Is(err, redis.Nil) {
			r, err := l.Get(ctx, q, op)
			if err == nil && r.OperationID == op {
				return r, nil
			}
			continue
		}
		if err != nil {
			return nil, wrap("find operation", err)
		}
		return l.Get(ctx, q, id)
	}
	return nil, fmt.Errorf("%w: operation %s", ErrNotFound, ShownID(op))
}

// Entry is one line of a job's history (see History). Outcome is an end's
// new state and, on a resolve, what the decision did when it is not what it
// says: retry or dead (a reconciler's "not applied", the job's attempts left
// or spent), cancelled or waiting (a re-run).
type Entry struct {
	Event    string    `json:"event"` // enqueued, attempt, end, fenced, deduplicated, resolve, cancel, run_now, raised
	At       time.Time `json:"at"`
	Attempt  int       `json:"attempt,omitempty"`
	Token    string    `json:"token,omitempty"`
	Fence    string    `json:"fence,omitempty"`
	Owner    string    `json:"-"` // never encoded: beside Token, a credential (see Record.Owner)
	Outcome  string    `json:"outcome,omitempty"`
	Error    string    `json:"error,omitempty"`
	Reason   string    `json:"reason,omitempty"`
	Stage    string    `json:"stage,omitempty"`
	From     string    `json:"from,omitempty"`
	Decision string    `json:"decision,omitempty"`
	Actor    string    `json:"actor,omitempty"`
	Note     string    `json:"note,omitempty"`
}

// Event is one line of a queue's event feed (see Events): a fenced
// rejection, a deduplication or an operator action, naming the job it
// concerns.
type Event struct {
	Type    string    `json:"type"` // fenced, deduplicated, cancel, run_now, resolve, pause, resume, rewind, resubmitted, review (a job key holding no hash, Note)
	At      time.Time `json:"at"`
	Job     string    `json:"job,omitempty"`
	Op      string    `json:"op,omitempty"`
	Stage   string    `json:"stage,omitempty"`
	Token   string    `json:"token,omitempty"`
	Current string    `json:"current,omitempty"`
	Actor   string    `json:"actor,omitempty"`
	Note    string    `json:"note,omitempty"`
	// Decision is an operator's resolution (type resolve): succeeded,
	// rerun, dead or review.
	Decision string `json:"decision,omitempty"`
}

// jsonFields reads a JSON object written by the scripts as text fields
// (cjson writes numbers as numbers; a corrupt line reads as empty).
func jsonFields(s string) func(k string) string {
	var raw map[string]any
	_ = json.Unmarshal([]byte(s), &raw)
	return func(k string) string {
		switch v := raw[k].(type) {
		case string:
			return v
		case float64:
			return strconv.FormatFloat(v, 'f', -1, 64)
		}
		return ""
	}
}

func decodeEntry(s string) Entry {
	get := jsonFields(s)
	return Entry{
		Event: get("event"), At: msTime(get("at")), Attempt: atoi(get("attempt")), Token: get("token"),
		Fence: get("fence"), Owner: get("owner"), Outcome: get("outcome"), Error: get("error"), Reason: get("reason"),
		Stage: get("stage"), From: get("from"), Decision: get("decision"),
		Actor: get("actor"), Note: get("note"),
	}
}

func decodeEvent(s string) Event {
	get := jsonFields(s)
	return Event{
		Type: get("type"), At: msTime(get("at")), Job: get("job"), Op: get("op"), Stage: get("stage"),
		Token: get("token"), Current: get("current"), Actor: get("actor"), Note: get("note"),
		Decision: get("decision"),
	}
}

// History returns job id's timeline, oldest first. The common path
// (enqueued, one attempt, succeeded) is kept in the job's own fields and the
// history list holds only what goes beyond it; History shows the same
// timeline either way. An id no job has is ErrNotFound.
func (l *Ledger) History(ctx context.Context, q, id string) ([]Entry, error) {
	if siblingID(id) {
		return nil, noJob(q, id)
	}
	pipe := l.rdb.Pipeline()
	items := pipe.LRange(ctx, l.JobKey(q, id)+":history", 0, -1)
	fields := pipe.HGetAll(ctx, l.JobKey(q, id))
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) && !wrongType(err) {
		return nil, wrap("history "+id, err)
	}
	h, err := jobFields(fields)
	if err != nil {
		return nil, wrap("history "+id, err)
	}
	if len(items.Val()) > 0 {
		out := make([]Entry, len(items.Val()))
		for i, s := range items.Val() {
			out[i] = decodeEntry(s)
		}
		return out, nil
	}
	if len(h) == 0 {
		return nil, noJob(q, id)
	}
	return commonPath(recordFrom(q, id, h)), nil
}

// commonPath is the timeline of a job whose history list was never needed.
func commonPath(r *Record) []Entry {
	out := []Entry{{Event: "enqueued", At: r.Created}}
	if r.Attempts > 0 {
		out = append(out, Entry{Event: "attempt", At: r.Started, Attempt: r.Attempts, Token: r.Token.String(), Owner: r.Owner})
	}
	if r.State == Succeeded {
		e := Entry{Event: "end", At: r.Finished, Attempt: r.Attempts, Token: r.Token.String(), Outcome: string(Succeeded)}
		if r.Fence > 0 { // the resource lease's token, known at the end
			e.Fence = r.Fence.String()
		}
		out = append(out, e)
	}
	return out
}

// Events returns queue q's most recent fenced rejections, deduplications
// and operator actions, newest first.
func (l *Ledger) Events(ctx context.Context, q string, n int) ([]Event, error) {
	items, err := l.rdb.LRange(ctx, l.prefix(q)+"events", 0, int64(n)-1).Result()
	if err != nil {
		return nil, wrap("events", err)
	}
	out := make([]Event, len(items))
	for i, s := range items {
		out[i] = decodeEvent(s)
	}
	return out, nil
}

// EventsOf returns the latest n events of each of queues names (physical
// names), newest first, read in one pipelined round trip. Names whose read
// failed have none, and are named by a *PartialError (see partialOf).
func (l *Ledger) EventsOf(ctx context.Context, names []string, n int) ([][]Event, error) {
	if len(names) == 0 || n <= 0 {
		return make([][]Event, len(names)), nil
	}
	pipe := l.rdb.Pipeline()
	cmds := make([]*redis.StringSliceCmd, len(names))
	for i, q := range names {
		cmds[i] = pipe.LRange(ctx, l.prefix(q)+"events", 0, int64(n)-1)
	}
	_, _ = pipe.Exec(ctx) // read per command below
	out := make([][]Event, len(names))
	errs := make([]error, len(names))
	for i, c := range cmds {
		if err := c.Err(); err != nil && !wrongType(err) {
			errs[i] = wrap("events of "+names[i], err)
			continue
		}
		for _, s := range c.Val() { // a key of another type reads as no events
			out[i] = append(out[i], decodeEvent(s))
		}
	}
	return out, partialOf(ctx, names, errs)
}

// Queues returns the known queue names, sorted.
func (l *Ledger) Queues(ctx context.Context) ([]string, error) {
	qs, err := l.rdb.SMembers(ctx, l.queuesKey()).Result()
	if err != nil {
		return nil, wrap("queues", err)
	}
	sort.Strings(qs)
	return qs, nil
}

// Pause describes a paused queue.
type Pause struct {
	// ID names this pause (a resume may name the pause it means to end);
	// "" for a pause recorded without one.
	ID    string    `json:"id,omitempty"`
	Actor string    `json:"actor"`
	Note  string    `json:"note,omitempty"`
	At    time.Time `json:"at"`
}

// Paused returns who paused queue q and why, or nil when it runs.
func (l *Ledger) Paused(ctx context.Context, q string) (*Pause, error) {
	v, err := l.rdb.Get(ctx, l.prefix(q)+"paused").Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, wrap("paused "+q, err)
	}
	return pauseFrom(v), nil
}

// pauseFrom decodes a paused key's value.
func pauseFrom(v string) *Pause {
	get := jsonFields(v)
	return &Pause{ID: get("id"), Actor: get("actor"), Note: get("note"), At: msTime(get("at"))}
}

// IDs returns up to limit job ids in state s of queue q, from offset, in
// index order (pending: by due time; running: by lease deadline; others: by
// time entered).
func (l *Ledger) IDs(ctx context.Context, q string, s State, offset, limit int) ([]string, error) {
	if !s.Valid() {
		return nil, invalid("unknown state %q", s)
	}
	ids, err := l.rdb.ZRange(ctx, l.StateKey(q, s), int64(offset), int64(offset+limit-1)).Result()
	if err != nil {
		return nil, wrap("list "+string(s), err)
	}
	return ids, nil
}

// DueIDs returns up to limit ids in state s whose index score (pending:
// due time; running: lease deadline; uncertain: next reconcile look) is at
// or before t, with running and uncertain entries scored beyond any sane
// time (see DueIDsOf) first.
func (l *Ledger) DueIDs(ctx context.Context, q string, s State, t time.Time, limit int) ([]string, error) {
	zs, err := l.DueIDsOf(ctx, []string{q}, s, t, limit)
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(zs[0]))
	for _, z := range zs[0] {
		id, _ := z.Member.(string)
		ids = append(ids, id)
	}
	return ids, nil
}

// DueIDsOf returns, for each of queues names, up to limit ids in state s
// whose index score is at or before t (as DueIDs), with their scores (Unix
// ms), in one pipelined round trip whatever the number of queues; for the
// running and uncertain indexes, entries scored beyond latestDeadline past
// t (edited by hand: +inf, 1e300) first, scored -inf. Names
// whose read failed have none, and are named by a *PartialError.
func (l *Ledger) DueIDsOf(ctx context.Context, names []string, s State, t time.Time, limit int) ([][]redis.Z, error) {
	out := make([][]redis.Z, len(names))
	if len(names) == 0 || limit <= 0 {
		return out, nil
	}
	pipe := l.rdb.Pipeline()
	cmds := make([]*redis.ZSliceCmd, len(names))
	far := make([]*redis.ZSliceCmd, len(names))
	stop := strconv.FormatInt(t.UnixMilli(), 10)
	// A running entry scored beyond any lease deadline (edited by hand:
	// +inf, 1e300) is due too: the expirer takes it (expire.lua), and no
	// lease of its runs out; so is an uncertain one scored beyond any
	// reconcile look, which the resolver would otherwise never reach.
	bound := "(" + strconv.FormatInt(t.Add(latestDeadline).UnixMilli(), 10)
	for i, q := range names {
		if s == Running || s == Uncertain {
			far[i] = pipe.ZRangeArgsWithScores(ctx, redis.ZRangeArgs{
				Key: l.StateKey(q, s), ByScore: true, Start: bound, Stop: "+inf", Count: int64(limit),
			})
		}
		cmds[i] = pipe.ZRangeArgsWithScores(ctx, redis.ZRangeArgs{
			Key: l.StateKey(q, s), ByScore: true, Start: "-inf", Stop: stop, Count: int64(limit),
		})
	}
	_, _ = pipe.Exec(ctx) // read per command below
	errs := make([]error, len(names))
	for i, c := range cmds {
		var zs []redis.Z
		if far[i] != nil {
			zs, errs[i] = far[i].Result()
			for j := range zs {
				zs[j].Score = math.Inf(-1) // listed first: due for good
			}
		}
		due, err := c.Result()
		if errs[i] == nil {
			errs[i] = err
		}
		out[i] = append(zs, due...)
		out[i] = out[i][:min(len(out[i]), limit)]
		errs[i] = wrap("due "+string(s)+" of "+names[i], errs[i])
	}
	return out, partialOf(ctx, names, errs)
}

// List returns up to limit jobs in state s of queue q, from offset. Ids
// whose record is gone (expired after retention, or lost) are left out,
// and removed from the index as GetMany removes them.
func (l *Ledger) List(ctx context.Context, q string, s State, offset, limit int) ([]*Record, error) {
	ids, err := l.IDs(ctx, q, s, offset, limit)
	if err != nil {
		return nil, err
	}
	return l.getMany(ctx, q, s, ids, false)
}

// getMany reads the records of ids (in state s's index) in one round trip,
// leaving out those without a record and dropping their index entries,
// except a running or uncertain job's unless dropLive is set (see GetMany); a pending job held back by flow
// control says what it waits for (one more round trip for all of them).
func (l *Ledger) getMany(ctx context.Context, q string, s State, ids []string, dropLive bool) ([]*Record, error) {
	pipe := l.rdb.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	for i, id := range ids {
		cmds[i] = pipe.HGetAll(ctx, l.JobKey(q, id))
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) && !wrongType(err) {
		return nil, wrap("list "+string(s), err)
	}
	out := make([]*Record, 0, len(ids))
	var held []*Record // pending jobs held back by flow control
	var heldH []map[string]string
	for i, c := range cmds {
		h, err := jobFields(c)
		if err != nil {
			return nil, wrap("list "+string(s), err)
		}
		if len(h) == 0 {
			if dropLive || s != Running && s != Uncertain {
				l.rdb.ZRem(ctx, l.StateKey(q, s), ids[i])
			}
			continue
		}
		r := recordFrom(q, ids[i], h)
		out = append(out, r)
		if r.State == Pending && h["wait"] != "" {
			held, heldH = append(held, r), append(heldH, h)
		}
	}
	if len(held) > 0 {
		if err := l.flowWaits(ctx, q, held, heldH); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// GetMany returns the records of ids in state s of queue q, in order,
// leaving out those whose record is gone, and drops their index entries,
// except a running or uncertain job's: that is a lost job, left for the
// maintenance pass that reports it (the expirer, or the resolver through
// GetManyDropLost), so a read (a listing) does not hide it.
func (l *Ledger) GetMany(ctx context.Context, q string, s State, ids []string) ([]*Record, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	return l.getMany(ctx, q, s, ids, false)
}

// GetManyDropLost is GetMany that also drops the entries of running or
// uncertain jobs whose record is gone: for the maintenance pass that
// reports them as lost jobs.
func (l *Ledger) GetManyDropLost(ctx context.Context, q string, s State, ids []string) ([]*Record, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	return l.getMany(ctx, q, s, ids, true)
}

// Counts returns the number of jobs per state in queue q.
func (l *Ledger) Counts(ctx context.Context, q string) (map[State]int64, error) {
	cs, err := l.CountsOf(ctx, []string{q})
	if err != nil {
		return nil, err
	}
	return cs[0].Jobs, cs[0].Err
}

// QueueCounts is one queue's part of CountsOf.
type QueueCounts struct {
	// Jobs is the number of jobs per state. Pending counts the jobs
	// waiting their group's turn or parked on a full limit too.
	Jobs map[State]int64
	// Groups is how many fair groups have pending jobs.
	Groups int64
	// Err is the error reading this queue's counts (Jobs is nil): a
	// queue's failure leaves the others' counts.
	Err error
}

// CountsOf returns the counts of each of queues, in their order: one
// pipelined round trip for every queue, and a second only when some queue
// has jobs parked on a full limit. A maintenance pass over a thousand
// queues costs two round trips, not two thousand. When every queue's read
// failed, it returns the first error instead.
func (l *Ledger) CountsOf(ctx context.Context, queues []string) ([]QueueCounts, error) {
	if len(queues) == 0 {
		return nil, nil
	}
	type reads struct {
		states  []*redis.IntCmd
		grouped *redis.StringCmd      // jobs waiting their group's turn (group.lua), outside the due index
		limited *redis.StringSliceCmd // keys with jobs parked on a full limit (flow.lua)
		groups  *redis.IntCmd         // the groups hash's fields (groups, plus GROUPS_T and the parked count)
		tagged  *redis.BoolCmd        // the hash holds GROUPS_T ('#t', group.lua)
	}
	pipe := l.rdb.Pipeline()
	rs := make([]reads, len(queues))
	for i, q := range queues {
		r := &rs[i]
		r.states = make([]*redis.IntCmd, len(States))
		for j, s := range States {
			r.states[j] = pipe.ZCard(ctx, l.StateKey(q, s))
		}
		gk := l.groupsKey(q)
		r.grouped = pipe.HGet(ctx, gk, groupsParked)
		r.limited = pipe.HKeys(ctx, l.limitsKey(q))
		r.groups = pipe.HLen(ctx, gk)
		r.tagged = pipe.HExists(ctx, gk, "#t")
	}
	// Errors are read per command below: one queue's bad key fails that
	// queue alone; a connection error fails every one of them.
	_, _ = pipe.Exec(ctx)
	out := make([]QueueCounts, len(queues))
	// per key of a limits hash, its parked jobs and whether its holders
	// zset exists (an entry with neither is pruned: pruneLimits)
	var waits []*redis.IntCmd
	var holds []*redis.IntCmd
	waitsOf := make([][2]int, len(queues)) // each queue's range of waits
	wpipe := l.rdb.Pipeline()
	for i, q := range queues {
		r, c := &rs[i], &out[i]
		c.Jobs = map[State]int64{}
		for j, s := range States {
			n, err := r.states[j].Result()
			if err != nil {
				c.Err = err
			}
			c.Jobs[s] = n
		}
		grouped, gerr := r.grouped.Int64()
		switch {
		case gerr == nil:
			c.Jobs[Pending] += grouped
		case !errors.Is(gerr, redis.Nil):
			c.Err = gerr
		}
		if err := anyErr(r.limited.Err(), r.groups.Err(), r.tagged.Err()); err != nil {
			c.Err = err
		}
		if c.Err != nil {
			c.Jobs, c.Err = nil, wrap("counts "+q, c.Err)
			continue
		}
		c.Groups = r.groups.Val()
		if gerr == nil {
			c.Groups--
		}
		if r.tagged.Val() {
			c.Groups--
		}
		waitsOf[i][0] = len(waits)
		for _, k := range r.limited.Val() {
			waits = append(waits, wpipe.ZCard(ctx, l.limitWaitKey(q, k)))
			holds = append(holds, wpipe.Exists(ctx, l.limitHoldersKey(q, k)))
		}
		waitsOf[i][1] = len(waits)
	}
	if len(waits) > 0 {
		_, _ = wpipe.Exec(ctx)
	}
	for i := range out {
		c := &out[i]
		var dead []string
		for j := waitsOf[i][0]; j < waitsOf[i][1]; j++ {
			n, err := waits[j].Result()
			if err != nil {
				c.Jobs, c.Err = nil, wrap("counts "+queues[i], err)
				break
			}
			c.Jobs[Pending] += n
			if n == 0 && holds[j].Val() == 0 && holds[j].Err() == nil {
				dead = append(dead, rs[i].limited.Val()[j-waitsOf[i][0]])
			}
		}
		if c.Err == nil && len(dead) > 0 {
			l.pruneLimits(ctx, queues[i], dead)
		}
	}
	for i := range out {
		if out[i].Err == nil {
			return out, nil
		}
	}
	return nil, out[0].Err // every queue failed: the connection, most likely
}

// anyErr returns the first non-nil of errs.
func anyErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// Stats returns queue q's counters: enqueued, attempted, succeeded, dead,
// cancelled, retried, deferred, uncertain, deduplicated_enqueue,
// deduplicated_unique, deduplicated_execute, fenced_commit, fenced_renew, fenced_storage, dropped_missing,
// resolved_<decision>, raised, rewinds, resubmitted, promoted, groups_repaired,
// limits_repaired; and seq, the queue's
// write sequence (see rewind.go). The sequence's history and tenure (not
// counters) are left out.
func (l *Ledger) Stats(ctx context.Context, q string) (map[string]int64, error) {
	h, err := l.rdb.HGetAll(ctx, l.prefix(q)+"stats").Result()
	if err != nil {
		return nil, wrap("stats", err)
	}
	return statsFrom(h), nil
}

// statsFrom reads a stats hash's counters (see Stats).
func statsFrom(h map[string]string) map[string]int64 {
	out := make(map[string]int64, len(h))
	for k, v := range h {
		if k != seqHistField && k != seqTenureField && k != retentionField {
			out[k], _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return out
}

// QueueSummary is one queue name's part of Summaries.
type QueueSummary struct {
	// Stats are its counters (as Stats returns them).
	Stats map[string]int64
	// Paused is who paused it, nil when it runs (as Paused returns it).
	Paused *Pause
	// Err is the error reading it (Stats and Paused are then empty): one
	// name's failure (on Redis Cluster, its master down) leaves the others'.
	Err error
}

// Summaries returns the counters and the pause of each of names (queue
// names, partitions' included), and the layout changes of each of
// layouts (logical queues, as PartitionChanges returns them), in one
// pipelined round trip whatever their number. A name's failed read is its
// summary's Err, a layout's its entry of the errors returned (its changes
// then nil): on Redis Cluster a master down fails the names it holds
// alone. When every read failed, it returns the first error instead.
func (l *Ledger) Summaries(ctx context.Context, names, layouts []string) ([]QueueSummary, [][]PartitionChange, []error, error) {
	pipe := l.rdb.Pipeline()
	stats := make([]*redis.MapStringStringCmd, len(names))
	paused := make([]*redis.StringCmd, len(names))
	for i, q := range names {
		stats[i] = pipe.HGetAll(ctx, l.prefix(q)+"stats")
		paused[i] = pipe.Get(ctx, l.prefix(q)+"paused")
	}
	changes := make([]*redis.StringSliceCmd, len(layouts))
	for i, q := range layouts {
		changes[i] = pipe.LRange(ctx, l.partitionChangesKey(q), 0, MaxLayoutChanges-1)
	}
	if len(names)+len(layouts) > 0 {
		_, _ = pipe.Exec(ctx) // read per command below
	}
	var first error
	ok := len(names)+len(layouts) == 0
	out := make([]QueueSummary, len(names))
	for i, q := range names {
		h, err := stats[i].Result()
		if err != nil {
			out[i].Err = wrap("stats of "+q, err)
		} else if v, err := paused[i].Result(); err != nil && !errors.Is(err, redis.Nil) {
			out[i].Err = wrap("paused "+q, err)
		} else {
			out[i].Stats = statsFrom(h)
			if err == nil {
				out[i].Paused = pauseFrom(v)
			}
		}
		if out[i].Err == nil {
			ok = true
		} else if first == nil {
			first = out[i].Err
		}
	}
	chs := make([][]PartitionChange, len(layouts))
	errs := make([]error, len(layouts))
	for i, q := range layouts {
		raw, err := changes[i].Result()
		if err != nil {
			errs[i] = wrap("partition changes of "+q, err)
			if first == nil {
				first = errs[i]
			}
			continue
		}
		ok = true
		chs[i] = partitionChangesFrom(raw)
	}
	if !ok {
		return nil, nil, nil, first
	}
	return out, chs, errs, nil
}

// pruneBatch bounds the index entries one prune call removes, so a pass
// over a queue where many finished jobs expired at once (a burst a
// retention ago, a retention just lowered, a leader that was away) holds
// Redis for a bounded time per call instead of for all of them at once.
const pruneBatch = 1000

// pruneScript removes at most ARGV[2] members of the sorted set KEYS[1]
// scored below ARGV[1], and returns how many it removed.
var pruneScript = luafunc.NewPlain(`
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
if #ids > 0 then redis.call('ZREM', KEYS[1], unpack(ids)) end
return #ids`)

// Prune drops ids of finished jobs that expired after retention from the
// succeeded, dead and cancelled indexes, at most pruneBatch per call, and
// returns how many it removed. An index holding another type (written by
// hand: the script fails at its first read) is passed over, the others are
// pruned, and the error matches ErrForeignKey, naming it.
func (l *Ledger) Prune(ctx context.Context, q string, now time.Time) (int64, error) {
	cut := "(" + strconv.FormatInt(now.Add(-l.cfg.Retention).UnixMilli(), 10)
	var n int64
	var foreign []error
	for _, s := range []State{Succeeded, Dead, Cancelled} {
		for {
			key := l.StateKey(q, s)
			removed, err := pruneScript.Run(ctx, l.rdb, []string{key}, cut, pruneBatch).Int64()
			if wrongType(err) {
				foreign = append(foreign, fmt.Errorf("%w: prune: the index %s holds another type than a zset", ErrForeignKey, key))
				break
			}
			if err != nil {
				return n, wrap("prune", err)
			}
			n += removed
			if removed < pruneBatch {
				break
			}
		}
	}
	return n, errors.Join(foreign...)
}

// nowScript reads the namespace's time (internal/epoch's epoch_now) from
// the clock record KEYS[1]: {seconds, microseconds}. ARGV[1] "1" peeks:
// the record is neither created nor moved.
// A read, which go-redis may send again (not luafunc's: see ARCHITECTURE.md, Scripts).
var nowScript = redis.NewScript(epoch.Lua + `
local t = epoch_now(KEYS[1], nil, ARGV[1] == '1')
return {math.floor(t / 1000000), t % 1000000}`)

// clockScript reads the namespace's time and the TIME of the node that
// keeps its clock record KEYS[1]: {seconds, microseconds, TIME seconds,
// TIME microseconds}.
var clockScript = redis.NewScript(epoch.Lua + `
local t = epoch_now(KEYS[1])
local r = redis.call('TIME')
return {math.floor(t / 1000000), t % 1000000, tonumber(r[1]), tonumber(r[2])}`)

// NamespaceClock measures the namespace's time (see ServerTime) against
// the local clock, as Clock measures Redis's: the sample's Redis is the
// namespace's time. It also returns the namespace's time minus the TIME
// of the node keeping it, read in the same call: the offset that carries
// the time across a failover to a node whose clock is behind or a clock
// stepped back (0 while none is needed, and with epochs off).
func (l *Ledger) NamespaceClock(ctx context.Context) (ClockSample, time.Duration, error) {
	if !l.epoch.Enabled() && !l.epoch.Cluster() {
		s, err := clockOf(ctx, l.rdb)
		return s, 0, err
	}
	sent := time.Now()
	v, err := clockScript.Run(ctx, l.rdb, []string{l.epoch.Key()}).Int64Slice()
	if err == nil && len(v) != 4 {
		err = fmt.Errorf("malformed reply %v", v)
	}
	if err != nil {
		return ClockSample{}, 0, wrap("time", err)
	}
	rtt := time.Since(sent) // monotonic
	mid := sent.Add(rtt / 2)
	t := time.Unix(v[0], v[1]*1000)
	return ClockSample{At: mid, Redis: t, OffsetMS: ms64(t.Sub(mid)), RTTMS: ms64(rtt)}, t.Sub(time.Unix(v[2], v[3]*1000)), nil
}

// ServerTime returns the namespace's time, the time every ledger due time
// and deadline is written in: Redis TIME plus the current primary tenure's
// offset (internal/epoch's epoch_now), so it continues from the previous
// primary's after a failover to a node whose clock is behind. On Redis
// Cluster the record <ns>:epoch is kept by the master of its slot alone,
// with the same rule; with epochs off (another client) it is plain TIME.
// It raises the record's mark, as a write does: reads use ReadTime.
func (l *Ledger) ServerTime(ctx context.Context) (time.Time, error) {
	return l.serverTime(ctx, false)
}

// ReadTime returns the namespace's time as ServerTime does, writing
// nothing: a read in a namespace never used creates no clock record.
func (l *Ledger) ReadTime(ctx context.Context) (time.Time, error) {
	return l.serverTime(ctx, true)
}

// queueTime reads queue q's time as its scripts see it, writing nothing:
// on Redis Cluster from the clock record in the queue's own slot, so a
// read of the queue needs its master alone (ReadTime's record may be on a
// master that is down); elsewhere it is ReadTime.
func (l *Ledger) queueTime(ctx context.Context, q string) (time.Time, error) {
	if !l.epoch.Cluster() {
		return l.ReadTime(ctx)
	}
	return l.timeOf(ctx, l.clockKey(q), true)
}

// ClockKey is the key of the namespace's clock record, which ServerTime
// reads (on Redis Cluster, in a slot of its own, on one master).
func (l *Ledger) ClockKey() string { return l.epoch.Key() }

func (l *Ledger) serverTime(ctx context.Context, peek bool) (time.Time, error) {
	if !l.epoch.Enabled() && !l.epoch.Cluster() {
		t, err := l.rdb.Time(ctx).Result()
		return t, wrap("time", err)
	}
	return l.timeOf(ctx, l.epoch.Key(), peek)
}

// timeOf reads the time of clock record key (see ServerTime).
func (l *Ledger) timeOf(ctx context.Context, key string, peek bool) (time.Time, error) {
	arg := "0"
	if peek {
		arg = "1"
	}
	v, err := nowScript.Run(ctx, l.rdb, []string{key}, arg).Int64Slice()
	if err == nil && len(v) != 2 {
		err = fmt.Errorf("malformed reply %v", v)
	}
	if err != nil {
		return time.Time{}, wrap("time", err)
	}
	return time.Unix(v[0], v[1]*1000), nil
}

// LeaderResource is the lease resource the pools of one namespace compete
// for to be the maintenance leader; only its holder acts. It is reserved:
// no job's resource can name it (see ValidateResource).
const LeaderResource = InternalResourcePrefix + "maintenance"

// LeaderStatus is what the maintenance leader last published.
type LeaderStatus struct {
	Leader   string      `json:"leader"`
	Token    lease.Token `json:"token,string"`
	LastScan time.Time   `json:"last_scan"`
	Expired  int64       `json:"expired"`
	Resolved int64       `json:"resolved"`
}

// SetLeaderStatus publishes the maintenance leader's status.
func (l *Ledger) SetLeaderStatus(ctx context.Context, s LeaderStatus) error {
	return wrap("leader status", l.rdb.HSet(ctx, l.statusKey(),
		"leader", s.Leader, "token", s.Token.String(), "last_scan", ms(s.LastScan),
		"expired", s.Expired, "resolved", s.Resolved).Err())
}

// LeaderStatus returns what the maintenance leader last published (nil
// when none has).
func (l *Ledger) LeaderStatus(ctx context.Context) (*LeaderStatus, error) {
	h, err := l.rdb.HGetAll(ctx, l.statusKey()).Result()
	if err != nil {
		return nil, wrap("leader status", err)
	}
	if len(h) == 0 {
		return nil, nil
	}
	exp, _ := strconv.ParseInt(h["expired"], 10, 64)
	res, _ := strconv.ParseInt(h["resolved"], 10, 64)
	return &LeaderStatus{Leader: h["leader"], Token: token(h["token"]), LastScan: msTime(h["last_scan"]),
		Expired: exp, Resolved: res}, nil
}

// Ping checks that Redis answers.
func (l *Ledger) Ping(ctx context.Context) error { return wrap("ping", l.rdb.Ping(ctx).Err()) }

// CheckSentinels asks the Sentinels of Config.Sentinel for the master's
// epoch, changing nothing (nil without Sentinels): an error matching
// epoch.ErrUnknownMaster when they monitor no master of its name.
func (l *Ledger) CheckSentinels(ctx context.Context) error { return l.epoch.CheckSource(ctx) }

// String describes the job without its raw payload (Payload, which holds
// sensitive fields), so a Record formatted with %v or %+v shows none.
func (r Record) String() string {
	return fmt.Sprintf("job %s (kind %s, queue %s, %s, attempts %d)", r.ID, r.Kind, r.Queue, r.State, r.Attempts)
}

// LogValue logs the job without its raw payload (see String).
func (r Record) LogValue() slog.Value {
	return slog.GroupValue(slog.String("id", r.ID), slog.String("kind", r.Kind), slog.String("queue", r.Queue),
		slog.String("state", string(r.State)), slog.Int("attempts", r.Attempts))
}

// stepChunk is how many job records one round trip of Steps reads.
const stepChunk = 100

// stepFields are the fields of a job record Steps reads: what a
// workflow's status shows of a step.
var stepFields = []string{"state", "token", "attempts", "reason", "output", "output_shown"}

// stepOutputAt is the index of the first of stepFields holding an output.
const stepOutputAt = 4

// Steps returns the records of jobs refs (nil for one gone), holding only
// their stepFields (state, token, attempts, reason and, with outputs,
// output), a pipelined round trip per stepChunk of them: a workflow's
// status reads its up to a thousand steps in a few round trips, not one
// per step, and never carries their args (up to 16 MiB a workflow) from
// Redis, nor their outputs (up to 64 KiB each) unless asked. Unlike
// Get it does not work out where a pending job waits.
// When some jobs could not be read (on Redis Cluster, their master down),
// they are nil too, and a *PartialError names their queues; ctx ended, its
// error is returned whole.
func (l *Ledger) Steps(ctx context.Context, refs []StepRef, outputs bool) ([]*Record, error) {
	fields := stepFields
	if !outputs {
		fields = stepFields[:stepOutputAt]
	}
	out := make([]*Record, len(refs))
	var missed Partial
	for lo := 0; lo < len(refs); lo += stepChunk {
		chunk := refs[lo:min(lo+stepChunk, len(refs))]
		cmds := make([]*redis.SliceCmd, len(chunk))
		_, _ = l.rdb.Pipelined(ctx, func(p redis.Pipeliner) error { // read per command below
			for i, r := range chunk {
				if !siblingID(r.ID) {
					cmds[i] = p.HMGet(ctx, l.JobKey(r.Queue, r.ID), fields...)
				}
			}
			return nil
		})
		for i, c := range cmds {
			if c == nil {
				continue
			}
			h, err := stepFieldsOf(c, fields)
			switch {
			case err != nil && ctx.Err() != nil:
				return nil, wrap("read steps", err)
			case err != nil:
				missed.Fail(chunk[i].Queue, wrap("get "+chunk[i].ID, err))
			case len(h) > 0:
				out[lo+i] = recordFrom(chunk[i].Queue, chunk[i].ID, h)
			}
		}
	}
	return out, missed.Err()
}

// stepFieldsOf returns the fields (of stepFields) an HMGET of Steps read,
// by name (none: no record); a job key of another type reads as jobFields
// reads it.
func stepFieldsOf(c *redis.SliceCmd, fields []string) (map[string]string, error) {
	v, err := c.Result()
	if wrongType(err) {
		return map[string]string{"state": string(Review), "reason": foreignReason}, nil
	}
	if err != nil {
		return nil, err
	}
	h := map[string]string{}
	for i, x := range v {
		if s, ok := x.(string); ok && i < len(fields) {
			h[fields[i]] = s
		}
	}
	return h, nil
}

// PausedOf returns the pause of each of names (queue names, partitions'
// included; nil for one that runs), as Paused returns it, in one
// pipelined round trip whatever their number. Names whose read failed read
// as running, and are named by a *PartialError.
func (l *Ledger) PausedOf(ctx context.Context, names []string) ([]*Pause, error) {
	out := make([]*Pause, len(names))
	if len(names) == 0 {
		return out, nil
	}
	pipe := l.rdb.Pipeline()
	cmds := make([]*redis.StringCmd, len(names))
	for i, q := range names {
		cmds[i] = pipe.Get(ctx, l.prefix(q)+"paused")
	}
	_, _ = pipe.Exec(ctx) // read per command below
	errs := make([]error, len(names))
	for i, c := range cmds {
		v, err := c.Result()
		switch {
		case errors.Is(err, redis.Nil):
		case err != nil:
			errs[i] = wrap("paused "+names[i], err)
		default:
			out[i] = pauseFrom(v)
		}
	}
	return out, partialOf(ctx, names, errs)
}

// HoldJob reports, for each of names (queue names, partitions' included),
// whether it holds a record of job id (a record Get would return), in one
// pipelined round trip whatever their number. When some names could not
// be read (their master down), it reports the others with a *PartialError
// naming those (false in the result); when none could, the first error.
func (l *Ledger) HoldJob(ctx context.Context, names []string, id string) ([]bool, error) {
	out := make([]bool, len(names))
	if len(names) == 0 || siblingID(id) {
		return out, nil
	}
	pipe := l.rdb.Pipeline()
	cmds := make([]*redis.IntCmd, len(names))
	for i, q := range names {
		cmds[i] = pipe.Exists(ctx, l.JobKey(q, id))
	}
	_, _ = pipe.Exec(ctx) // read per command below
	errs := make([]error, len(names))
	for i, c := range cmds {
		n, err := c.Result()
		out[i], errs[i] = n > 0, wrap("get "+ShownID(id)+" in "+names[i], err)
	}
	return out, partialOf(ctx, names, errs)
}

// MayHoldOperation reports, for each of names (queue names, partitions'
// included), whether FindByOperationIn could find a job owning operation
// id op there: its operation index, the job its id names (see OpJobID) or
// a job whose id is op exists. One pipelined round trip reads them all,
// whatever their number; a name reported false holds no such job, unless
// the error, a *PartialError (some names could not be read) or the first
// error (none could), names it.
func (l *Ledger) MayHoldOperation(ctx context.Context, names []string, op string) ([]bool, error) {
	out := make([]bool, len(names))
	if len(names) == 0 {
		return out, nil
	}
	pipe := l.rdb.Pipeline()
	cmds := make([]*redis.IntCmd, len(names))
	for i, q := range names {
		keys := []string{l.opKey(q, op), l.JobKey(q, op)}
		if id := OpJobID(q, op); id != "" {
			keys = append(keys, l.JobKey(q, id))
		}
		cmds[i] = pipe.Exists(ctx, keys...)
	}
	_, _ = pipe.Exec(ctx) // read per command below
	errs := make([]error, len(names))
	for i, c := range cmds {
		n, err := c.Result()
		out[i], errs[i] = n > 0, wrap("find operation in "+names[i], err)
	}
	return out, partialOf(ctx, names, errs)
}
