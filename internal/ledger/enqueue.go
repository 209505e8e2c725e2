package ledger

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/luafunc"
	"github.com/fencedq/fencedq/internal/scriptbatch"
)

// NewJob is a validated job, ready for enqueue.lua.
type NewJob struct {
	ID, Kind, Queue, OperationID, Resource string
	Payload, Display                       []byte
	MaxRetries                             int
	Timeout                                time.Duration
	Delay                                  time.Duration     // due this long after Redis receives it
	Headers                                map[string]string // nil: none (see ValidateHeaders)
	Unique                                 *Unique           // nil: not unique (enqueue.lua); else enqueue_unique.lua
	Flow                                   *Flow             // nil: no limit or rate (enqueue.lua); else enqueue_unique.lua
	Group                                  string            // "": not grouped (enqueue.lua); else enqueue_unique.lua (group.lua)
	// PartitionKey picks the partition of a partitioned queue (not
	// written: the job's queue is the partition it was routed to).
	PartitionKey string
}

// args are j's arguments of enqueue.lua, or with extended those of
// enqueue_unique.lua (which takes a plain job too).
func (j *NewJob) args(extended bool) []any {
	display := j.Display
	if bytes.Equal(display, j.Payload) {
		display = nil
	}
	a := []any{j.ID, j.Kind, j.OperationID, j.Resource, j.Payload, display,
		j.MaxRetries, j.Timeout.Milliseconds(), j.Delay.Milliseconds(), encodeHeaders(j.Headers)}
	if extended {
		a = append(a, j.Unique.args()...)
		a = append(a, j.Flow.args()...)
		a = append(a, j.Group)
	}
	return a
}

// extended reports whether j goes through enqueue_unique.lua: unique,
// under flow control or grouped.
func (j *NewJob) extended() bool { return j.Unique != nil || j.Flow != nil || j.Group != "" }

// encodeHeaders is the headers field of a job hash: a JSON object, or ""
// for none (nothing is written).
func encodeHeaders(h map[string]string) string {
	if len(h) == 0 {
		return ""
	}
	b, _ := json.Marshal(h) // a map of strings always encodes
	return string(b)
}

// decodeHeaders reads a headers field; "" or a corrupt one reads as none.
func decodeHeaders(s string) map[string]string {
	if s == "" {
		return nil
	}
	var h map[string]string
	if json.Unmarshal([]byte(s), &h) != nil || len(h) == 0 {
		return nil
	}
	return h
}

// Inserted reports what the enqueue script did with one job.
type Inserted struct {
	JobID, Queue, OperationID string
	Deduplicated              bool
	// Parked: created and parked at once on its concurrency limit (its
	// permits held or promised, or jobs waiting before it).
	Parked bool
}

// OpJobID returns the id jobs.Client gives a job enqueued to queue q with
// operation id op: "=<q>=<op>" when op is letters, digits or ._- and the
// id is at most 200 bytes (MaxOperationIDLen, as every job id)
// (the job then needs no operation key: the enqueue scripts find the
// operation's job by its id), else "" (the job gets a random id and an
// operation key op:<op> names it). Queue names hold no '=' and no random id
// starts with one, so these ids are unique across queues and never a
// random id. A NewJob whose ID is OpJobID(Queue, OperationID) is written
// so (Queue being the logical queue: a partition's jobs keep it); any
// other keeps the operation key.
func OpJobID(q, op string) string {
	q = Logical(q)
	if op == "" || 2+len(q)+len(op) > MaxOperationIDLen { // ids are read back up to 200 bytes
		return ""
	}
	for i := 0; i < len(op); i++ {
		c := op[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return ""
		}
	}
	return "=" + q + "=" + op
}

// opOf returns the operation id of job id whose record's operation id
// field reads op: op, else the one its id names (see OpJobID), else the
// job's own id.
func opOf(id, op string) string {
	if op != "" {
		return op
	}
	if q, named, ok := strings.Cut(strings.TrimPrefix(id, "="), "="); ok && id[0] == '=' && OpJobID(q, named) == id {
		return named
	}
	return id
}

// enqueueChunk bounds the jobs one enqueue script call carries.
const enqueueChunk = 500

// Insert writes js with one enqueue script call per queue and chunk, all in
// one pipeline (Redis Cluster: one per node), each queue's jobs in their
// order, and returns their results in order; a job whose call failed has a nil result, and the first error
// (matching ErrEnqueueUnknown: the call's jobs were written whole or not
// at all; or ErrOutOfMemory or ErrWriteRefused: Redis refused the call,
// nothing written) is
// returned, the first matching ErrEnqueueUnknown when any call's outcome
// is unknown.
//
// A queue seen for the first time is added to the queue registry after
// its jobs were written. That write failing (a Cluster node holding the
// registry unreachable) does not fail the enqueue, whose jobs exist and
// run: the queue is registered again by the next Insert of this ledger,
// and by every pool serving it as it runs. A call whose outcome is unknown
// (too few replicas acknowledged it, or its reply was lost) registers its
// queue too, unless its reply says the queue was not new: its jobs may
// exist, and a call made again finds the queue no longer new.
//
// Every reply is checked for a rewind (see rewind.go), and with a record
// (Config.Recent) each job created is recorded for Resubmit.
func (l *Ledger) Insert(ctx context.Context, js []*NewJob) ([]*Inserted, error) {
	return l.insert(ctx, js, "")
}

// insert is Insert in the enqueue script's mode: "" or "resubmit".
func (l *Ledger) insert(ctx context.Context, js []*NewJob, mode string) ([]*Inserted, error) {
	defer l.registerPending(ctx)
	type call struct {
		queue string
		uniq  bool  // extended jobs: enqueue_unique.lua
		idx   []int // positions in js
		args  []any
		cmd   *redis.Cmd
		seen  seqSeen
	}
	// A queue's jobs go through one script, in their order, so jobs that
	// share an operation id or a unique key are deduplicated as if written
	// one after another: the first is created, whatever the options of the
	// others. A queue with any unique, flow-controlled or grouped job takes
	// enqueue_unique.lua for all of them.
	uniqs := map[string]bool{}
	for _, j := range js {
		uniqs[j.Queue] = uniqs[j.Queue] || j.extended()
	}
	var calls []*call
	open := map[string]*call{}
	for i, j := range js {
		uniq := uniqs[j.Queue]
		cl := open[j.Queue]
		if cl == nil || len(cl.idx) == enqueueChunk {
			cl = &call{queue: j.Queue, uniq: uniq, args: []any{l.layoutOf(j.Queue).prefix, mode}, seen: l.watch.before(j.Queue)}
			open[j.Queue] = cl
			calls = append(calls, cl)
		}
		cl.idx = append(cl.idx, i)
		cl.args = append(cl.args, j.args(uniq)...)
	}
	switch {
	case len(calls) == 1:
		// One call: share a pipeline, and a script call, with concurrent
		// callers (see enqueueMerge).
		cl := calls[0]
		script, keys := l.enqueueCall(cl.queue, cl.uniq)
		m := l.layoutOf(cl.queue).merge[b2i(cl.uniq)]
		if mode != "" {
			m = enqueueMerge(l.prefix(cl.queue), mode, cl.uniq)
		}
		cl.cmd = l.lanes.enqueue.RunMerged(ctx, m, script, keys, cl.args...)
	case l.Durable():
		// Each call through the durable lane, so each pipeline (one per
		// node on Redis Cluster) carries the wait for replicas; the queues
		// at once, each queue's calls (chunks) in their order.
		byQueue := map[string][]*call{}
		for _, cl := range calls {
			byQueue[cl.queue] = append(byQueue[cl.queue], cl)
		}
		var wg sync.WaitGroup
		for _, qcalls := range byQueue {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for _, cl := range qcalls {
					script, keys := l.enqueueCall(cl.queue, cl.uniq)
					cl.cmd = l.lanes.enqueue.Run(ctx, script, keys, cl.args...)
				}
			}()
		}
		wg.Wait()
	default:
		pipe := l.rdb.Pipeline()
		for _, cl := range calls {
			script, keys := l.enqueueCall(cl.queue, cl.uniq)
			cl.cmd = script.EvalSha(ctx, pipe, keys, cl.args...)
		}
		_, _ = pipe.Exec(ctx)
		// A server that lacked the ledger's function library (or, without
		// functions, its scripts) wrote nothing for those calls: load the
		// library and send them again, by name, or else with their text.
		retry := l.rdb.Pipeline()
		tried, loaded := false, false
		for _, cl := range calls {
			if !luafunc.IsMissing(cl.cmd.Err()) {
				continue
			}
			script, keys := l.enqueueCall(cl.queue, cl.uniq)
			if !tried {
				tried = true
				loaded = script.Library().Load(ctx, l.rdb) == nil && script.Library().Available()
			}
			if loaded {
				cl.cmd = script.EvalSha(ctx, retry, keys, cl.args...)
			} else {
				cl.cmd = script.Eval(ctx, retry, keys, cl.args...)
			}
		}
		if retry.Len() > 0 {
			_, _ = retry.Exec(ctx)
		}
	}
	out := make([]*Inserted, len(js))
	var firstErr error
	for _, cl := range calls {
		err := l.decodeInsert(ctx, cl.queue, cl.seen, mode == "", cl.idx, js, cl.cmd, out)
		// A call whose outcome is unknown wins over one refused before its
		// first write (out of memory, a foreign key on another node): its
		// jobs may exist, which the other's error says of none.
		if err != nil && (firstErr == nil || errors.Is(err, ErrEnqueueUnknown) && !errors.Is(firstErr, ErrEnqueueUnknown)) {
			firstErr = err
		}
	}
	return out, firstErr
}

// enqueueMerge lets an enqueue call queued behind others (the enqueue
// lane's pipelines all in flight) share one script call with the calls of
// the same queue, script and mode queued with it: the script's fixed cost
// (the clock, the write sequence, counters, the wake-up) is paid once per
// merged call instead of once per job. The scripts process their jobs one
// after another, so an operation id or unique key enqueued twice in one
// merged call is deduplicated as in one EnqueueMany call. args is the
// calls' arguments are the prefix, mode, then the jobs'.
func enqueueMerge(prefix, mode string, uniq bool) *scriptbatch.Merge {
	m := &scriptbatch.Merge{Key: prefix + "\x00" + mode, Head: 2}
	stride := enqueueStride
	if uniq {
		stride = enqueueUniqueStride
	}
	m.Max = enqueueChunk * stride
	m.Split = func(v any, n []int) ([]any, error) { return splitEnqueue(v, n, stride) }
	return m
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// enqueueHeader is how many values an enqueue reply has before its jobs':
// first, seq, seq raised, enqueued, history.
const enqueueHeader = 5

// Arguments per job of enqueue.lua and enqueue_unique.lua.
const (
	enqueueStride       = 10
	enqueueUniqueStride = 20
)

// splitEnqueue splits a merged enqueue reply ({first, seq, seq raised,
// enqueued, history, then created (1, 2: and parked) or not (0) and job id
// per job}) into one reply per merged
// call, n[i] being call i's arguments. Each reply reads as if the calls had
// run one after another: the enqueued counter after call i excludes the
// jobs later calls created, so each caller's rewind check (enqueued minus
// its own created jobs: the counter before its call) sees what was there
// before the merged call ran.
func splitEnqueue(v any, n []int, stride int) ([]any, error) {
	r, ok := v.([]any)
	total := 0
	for _, k := range n {
		total += k / stride
	}
	if !ok || len(r) != enqueueHeader+2*total {
		return nil, fmt.Errorf("merged enqueue: unexpected reply %v", v)
	}
	enqueued, ok := r[3].(int64)
	if !ok {
		return nil, fmt.Errorf("merged enqueue: unexpected enqueued counter %v", r[3])
	}
	out := make([]any, len(n))
	end := len(r)
	for i := len(n) - 1; i >= 0; i-- {
		from := end - 2*(n[i]/stride)
		part := make([]any, 0, enqueueHeader+end-from)
		part = append(part, r[0], r[1], r[2], enqueued, r[4])
		part = append(part, r[from:end]...)
		for j := from; j < end; j += 2 {
			if c, _ := r[j].(int64); c == 1 || c == 2 { // created (2: and parked)
				enqueued--
			}
		}
		out[i] = part
		end = from
	}
	return out, nil
}

// decodeInsert reads one enqueue call's reply into out, checks it for a
// rewind, records the jobs it created (record: not for a re-submission)
// and registers a queue whose counters were empty (new, or lost with
// Redis's keys).
func (l *Ledger) decodeInsert(ctx context.Context, q string, seen seqSeen, record bool, idx []int, js []*NewJob, cmd *redis.Cmd, out []*Inserted) error {
	v, err := cmd.Result()
	if refused := refusedWrite(err); refused != nil {
		return refused
	}
	if f := foreignQueueKey(err); f != err {
		return f // refused before the first write
	}
	if NotSent(err) {
		return fmt.Errorf("%w: %w", ErrNotSent, err)
	}
	if err != nil {
		l.registerUnknown(q, v)
		l.unknownOutcome(record, idx, js)
		return fmt.Errorf("%w: %w", ErrEnqueueUnknown, err)
	}
	const header = enqueueHeader
	r := newReply("enqueue", v, nil)
	if err := r.need(header + 2*len(idx)); err != nil {
		l.registerUnknown(q, v)
		l.unknownOutcome(record, idx, js)
		return fmt.Errorf("%w: %w", ErrEnqueueUnknown, wrap("enqueue", err))
	}
	res := make([]Inserted, len(idx))
	byOp := make([]bool, len(idx)) // deduplicated by operation id: the job this call (or an earlier try) created
	var refused []int              // left out by the script
	created := int64(0)
	for n, i := range idx {
		op := js[i].OperationID
		if op == "" {
			op = js[i].ID
		}
		// 0 deduplicated, 1 created, 2 created and parked, 3 deduplicated
		// to a unique key's holder: {its id, its op field}, 4 left out (a
		// foreign key: no result, ErrForeignKey)
		c := r.int(header + 2*n)
		id := ""
		if c == 4 {
			refused = append(refused, n)
			continue
		}
		if c == 3 {
			id, op = r.holder(header + 1 + 2*n)
		} else {
			id = r.str(header + 1 + 2*n)
		}
		res[n] = Inserted{JobID: id, Queue: q, OperationID: op, Deduplicated: c == 0 || c == 3, Parked: c == 2}
		byOp[n] = c == 0
		if !res[n].Deduplicated {
			created++
		}
	}
	seq := seqReply{seq: r.int(1), bumped: r.int(2), enqueued: r.int(3), hist: r.str(4), created: created}
	if r.err != nil {
		l.registerUnknown(q, v)
		l.unknownOutcome(record, idx, js)
		return fmt.Errorf("%w: %w", ErrEnqueueUnknown, wrap("enqueue", r.err))
	}
	for n, i := range idx {
		if !slices.Contains(refused, n) {
			out[i] = &res[n]
		}
	}
	// Checked before recording: these jobs are not lost. A re-submitted
	// job keeps its first record.
	l.observe(ctx, q, seen, seq)
	if l.recent != nil && record {
		at := time.Now()
		for n, i := range idx {
			j := js[i]
			var first time.Time
			retried := false
			if j.OperationID != "" {
				first, retried = l.recent.settled(opKey("job", Logical(j.Queue), j.OperationID))
			}
			switch {
			case out[i] == nil: // left out
			case !res[n].Deduplicated:
				l.recent.add(j, seq.seq, at)
			case retried && byOp[n]:
				// The retry of an enqueue whose outcome was unknown found
				// its job: acknowledged now, at an unknown write (seq 0:
				// not counted certainly lost), made by an earlier try (its
				// delay counts from the first). One deduplicated to another
				// job holding its unique key found no job of its own: the
				// earlier try wrote nothing.
				nj := *j
				nj.ID = res[n].JobID
				l.recent.add(&nj, 0, first)
			}
		}
	}
	if r.int(0) == 1 && l.RegisterQueues(ctx, q) != nil {
		l.unregistered.Store(q, struct{}{}) // the jobs are written: register later
	}
	if len(refused) > 0 {
		return fmt.Errorf("%w: job %s in queue %s", ErrForeignKey, Clip(js[idx[refused[0]]].ID), q)
	}
	return nil
}

// unknownOutcome notes the operations of an enqueue call whose outcome is
// unknown (record: not a re-submission), so a retry that finds their jobs
// records them (see recent.unsure).
func (l *Ledger) unknownOutcome(record bool, idx []int, js []*NewJob) {
	if l.recent == nil || !record {
		return
	}
	for _, i := range idx {
		if op := js[i].OperationID; op != "" {
			l.recent.unknown(opKey("job", Logical(js[i].Queue), op))
		}
	}
}

// registerUnknown marks queue q for registration after an enqueue call
// whose outcome is unknown: too few replicas acknowledged it (v is its
// reply, which says whether the queue was new), or its reply was lost (v
// is nil). Its jobs may be written, and the call made again does not find
// the queue new, so it would not register it. registerPending (at the end
// of this Insert, or of the next) registers it; a queue whose jobs were
// not written after all is registered harmlessly, as an empty queue.
func (l *Ledger) registerUnknown(q string, v any) {
	if r, ok := v.([]any); ok && len(r) > 0 {
		if first, ok := r[0].(int64); ok && first != 1 {
			return
		}
	}
	l.unregistered.Store(q, struct{}{})
}

// registerPending registers the queues whose registration failed after
// their jobs were written; those that fail again stay pending.
func (l *Ledger) registerPending(ctx context.Context) {
	l.unregistered.Range(func(k, _ any) bool {
		q := k.(string)
		if l.RegisterQueues(ctx, q) == nil {
			l.unregistered.Delete(q)
		}
		return ctx.Err() == nil
	})
}
