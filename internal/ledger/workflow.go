package ledger

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/luafunc"
)

// StepRef names a workflow step's job.
type StepRef struct {
	Queue string `json:"q"`
	ID    string `json:"id"`
}

// WorkflowStep is one step of a NewWorkflow.
type WorkflowStep struct {
	Job  *NewJob
	Name string
	// Deps are the names of the steps it waits for; AllowFail those of
	// them whose failure does not cancel it.
	Deps, AllowFail []string
	// Next are the steps that depend on it.
	Next []StepRef
}

// NewWorkflow is a validated workflow, ready for EnqueueWorkflow.
type NewWorkflow struct {
	ID, OperationID string
	// Home is the queue holding the workflow's record (its first step's).
	Home string
	// Record is the workflow's description (JSON), stored as it is.
	Record []byte
	Steps  []WorkflowStep
	// Claim, when set, is called once before anything is written, when no
	// workflow of the operation id was found: it may return the workflow
	// to write instead (its home moved to the one the operation id
	// claimed, see ClaimWorkflowHome), or nil to write this one.
	Claim func(context.Context) (*NewWorkflow, error)
}

// StartDep is the dependency the roots of a workflow's other queues wait
// for until the home queue's commit releases them.
const StartDep = "@start"

// EnqueueWorkflow writes w: one wf_enqueue.lua call per queue, the home
// queue's last (the commit: see the script). It returns the workflow's id,
// the existing one's when its operation id was already known
// (deduplicated), whichever queue is that workflow's home. Hand-over records the commit wrote are moved before it
// returns; a failure there leaves them to the maintenance leader.
//
// Every reply is checked for a rewind (see rewind.go), and with a record
// (Config.Recent) a workflow created is recorded for Resubmit, which writes
// it again when its home queue lost it.
func (l *Ledger) EnqueueWorkflow(ctx context.Context, w *NewWorkflow) (id string, dedup bool, err error) {
	return l.enqueueWorkflow(ctx, w, true, false)
}

// enqueueWorkflow is EnqueueWorkflow; record: the workflow is recorded for
// Resubmit (not for a re-submission, which keeps its first record);
// revive: a re-submission of a workflow the maintenance leader abandoned
// (its commit lost in a rewind), whose record it replaces and whose steps
// it cancelled go back to waiting (wf_enqueue.lua's revive modes).
func (l *Ledger) enqueueWorkflow(ctx context.Context, w *NewWorkflow, record, revive bool) (id string, dedup bool, err error) {
	track := record && l.recent != nil && w.OperationID != ""
	if track {
		// A try whose outcome is unknown is acknowledged by the retry
		// that finds the workflow: recorded then (see recent.unsure).
		defer func() {
			if errors.Is(err, ErrEnqueueUnknown) {
				l.recent.unknown(opKey("wf", w.Home, w.OperationID))
			}
		}()
	}
	if w.OperationID != "" && !revive {
		// known already: write no step (the home call checks again)
		home, got, err := l.knownWorkflow(ctx, w)
		if err != nil {
			return "", false, err
		}
		if got != "" {
			// Found by a read, which a demoted primary (a read-only replica
			// still holding data the new primary lost) answers too, and
			// maybe left by a try the replicas did not acknowledge: the
			// home call's deduplication, a write, confirms it on the
			// primary (counted, and waited for in durable mode).
			got, err = l.confirmWorkflow(ctx, w, home)
			if err != nil {
				return "", false, err
			}
		}
		if got != "" {
			l.moveAfter(ctx, home) // a first try that stopped before moving them
			if track {
				if first, ok := l.recent.settled(opKey("wf", w.Home, w.OperationID)); ok {
					l.recent.addWorkflow(w, 0, first) // at an unknown write, by an earlier try
				}
			}
			return got, true, nil
		}
	}
	if claim := w.Claim; claim != nil && !revive {
		c := *w
		c.Claim = nil // not again by a re-submission of the recorded copy
		w = &c
		nw, err := claim(ctx)
		if err != nil {
			return "", false, err
		}
		if nw != nil {
			nw.Claim = nil
			w = nw
		}
	}
	if err := l.checkStepOperations(ctx, w); err != nil {
		return "", false, err
	}
	byQueue := map[string][]any{}
	var order []string
	var roots [][2]string
	for _, s := range w.Steps {
		q := s.Job.Queue
		deps := s.Deps
		if len(deps) == 0 && q != w.Home {
			deps = []string{StartDep}
			roots = append(roots, [2]string{q, s.Job.ID})
		}
		if _, ok := byQueue[q]; !ok {
			order = append(order, q)
		}
		next, allow := "", ""
		if len(s.Next) > 0 {
			b, _ := json.Marshal(s.Next)
			next = string(b)
		}
		if len(s.AllowFail) > 0 {
			m := map[string]bool{}
			for _, a := range s.AllowFail {
				m[a] = true
			}
			b, _ := json.Marshal(m)
			allow = string(b)
		}
		if deps == nil {
			deps = []string{}
		}
		d, _ := json.Marshal(deps)
		// enqueue.lua's ten values (a step is never unique nor grouped:
		// the workflow package refuses both), the step's, its flow's
		step := append(s.Job.args(false), s.Name, next, string(d), allow)
		byQueue[q] = append(byQueue[q], append(step, s.Job.Flow.args()...)...)
	}
	if roots == nil {
		roots = [][2]string{}
	}
	rootsJSON, _ := json.Marshal(roots)
	// Registered first: a call below whose outcome is unknown (a wait for
	// replicas that timed out) may have written its steps.
	if err := l.RegisterQueues(ctx, order...); err != nil {
		return "", false, enqueueUnknown(err)
	}
	for _, q := range order {
		if q == w.Home {
			continue
		}
		args := append([]any{w.ID, mode("part", revive), "", "", "[]", w.Home}, byQueue[q]...)
		seen := l.watch.before(q)
		v, err := l.run(ctx, l.lanes.enqueue, wfEnqueueScript, q, args...).Result()
		if err != nil {
			return "", false, enqueueUnknown(wrap("enqueue workflow "+w.ID+" in "+q, err))
		}
		l.observeWorkflow(ctx, q, seen, newReply("wf_enqueue", v, nil))
	}
	args := append([]any{w.ID, mode("home", revive), w.OperationID, w.Record, rootsJSON, w.Home}, byQueue[w.Home]...)
	seen := l.watch.before(w.Home)
	v, err := l.run(ctx, l.lanes.enqueue, wfEnqueueScript, w.Home, args...).Result()
	r := newReply("wf_enqueue", v, err)
	if err := r.need(7); err != nil {
		return "", false, enqueueUnknown(wrap("enqueue workflow "+w.ID, err))
	}
	id, dedup = r.str(1), r.int(0) == 0
	if r.err != nil {
		return "", false, enqueueUnknown(wrap("enqueue workflow "+w.ID, r.err))
	}
	seq, ok := l.observeWorkflow(ctx, w.Home, seen, r)
	var first time.Time
	retried := false
	if track {
		first, retried = l.recent.settled(opKey("wf", w.Home, w.OperationID))
	}
	switch {
	case ok && record && l.recent != nil:
		l.recent.addWorkflow(w, seq, time.Now())
	case dedup && retried:
		l.recent.addWorkflow(w, 0, first) // at an unknown write, by an earlier try
	}
	l.moveAfter(ctx, w.Home)
	return id, dedup, nil
}

// mode is wf_enqueue.lua's mode for a call of kind part or home.
func mode(kind string, revive bool) string {
	if revive {
		return kind + "_revive"
	}
	return kind
}

// ClaimWorkflowHome pins the home queue name of the workflow of operation
// id op: home is the queue name (a queue's, or its partition's) the
// caller routed it to; the first claim of op in that queue stands, and
// the name it claimed is returned (home when this call made it). Callers
// routing by partition counts read before and after a change of the
// queue's partitions would otherwise pick different homes, each
// deduplicating op only within its own, and write the workflow twice. The
// claim is kept for the retention (it needs to outlive only the enqueues
// racing the first: once committed, the workflow is found in whichever
// queue holds it); the name it claims stays served, as the queue registry
// keeps every partition a queue had. A claim that names no queue name of
// home's queue (written by hand) is replaced.
func (l *Ledger) ClaimWorkflowHome(ctx context.Context, home, op string) (string, error) {
	key := l.prefix(Logical(home)) + "wfhome:" + op
	prev, err := l.rdb.SetArgs(ctx, key, home, redis.SetArgs{Mode: "NX", Get: true, TTL: l.cfg.Retention}).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return home, nil
	case err != nil:
		return "", enqueueUnknown(wrap("claim the home of workflow operation "+Clip(op), err))
	case prev == "" || Logical(prev) != Logical(home) || ValidateQueueRef(prev) != nil:
		if err := l.rdb.Set(ctx, key, home, l.cfg.Retention).Err(); err != nil {
			return "", enqueueUnknown(wrap("claim the home of workflow operation "+Clip(op), err))
		}
		return home, nil
	}
	return prev, nil
}

// knownWorkflow looks for a workflow enqueued before under w's operation
// id: its id and home queue, or "" for both.
func (l *Ledger) knownWorkflow(ctx context.Context, w *NewWorkflow) (home, id string, err error) {
	got, err := l.rdb.Get(ctx, l.prefix(w.Home)+"wfop:"+w.OperationID).Result()
	if err == nil {
		return w.Home, got, nil
	}
	if !errors.Is(err, redis.Nil) {
		return "", "", notWritten(wrap("enqueue workflow "+w.ID+": reading whether operation id "+Clip(w.OperationID)+" was enqueued before", err))
	}
	// the id is the operation id's: a first enqueue whose first step
	// was in another queue holds it there (found there, the queues not
	// read do not matter: a workflow has one home)
	home, err = l.FindWorkflow(ctx, w.ID)
	var pe *PartialError
	switch {
	case home != "":
		return home, w.ID, nil
	case errors.As(err, &pe):
		// Not found in the queues read: a queue not read may hold it (its
		// home when an enqueue of the operation id began with a step of
		// that queue), so writing it now might write it twice. Only reads
		// were made: nothing was written.
		return "", "", fmt.Errorf("%w: whether workflow operation %s was enqueued before is unknown: not found in the queues read, and %s (where a workflow of it enqueued with a first step there has its home); enqueue it again once %s: %w",
			ErrNotSent, Clip(w.OperationID), unreadQueues(pe.Unreachable), answers(pe.Unreachable), err)
	case err != nil:
		return "", "", notWritten(err)
	}
	return "", "", nil
}

// notWritten marks an error of a read a workflow enqueue makes before it
// writes any of the workflow (a timeout, a connection lost) as ErrNotSent,
// keeping the read's error: nothing of the workflow was written, so it is
// not an unknown outcome (ErrEnqueueUnknown is for failures after a write
// was sent). A key of another type (ErrForeignKey) is left as it is.
func notWritten(err error) error {
	if errors.Is(err, ErrNotSent) || errors.Is(err, ErrEnqueueUnknown) || errors.Is(err, ErrForeignKey) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrNotSent, err)
}

// unreadQueues says queue names qs could not be read.
func unreadQueues(qs []string) string {
	if len(qs) == 1 {
		return "queue " + qs[0] + " could not be read"
	}
	return "queues " + strings.Join(qs, ", ") + " could not be read"
}

// answers is "it answers" for one queue name, "they answer" for more.
func answers(qs []string) string {
	if len(qs) == 1 {
		return "it answers"
	}
	return "they answer"
}

// confirmWorkflow is, in durable mode, the acknowledgement of a workflow
// an enqueue found written in queue home: the home call's deduplication
// alone (wf_enqueue.lua's mode confirm), whose write the wait for replicas
// follows, so the replicas hold everything the primary wrote before it,
// the workflow included. It returns the workflow's id, or "" when it is no
// longer there (pruned since: nothing written, enqueue it again).
func (l *Ledger) confirmWorkflow(ctx context.Context, w *NewWorkflow, home string) (string, error) {
	v, err := l.run(ctx, l.lanes.enqueue, wfEnqueueScript, home, w.ID, "confirm", w.OperationID, "", "[]", home).Result()
	r := newReply("wf_enqueue", v, err)
	if err := r.need(2); err != nil {
		return "", enqueueUnknown(wrap("enqueue workflow "+w.ID, err))
	}
	if r.int(0) != 0 {
		return "", nil
	}
	id := r.str(1)
	if r.err != nil {
		return "", enqueueUnknown(wrap("enqueue workflow "+w.ID, r.err))
	}
	return id, nil
}

// enqueueUnknown marks an error of a workflow enqueue's Redis calls as
// ErrEnqueueUnknown (the workflow may be written: enqueue it again with
// the same operation id), as an enqueue's; a script's refusal (a FENCEDQ
// reply: nothing written) is left as it is, matching ErrForeignKey for a
// key of another type (a step's, or a queue-level key: wrap), and Redis's
// refusal of a write matches ErrOutOfMemory or ErrWriteRefused (that call
// wrote nothing, and the workflow was not committed).
func enqueueUnknown(err error) error {
	if refused := refusedWrite(err); refused != nil && !errors.Is(err, ErrEnqueueUnknown) {
		return refused
	}
	if NotSent(err) && !errors.Is(err, ErrEnqueueUnknown) && !errors.Is(err, ErrNotSent) {
		return fmt.Errorf("%w: %w", ErrNotSent, err)
	}
	var re redis.Error
	if errors.As(err, &re) && strings.HasPrefix(re.Error(), "FENCEDQ foreign key") {
		return fmt.Errorf("%w: %w", ErrForeignKey, err)
	}
	if errors.Is(err, ErrEnqueueUnknown) || errors.Is(err, ErrForeignKey) || errors.As(err, &re) && strings.HasPrefix(re.Error(), "FENCEDQ ") {
		return err
	}
	return fmt.Errorf("%w: %w", ErrEnqueueUnknown, err)
}

// observeWorkflow checks a wf_enqueue.lua reply of queue q for a rewind, as
// decodeInsert does an enqueue's, and returns the write sequence after the
// call; ok is false for a deduplicated workflow (nothing written, no
// sequence) and a reply without one.
func (l *Ledger) observeWorkflow(ctx context.Context, q string, seen seqSeen, r *reply) (seq int64, ok bool) {
	if r.err != nil || r.len() < 9 || r.int(0) == 0 {
		return 0, false
	}
	s := seqReply{seq: r.int(3), bumped: r.int(4), enqueued: r.int(5), created: r.int(7), hist: r.str(8)}
	if r.err != nil {
		return 0, false
	}
	l.observe(ctx, q, seen, s)
	return s.seq, true
}

// checkStepOperations refuses w (ErrInvalid, before anything is written)
// when a step's operation id already names another job in its queue: the
// step would run an operation that ran, or runs, as that job. A step of a
// workflow enqueued before (the same step id) is not another job.
// wf_enqueue.lua checks again, for an enqueue racing this one.
func (l *Ledger) checkStepOperations(ctx context.Context, w *NewWorkflow) error {
	type look struct {
		step   *WorkflowStep
		named  string
		exists *redis.IntCmd
		holder *redis.StringCmd
	}
	var looks []look
	pipe := l.rdb.Pipeline()
	seen := map[[2]string]string{} // logical queue, operation id -> step
	for i := range w.Steps {
		s := &w.Steps[i]
		op := s.Job.OperationID
		if op == "" {
			continue
		}
		qo := [2]string{Logical(s.Job.Queue), op}
		if other, dup := seen[qo]; dup {
			return Invalid("steps %s and %s have the same operation id %q in queue %s: each step runs an operation of its own", other, s.Name, op, qo[0])
		}
		seen[qo] = s.Name
		lk := look{step: s, named: OpJobID(s.Job.Queue, op)}
		if lk.named != "" && lk.named != s.Job.ID {
			lk.exists = pipe.Exists(ctx, l.JobKey(s.Job.Queue, lk.named))
		}
		lk.holder = pipe.Get(ctx, l.opKey(s.Job.Queue, op))
		looks = append(looks, lk)
	}
	if len(looks) == 0 {
		return nil
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return notWritten(wrap("enqueue workflow "+w.ID+": reading whether its steps' operation ids name other jobs", err))
	}
	for _, lk := range looks {
		holder := lk.holder.Val()
		if lk.exists != nil && lk.exists.Val() == 1 {
			holder = lk.named
		}
		if holder != "" && holder != lk.step.Job.ID {
			return Invalid("step %s: operation id %q already names job %s in queue %s: a step runs an operation of its own (give it another operation id)",
				lk.step.Name, lk.step.Job.OperationID, holder, lk.step.Job.Queue)
		}
	}
	return nil
}

// autoMove makes the calls that write hand-over records move them at once
// (tests turn it off to leave them to an explicit MoveHandovers).
var autoMove = true

// moveAfter moves queue q's hand-over records after a call that wrote
// some; a failure leaves them to the maintenance leader.
func (l *Ledger) moveAfter(ctx context.Context, q string) {
	if autoMove {
		_, _ = l.MoveHandovers(ctx, q)
	}
}

// handoverBatch bounds the records one handover.lua call delivers.
const handoverBatch = 200

// MoveHandovers delivers queue q's workflow hand-over records to the
// queues they name (handover.lua, idempotent), then removes each record
// still as it was read (handover_ack.lua), and goes on with the queues
// whose steps wrote hand-over records in turn. A crash anywhere leaves
// records that the next call delivers again, which changes nothing already
// delivered. It returns how many records it delivered.
func (l *Ledger) MoveHandovers(ctx context.Context, q string) (int, error) {
	todo, seen, moved := []string{q}, map[string]int{}, 0
	for len(todo) > 0 {
		src := todo[0]
		todo = todo[1:]
		if seen[src]++; seen[src] > 8 {
			continue // a long cascade: the next call goes on
		}
		recs, err := l.rdb.HGetAll(ctx, l.handoverKey(src)).Result()
		if err != nil {
			return moved, wrap("read hand-overs of "+src, err)
		}
		if len(recs) == 0 {
			continue
		}
		fields := make([]string, 0, len(recs))
		for f := range recs {
			fields = append(fields, f)
		}
		sort.Strings(fields)
		byTarget := map[string][]string{}
		var targets []string
		for _, f := range fields {
			parts := strings.SplitN(f, "\n", 3)
			if len(parts) != 3 || ValidateQueueRef(parts[0]) != nil {
				continue
			}
			if _, ok := byTarget[parts[0]]; !ok {
				targets = append(targets, parts[0])
			}
			byTarget[parts[0]] = append(byTarget[parts[0]], f)
		}
		for _, t := range targets {
			fs := byTarget[t]
			for i := 0; i < len(fs); i += handoverBatch {
				chunk := fs[i:min(i+handoverBatch, len(fs))]
				args := []any{l.cfg.Retention.Milliseconds()}
				ack := []any{}
				for _, f := range chunk {
					parts := strings.SplitN(f, "\n", 3)
					what, _, _ := strings.Cut(recs[f], " ")
					args = append(args, parts[1], parts[2], what)
					ack = append(ack, f, recs[f])
				}
				n, err := l.run(ctx, l.lanes.other, handoverScript, t, args...).Int64Slice()
				if err != nil {
					return moved, wrap("deliver hand-overs to "+t, err)
				}
				if err := l.run(ctx, l.lanes.other, handoverAckScript, src, ack...).Err(); err != nil {
					return moved, wrap("acknowledge hand-overs of "+src, err)
				}
				moved += len(chunk)
				if len(n) > 0 && n[0] > 0 {
					todo = append(todo, t)
				}
			}
		}
	}
	return moved, nil
}

// HandoverQueues returns the queues among qs holding hand-over records
// (one pipelined HLEN each), for the maintenance leader.
func (l *Ledger) HandoverQueues(ctx context.Context, qs []string) ([]string, error) {
	cmds := make([]*redis.IntCmd, len(qs))
	_, err := l.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, q := range qs {
			cmds[i] = p.HLen(ctx, l.handoverKey(q))
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, wrap("read hand-overs", err)
	}
	var out []string
	for i, c := range cmds {
		if c.Val() > 0 {
			out = append(out, qs[i])
		}
	}
	return out, nil
}

// WorkflowQueues returns the queues among qs holding any key the
// maintenance leader's hand-over pass reads (open workflows, hand-over
// records, parts of uncommitted workflows, workflows changed): one pipelined EXISTS of those
// keys per queue, so an idle queue costs one command. Redis deletes an
// empty set, hash or sorted set, so a queue left out has nothing there for
// the pass. A queue whose read failed is returned (the pass's own reads
// report its error); the error is returned only when every read failed.
func (l *Ledger) WorkflowQueues(ctx context.Context, qs []string) ([]string, error) {
	if len(qs) == 0 {
		return nil, nil
	}
	pipe := l.rdb.Pipeline()
	cmds := make([]*redis.IntCmd, len(qs))
	for i, q := range qs {
		p := l.prefix(q)
		cmds[i] = pipe.Exists(ctx, p+"wf_open", l.handoverKey(q), p+"wf_parts", p+"wf_part", p+changedKey)
	}
	_, _ = pipe.Exec(ctx) // read per command below
	var out []string
	var first error
	ok := false
	for i, c := range cmds {
		n, err := c.Result()
		if err != nil && first == nil {
			first = wrap("workflow keys of "+qs[i], err)
		}
		ok = ok || err == nil
		if err != nil || n > 0 {
			out = append(out, qs[i])
		}
	}
	if !ok {
		return nil, first // every queue failed: the connection, most likely
	}
	return out, nil
}

// changedKey is a queue's set of the workflows one of its scripts may have
// changed the state of since the maintenance leader last looked
// ('<home queue>\n<workflow id>'): workflow.lua's wf_settled adds the
// workflow of each step it ends or reopens, wf_enqueue.lua a workflow it
// commits, and the scripts that cancel, reopen or abandon a workflow's
// record theirs.
const changedKey = "wf_changed"

// changedMember is workflow id's (home queue q) entry in changedKey.
func changedMember(q, id string) string { return q + "\n" + id }

// changedBatch bounds the entries one SPOP of ChangedWorkflows takes.
const changedBatch = 1000

// ChangedWorkflows takes the workflows whose state the scripts may have
// changed since the last call out of the change sets of qs (one pipelined
// SPOP per queue, again for a queue that had more), and returns them
// without duplicates, each with its home queue. An entry is removed as it
// is read: a script changing the workflow later adds it again, so a caller
// that reads the workflow after this call misses no change; one whose read
// fails keeps the entry itself. Changes no script makes (a step's job
// deleted by hand) are not noted: the caller reads every open workflow now
// and then. An error is returned only when every queue's read failed.
func (l *Ledger) ChangedWorkflows(ctx context.Context, qs []string) ([]WorkflowRef, error) {
	var out []WorkflowRef
	seen := map[string]bool{}
	var first error
	ok := false
	todo := qs
	for round := 0; len(todo) > 0 && round < 100; round++ {
		pipe := l.rdb.Pipeline()
		cmds := make([]*redis.StringSliceCmd, len(todo))
		for i, q := range todo {
			cmds[i] = pipe.SPopN(ctx, l.prefix(q)+changedKey, changedBatch)
		}
		_, _ = pipe.Exec(ctx) // read per command below
		var more []string
		for i, c := range cmds {
			ms, err := c.Result()
			if err != nil && !errors.Is(err, redis.Nil) {
				if first == nil {
					first = wrap("changed workflows of "+todo[i], err)
				}
				continue
			}
			ok = true
			for _, m := range ms {
				home, id, found := strings.Cut(m, "\n")
				if !found || home == "" || id == "" || seen[m] || ValidateQueueRef(home) != nil {
					continue // written by hand: nothing to read
				}
				seen[m] = true
				out = append(out, WorkflowRef{Home: home, ID: id})
			}
			if len(ms) == changedBatch {
				more = append(more, todo[i])
			}
		}
		todo = more
	}
	if !ok && len(qs) > 0 {
		return nil, first
	}
	return out, nil
}

// NoteWorkflowChanged adds workflow id of home queue q to q's change set
// (ChangedWorkflows), so that the next pass reads it: for a read that
// failed after its entry was taken.
func (l *Ledger) NoteWorkflowChanged(ctx context.Context, q, id string) error {
	return wrap("note workflow "+id, l.rdb.SAdd(ctx, l.prefix(q)+changedKey, changedMember(q, id)).Err())
}

// WorkflowInfo is a workflow's record as stored (its steps' states are
// read from their jobs).
type WorkflowInfo struct {
	ID, Home, OperationID string
	Record                []byte
	Created               int64  // ms
	CancelledBy           string // the operator who cancelled it ("" none)
	// Ends are the final states the maintenance leader saw its steps in
	// (SettleWorkflow), by step name: what a step whose job expired ended.
	Ends map[string]State
	// Lost are the steps the maintenance leader found without a job
	// record while the workflow ran (SettleWorkflow), by step name: the
	// reason (LostReason). Each counts as dead (Ends).
	Lost map[string]string
	// seen is the mark of the SettleWorkflow call that counted it started,
	// final the outcome counted and settled the mark of the call that
	// counted it, lostBy those of the calls that ended its steps lost ("" none
	// yet).
	seen, final, settled string
	lostBy               map[string]string
}

// endField prefixes the record's fields holding its steps' ends, lostField
// those holding why a step was found lost and
// lostByField those holding the mark of the call that ended a step lost.
const (
	endField    = "end:"
	lostField   = "lost:"
	lostByField = "lostby:"
)

// LostReason is why the maintenance leader ended a workflow step lost: its
// job record was gone (deleted by hand, or lost with a Redis that came
// back with older data) while its workflow ran.
const LostReason = "job record missing"

// StepLost is the state a workflow read reports for a lost step (its job
// record gone while its workflow ran): it counts as dead.
const StepLost State = "lost"

// StepUnreachable is the state a workflow read reports for a step whose
// job could not be read (on Redis Cluster, its master down).
const StepUnreachable State = "unreachable"

// StepState is the state to count step name in, given the state its job
// was read in: a job that expired ("missing") or could not be read
// (StepUnreachable) counts as the end recorded for it, when one was.
func (w *WorkflowInfo) StepState(name string, s State) State {
	if s == "missing" || s == StepUnreachable {
		if end, ok := w.Ends[name]; ok {
			return end
		}
	}
	return s
}

// Workflow reads the record of workflow id whose home queue is q; nil
// when there is none.
func (l *Ledger) Workflow(ctx context.Context, q, id string) (*WorkflowInfo, error) {
	h, err := l.rdb.HGetAll(ctx, l.workflowKey(q, id)).Result()
	if err != nil {
		return nil, wrap("read workflow "+id, err)
	}
	if len(h) == 0 {
		return nil, nil
	}
	w := &WorkflowInfo{ID: id, Home: q, OperationID: h["op"], Record: []byte(h["def"]),
		Created: int64(atoi(h["created"])), CancelledBy: h["cancel"], Ends: map[string]State{}, Lost: map[string]string{},
		seen: h["seen"], final: h["final"], settled: h["settled"], lostBy: map[string]string{}}
	for f, v := range h {
		if name, ok := strings.CutPrefix(f, endField); ok {
			w.Ends[name] = State(v)
		} else if name, ok := strings.CutPrefix(f, lostField); ok {
			w.Lost[name] = v
		} else if name, ok := strings.CutPrefix(f, lostByField); ok {
			w.lostBy[name] = v
		}
	}
	return w, nil
}

// Workflows returns the ids of queue q's workflows (those whose home it
// is), newest first, from offset, at most n.
func (l *Ledger) Workflows(ctx context.Context, q string, offset, n int) ([]string, error) {
	ids, err := l.rdb.ZRevRange(ctx, l.workflowsKey(q), int64(offset), int64(offset+n-1)).Result()
	if err != nil {
		return nil, wrap("list workflows of "+q, err)
	}
	return ids, nil
}

// WorkflowRef names a workflow: its home queue, its id and when it was
// created (Unix ms).
type WorkflowRef struct {
	Home, ID string
	Created  int64
}

// NewestWorkflows returns the newest n workflows of every queue of qs
// (those whose home it is), newest first: one pipelined ZREVRANGE per
// queue, n at most from each. When some queues could not be read (on
// Redis Cluster, their master down), it returns the others' with a
// *PartialError naming them.
func (l *Ledger) NewestWorkflows(ctx context.Context, qs []string, n int) ([]WorkflowRef, error) {
	cmds := make([]*redis.ZSliceCmd, len(qs))
	_, _ = l.rdb.Pipelined(ctx, func(p redis.Pipeliner) error { // read per command below
		for i, q := range qs {
			cmds[i] = p.ZRevRangeWithScores(ctx, l.workflowsKey(q), 0, int64(n-1))
		}
		return nil
	})
	errs := make([]error, len(qs))
	for i, c := range cmds {
		errs[i] = wrap("list workflows of "+qs[i], c.Err())
	}
	perr := partialOf(ctx, qs, errs)
	if partialOnly(perr) != nil {
		return nil, perr
	}
	var out []WorkflowRef
	for i, c := range cmds {
		for _, z := range c.Val() {
			id, _ := z.Member.(string)
			out = append(out, WorkflowRef{Home: qs[i], ID: id, Created: int64(z.Score)})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Created > out[j].Created })
	return out[:min(n, len(out))], perr
}

// CountWorkflows returns how many workflows the queues of qs hold (those
// whose home each is, kept until pruned): one pipelined ZCARD per queue.
// When some queues could not be read (on Redis Cluster, their master
// down), it returns the others' count with a *PartialError naming them.
func (l *Ledger) CountWorkflows(ctx context.Context, qs []string) (int, error) {
	cmds := make([]*redis.IntCmd, len(qs))
	_, _ = l.rdb.Pipelined(ctx, func(p redis.Pipeliner) error { // read per command below
		for i, q := range qs {
			cmds[i] = p.ZCard(ctx, l.workflowsKey(q))
		}
		return nil
	})
	errs := make([]error, len(qs))
	n := 0
	for i, c := range cmds {
		errs[i] = wrap("count workflows of "+qs[i], c.Err())
		n += int(c.Val())
	}
	perr := partialOf(ctx, qs, errs)
	if partialOnly(perr) != nil {
		return 0, perr
	}
	return n, perr
}

// Output reads the output job id of queue q recorded with its success and
// its redacted display ("" each when none).
func (l *Ledger) Output(ctx context.Context, q, id string) (raw, display string, err error) {
	if siblingID(id) {
		return "", "", noJob(q, id)
	}
	v, err := l.rdb.HMGet(ctx, l.JobKey(q, id), "output", "output_shown", "state").Result()
	if err != nil {
		return "", "", wrap("read output of "+id, err)
	}
	if v[2] == nil {
		return "", "", fmt.Errorf("%w: job %s in queue %s", ErrNotFound, ShownID(id), q)
	}
	raw, _ = v[0].(string)
	display, _ = v[1].(string)
	if display == "" {
		display = raw
	}
	return raw, display, nil
}

var (
	//go:embed lua/workflow.lua
	workflowLib string
	//go:embed lua/wf_enqueue.lua
	wfEnqueueSrc string
	//go:embed lua/handover.lua
	handoverSrc string
	//go:embed lua/handover_ack.lua
	handoverAckSrc string

	wfEnqueueScript   = script("wf_enqueue", wfEnqueueSrc)
	handoverScript    = script("handover", handoverSrc)
	handoverAckScript = script("handover_ack", handoverAckSrc)
)

// WorkflowDef is a workflow's record (NewWorkflow.Record): its name and
// steps in definition order.
type WorkflowDef struct {
	Name  string    `json:"name,omitempty"`
	Steps []StepDef `json:"steps"`
}

// StepDef is one step of a WorkflowDef.
type StepDef struct {
	Name      string   `json:"name"`
	Queue     string   `json:"queue"`
	ID        string   `json:"id"`
	Kind      string   `json:"kind"`
	Deps      []string `json:"deps,omitempty"`
	AllowFail []string `json:"allow_fail,omitempty"`
}

// Def decodes the record.
func (w *WorkflowInfo) Def() (*WorkflowDef, error) {
	var d WorkflowDef
	if err := json.Unmarshal(w.Record, &d); err != nil {
		return nil, fmt.Errorf("%w: workflow %s's record: %v", ErrReply, w.ID, err)
	}
	return &d, nil
}

// StepOf finds step of the workflow that job id of queue q belongs to,
// which must be one that job's step depends on, directly or through other
// steps (ErrInvalid otherwise: another step's output may not be final).
// A workflow's definition never changes once written, so it is read (one
// HGET) and decoded once per workflow and kept (defs): a join reading the
// outputs of its many dependencies reads one job field per dependency.
func (l *Ledger) StepOf(ctx context.Context, q, id, step string) (StepRef, error) {
	v, err := l.rdb.HMGet(ctx, l.JobKey(q, id), "wf", "wf_home", "step").Result()
	if err != nil {
		return StepRef{}, wrap("read job "+id, err)
	}
	wf, _ := v[0].(string)
	home, _ := v[1].(string)
	own, _ := v[2].(string)
	if wf == "" || home == "" {
		return StepRef{}, invalid("job %s is not a workflow step", id)
	}
	def, err := l.defs.get(home+"\x00"+wf, func() (*WorkflowDef, error) {
		raw, err := l.rdb.HGet(ctx, l.workflowKey(home, wf), "def").Result()
		if errors.Is(err, redis.Nil) {
			return nil, NotFound("workflow " + wf)
		}
		if err != nil {
			return nil, wrap("read workflow "+wf, err)
		}
		return (&WorkflowInfo{ID: wf, Record: []byte(raw)}).Def()
	})
	if err != nil {
		return StepRef{}, err
	}
	byName := make(map[string]*StepDef, len(def.Steps))
	for i := range def.Steps {
		byName[def.Steps[i].Name] = &def.Steps[i]
	}
	want, ok := byName[step]
	if !ok {
		return StepRef{}, invalid("workflow %s has no step %q", wf, step)
	}
	// walk up from the job's own step to its dependencies' dependencies
	seen, todo := map[string]bool{}, []string{own}
	for len(todo) > 0 {
		s := byName[todo[len(todo)-1]]
		todo = todo[:len(todo)-1]
		if s == nil {
			continue
		}
		for _, d := range s.Deps {
			if d == step {
				return StepRef{Queue: want.Queue, ID: want.ID}, nil
			}
			if !seen[d] {
				seen[d] = true
				todo = append(todo, d)
			}
		}
	}
	return StepRef{}, invalid("step %q of workflow %s does not depend on step %q (After): its output may not be final", own, wf, step)
}

// defCache keeps the definitions of the workflows read last (at most
// maxDefs; the oldest read leaves first).
type defCache struct {
	mu    sync.Mutex
	defs  map[string]*WorkflowDef
	order []string
}

// maxDefs bounds a ledger's cache of workflow definitions.
const maxDefs = 64

// get returns the definition cached under key, else read's (kept when it
// succeeds).
func (c *defCache) get(key string, read func() (*WorkflowDef, error)) (*WorkflowDef, error) {
	c.mu.Lock()
	d, ok := c.defs[key]
	c.mu.Unlock()
	if ok {
		return d, nil
	}
	d, err := read()
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.defs == nil {
		c.defs = map[string]*WorkflowDef{}
	}
	if _, ok := c.defs[key]; !ok {
		if len(c.order) >= maxDefs {
			delete(c.defs, c.order[0])
			c.order = c.order[1:]
		}
		c.defs[key] = d
		c.order = append(c.order, key)
	}
	return d, nil
}

// FindWorkflow returns the home queue of workflow id ("" when no
// registered queue holds it): one pipelined ZSCORE per queue. When some
// queues could not be read (on Redis Cluster, their master down), the
// error is a *PartialError naming them, with the home when a queue read
// holds it (callers that need every queue read check the error first).
func (l *Ledger) FindWorkflow(ctx context.Context, id string) (string, error) {
	qs, err := l.Queues(ctx)
	if err != nil {
		return "", err
	}
	cmds := make([]*redis.FloatCmd, len(qs))
	_, _ = l.rdb.Pipelined(ctx, func(p redis.Pipeliner) error { // read per command below
		for i, q := range qs {
			cmds[i] = p.ZScore(ctx, l.workflowsKey(q), id)
		}
		return nil
	})
	errs := make([]error, len(qs))
	home := ""
	for i, c := range cmds {
		switch err := c.Err(); {
		case err == nil && home == "":
			home = qs[i]
		case err != nil && !errors.Is(err, redis.Nil):
			errs[i] = wrap("find workflow "+id+" in "+qs[i], err)
		}
	}
	err = partialOf(ctx, qs, errs)
	if partialOnly(err) != nil {
		return "", err
	}
	return home, err
}

// MarkWorkflowCancelled records on workflow id's record (home queue q)
// that actor cancelled it, unless an operator already did (the first one
// stays). A pruned record is not written again (ErrNotFound), and one the
// maintenance leader settled succeeded or failed (SettleWorkflow) is
// finished and left as it is (ErrWrongState).
func (l *Ledger) MarkWorkflowCancelled(ctx context.Context, q, id, actor string) error {
	r, err := l.durableWrite(ctx, markCancelScript, []string{l.workflowKey(q, id), l.prefix(q) + changedKey}, actor, changedMember(q, id))
	r, ack, err := unacked(r, err)
	v, _ := r.(string)
	switch {
	case err != nil:
		return wrap("cancel workflow "+id, err)
	case v == "missing":
		return NotFound("workflow " + id)
	case v != "ok":
		return fmt.Errorf("%w: workflow %s %s", ErrWrongState, id, v)
	}
	return actionErr("cancel workflow "+id, ack)
}

var markCancelScript = luafunc.NewPlain(`
if redis.call('EXISTS', KEYS[1]) == 0 then return 'missing' end
local final = redis.call('HGET', KEYS[1], 'final')
if final and final ~= 'cancelled' then return final end
if redis.call('HSETNX', KEYS[1], 'cancel', ARGV[1]) == 1 then
  redis.pcall('SADD', KEYS[2], ARGV[2]) -- a note for the next pass (a key of another type: none)
end
return 'ok'`)

// The outcomes of a workflow (WorkflowOutcome).
const (
	WorkflowRunning   = "running"
	WorkflowSucceeded = "succeeded"
	WorkflowFailed    = "failed"
	WorkflowCancelled = "cancelled"
)

// WorkflowOutcome derives a workflow's state from its steps' states:
// running until every step is final (a missing step, expired, counts as
// final), then succeeded when all succeeded, else cancelled when an
// operator cancelled it, else failed.
func WorkflowOutcome(states []State, cancelledBy string) string {
	ok := true
	for _, s := range states {
		if !s.Final() && s != "missing" {
			return WorkflowRunning
		}
		if s != Succeeded {
			ok = false
		}
	}
	switch {
	case ok:
		return WorkflowSucceeded
	case cancelledBy != "":
		return WorkflowCancelled
	}
	return WorkflowFailed
}

// OpenWorkflows returns, for each of qs, the ids of the queue's workflows
// whose outcome has not been counted yet (SettleWorkflow), in one pipelined
// round trip. A queue whose read failed has no ids; the error joins every
// such queue's.
func (l *Ledger) OpenWorkflows(ctx context.Context, qs []string) ([][]string, error) {
	pipe := l.rdb.Pipeline()
	cmds := make([]*redis.StringSliceCmd, len(qs))
	for i, q := range qs {
		cmds[i] = pipe.SMembers(ctx, l.prefix(q)+"wf_open")
	}
	_, _ = pipe.Exec(ctx) // read per command below
	out := make([][]string, len(qs))
	var errs []error
	for i, c := range cmds {
		ids, err := c.Result()
		if err != nil {
			errs = append(errs, wrap("open workflows of "+qs[i], err))
			continue
		}
		out[i] = ids
	}
	return out, errors.Join(errs...)
}

// LostStep is a workflow step SettleWorkflow found lost: its job record
// was gone while the workflow ran, and no end was recorded for it.
type LostStep struct {
	Name, Queue, ID string
}

// SettleWorkflow looks at open workflow id of home queue q for the
// maintenance leader's counts: started is true the first time any caller
// looks at it, outcome is its final state the first time a caller finds it
// final (then it leaves the open set), "" otherwise. Each is reported once
// whichever leader asks (HSETNX on the record), so the counters built on
// it count each workflow once. The caller's mark (not empty), unique to
// the call, is written with each of them: a call that failed (a reply lost, the
// server having written) is made again with the same mark, and reports
// what the failed call wrote; a command go-redis re-sends reads its own
// mark back.
//
// A step whose job record is gone with no end recorded for it (deleted by
// hand, or lost with a Redis that came back with older data: a record is
// written only after every step's job, so none is merely not yet written)
// is ended lost (lost, each once whichever leader asks): the record holds
// it dead (end:<step>) with LostReason (lost:<step>), and a hand-over
// record "lost" to each of its dependents, in q, which the caller delivers
// (MoveHandovers): a dependent still waiting for it hears a dead end, by
// the workflow's rules (cancelled unless it allows the step to fail); one
// that heard the step's end already is left as it is.
func (l *Ledger) SettleWorkflow(ctx context.Context, q, id, mark string) (started bool, outcome string, lost []LostStep, err error) {
	info, err := l.Workflow(ctx, q, id)
	if err != nil {
		return false, "", nil, err
	}
	if info == nil {
		return false, "", nil, wrap("settle workflow "+id, l.rdb.SRem(ctx, l.prefix(q)+"wf_open", id).Err())
	}
	own := func(v string) bool { return v != "" && v == mark }
	started = own(info.seen)
	if info.final != "" { // settled already (a change noted after), or by this mark's failed call
		if own(info.settled) {
			outcome = info.final
		}
		if def, err := info.Def(); err == nil {
			for _, s := range def.Steps {
				if own(info.lostBy[s.Name]) {
					lost = append(lost, LostStep{Name: s.Name, Queue: s.Queue, ID: s.ID})
				}
			}
		}
		return started, outcome, lost, wrap("settle workflow "+id, l.rdb.SRem(ctx, l.prefix(q)+"wf_open", id).Err())
	}
	wk := l.workflowKey(q, id)
	// A record read with the mark was seen already: no HSETNX, which would
	// write nothing, on each pass of a workflow that stays open.
	if info.seen == "" {
		seen, err := l.writeSeen(ctx, wk, mark)
		if err != nil {
			return false, "", nil, wrap("settle workflow "+id, err)
		}
		started = own(seen)
	}
	def, err := info.Def()
	if err != nil {
		return started, "", nil, err
	}
	refs := make([]StepRef, len(def.Steps))
	for i, s := range def.Steps {
		refs[i] = StepRef{Queue: s.Queue, ID: s.ID}
	}
	found, err := l.stepStates(ctx, refs)
	if err != nil {
		return started, "", nil, err
	}
	states := make([]State, len(def.Steps))
	var ends []any // final states not recorded yet: kept for when the job expires
	for i, s := range def.Steps {
		st := found[i]
		if st == "" {
			if own(info.lostBy[s.Name]) {
				lost = append(lost, LostStep{Name: s.Name, Queue: s.Queue, ID: s.ID}) // by this mark's failed call
			}
			if _, ended := info.Ends[s.Name]; !ended && !siblingID(s.ID) {
				end, err := l.endOnItsWay(ctx, q, id, s)
				if err != nil {
					return started, "", lost, err
				}
				if end != "" { // the next move records it
					states[i] = end
					continue
				}
				marked, err := l.markLost(ctx, q, id, def, s, mark)
				if err != nil {
					return started, "", lost, err
				}
				if marked {
					lost = append(lost, LostStep{Name: s.Name, Queue: s.Queue, ID: s.ID})
				}
				states[i] = Dead // marked now, or by another leader meanwhile
				continue
			}
			states[i] = info.StepState(s.Name, "missing")
			continue
		}
		states[i] = st
		if st.Final() && info.Ends[s.Name] != st {
			ends = append(ends, endField+s.Name, string(st))
		}
	}
	if len(ends) > 0 {
		if err := l.rdb.HSet(ctx, wk, ends...).Err(); err != nil {
			return started, "", lost, wrap("settle workflow "+id, err)
		}
	}
	out := WorkflowOutcome(states, info.CancelledBy)
	if out == WorkflowRunning {
		return started, "", lost, nil
	}
	// final: counted once (by the mark settled holds), then kept for
	// retention (PruneWorkflows)
	final, by, err := l.writeFinal(ctx, q, id, out, mark)
	if err != nil {
		return started, "", lost, wrap("settle workflow "+id, err)
	}
	if own(by) {
		outcome = final
	}
	return started, outcome, lost, nil
}

// writeSeen marks workflow record wk seen (counted started) with mark
// unless it is, and returns the mark it holds: in one transaction, or in
// durable mode one script followed by the wait for replicas (durableWrite).
func (l *Ledger) writeSeen(ctx context.Context, wk, mark string) (string, error) {
	if l.appendWait != nil {
		v, err := l.durableWrite(ctx, seenScript, []string{wk}, mark)
		s, _ := v.(string)
		return s, err
	}
	var seen *redis.StringCmd
	_, err := l.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSetNX(ctx, wk, "seen", mark)
		seen = p.HGet(ctx, wk, "seen")
		return nil
	})
	return seen.Val(), err
}

// writeFinal records outcome out of workflow id of home queue q with mark
// unless one is, moves it from the open set to the done index, and
// returns the outcome and mark the record holds; written as writeSeen.
// The done index holds when it finished on the namespace's time, the
// clock PruneWorkflows (and the jobs' own retention) measures it by, not
// this process's.
func (l *Ledger) writeFinal(ctx context.Context, q, id, out, mark string) (final, by string, err error) {
	wk := l.workflowKey(q, id)
	at, err := l.ReadTime(ctx)
	if err != nil {
		return "", "", err
	}
	now := at.UnixMilli()
	var v []any
	if l.appendWait != nil {
		r, err := l.durableWrite(ctx, finalScript, []string{wk, l.prefix(q) + "wf_done", l.prefix(q) + "wf_open"}, out, mark, now, id)
		if err != nil {
			return "", "", err
		}
		v, _ = r.([]any)
	} else {
		var settled *redis.SliceCmd
		_, err = l.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.HSetNX(ctx, wk, "final", out)
			p.HSetNX(ctx, wk, "settled", mark)
			p.ZAddNX(ctx, l.prefix(q)+"wf_done", redis.Z{Score: float64(now), Member: id})
			p.SRem(ctx, l.prefix(q)+"wf_open", id)
			settled = p.HMGet(ctx, wk, "final", "settled")
			return nil
		})
		if err != nil {
			return "", "", err
		}
		v = settled.Val()
	}
	if len(v) == 2 {
		final, _ = v[0].(string)
		by, _ = v[1].(string)
	}
	return final, by, nil
}

// seenScript is writeSeen's transaction in durable mode: it marks a
// workflow's record seen (counted started) with the
// caller's mark (ARGV 1) unless it is, and returns the mark it holds.
var seenScript = luafunc.NewPlain(`
redis.call('HSETNX', KEYS[1], 'seen', ARGV[1])
return redis.call('HGET', KEYS[1], 'seen')`)

// finalScript is writeFinal's transaction in durable mode: it records a
// workflow's outcome (ARGV 1) with the caller's mark
// (ARGV 2) unless one is, moves it from the open set (KEYS 3) to the done
// index (KEYS 2, at ARGV 3 ms) and returns the outcome and mark it holds.
var finalScript = luafunc.NewPlain(`
redis.call('HSETNX', KEYS[1], 'final', ARGV[1])
redis.call('HSETNX', KEYS[1], 'settled', ARGV[2])
redis.call('ZADD', KEYS[2], 'NX', ARGV[3], ARGV[4])
redis.call('SREM', KEYS[3], ARGV[4])
return redis.call('HMGET', KEYS[1], 'final', 'settled')`)

// durableWrite runs script s, a write outside the lanes (SettleWorkflow's
// counts, an operator's action), and, in durable mode, waits for replicas
// on the same connection: a write they did not acknowledge fails the call
// with an error matching durable.ErrUnacknowledged, the script's reply
// kept beside it, so the caller counts it only once it would survive a
// failover (SettleWorkflow's retry with the same mark reports it, or
// writes it again where a failover lost it) and tells an operator their
// action may be lost (actionErr). On Redis Cluster it is sent to the
// master owning keys[0].
func (l *Ledger) durableWrite(ctx context.Context, s *luafunc.Script, keys []string, args ...any) (any, error) {
	var on redis.Scripter = l.rdb
	if cc, ok := l.rdb.(*redis.ClusterClient); ok && l.appendWait != nil {
		node, err := cc.MasterForKey(ctx, keys[0])
		if err != nil {
			return nil, err
		}
		on = node
	}
	p, ok := on.(interface{ Pipeline() redis.Pipeliner })
	if !ok || l.appendWait == nil {
		return s.Run(ctx, on, keys, args...).Result()
	}
	pipe := p.Pipeline()
	cmd := s.Eval(ctx, pipe, keys, args...)
	check := l.appendWait(ctx, pipe)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	v, err := cmd.Result()
	if ack := check(); ack != nil && (err == nil || errors.Is(err, redis.Nil)) {
		return v, ack // it ran: its reply kept beside the shortfall
	}
	return v, err
}

// endOnItsWay returns the end step s of workflow id (home queue q) handed
// to the workflow's record through a hand-over record of its own queue not
// moved yet (workflow.lua's wf_end_to: a completer that stopped before its
// move), "" when there is none: its job may have expired meanwhile, and
// the end is not lost. The step's job was read gone before this read, so
// from then on its end is in that hand-over record or on the workflow's
// record, which markLost reads again.
func (l *Ledger) endOnItsWay(ctx context.Context, q, id string, s StepDef) (State, error) {
	if s.Queue == q {
		return "", nil // ended in the same script as its job
	}
	v, err := l.rdb.HGet(ctx, l.handoverKey(s.Queue), q+"\n"+wfEndID+id+"\n"+s.Name).Result()
	switch {
	case errors.Is(err, redis.Nil) || wrongType(err):
		return "", nil
	case err != nil:
		return "", wrap("read the end of step "+s.Name+" of workflow "+id, err)
	}
	end, _, _ := strings.Cut(v, " ")
	if st := State(end); st.Final() {
		return st, nil
	}
	return "", nil
}

// wfEndID prefixes the job id of a hand-over record that carries a step's
// end to its workflow's record (WF_END in workflow.lua).
const wfEndID = "@wf:"

// markLost ends step s of workflow id (home queue q, definition def) lost
// (lostScript) with mark: true when a call with mark did, false when the
// step had an end recorded already (another leader, or its job ended and
// expired since the read) or the workflow was settled or pruned meanwhile.
func (l *Ledger) markLost(ctx context.Context, q, id string, def *WorkflowDef, s StepDef, mark string) (bool, error) {
	at, err := l.ReadTime(ctx) // the namespace's time, as every time the ledger writes
	if err != nil {
		return false, wrap("end lost step "+s.Name+" of workflow "+id, err)
	}
	args := []any{endField + s.Name, lostField + s.Name, LostReason, at.UnixMilli(), lostByField + s.Name, mark}
	for _, d := range def.Steps {
		if slices.Contains(d.Deps, s.Name) {
			args = append(args, d.Queue+"\n"+d.ID+"\n"+s.Name)
		}
	}
	n, err := l.durableWrite(ctx, lostScript, []string{l.workflowKey(q, id), l.handoverKey(q)}, args...)
	if err != nil {
		return false, wrap("end lost step "+s.Name+" of workflow "+id, err)
	}
	return n == int64(1), nil
}

// lostScript records a lost step on its workflow's record, once: dead
// (ARGV 1, end:<step>) with its reason (ARGV 2, 3) and the caller's mark
// (ARGV 5, 6), and a hand-over record "lost <ms>" (ARGV 4) in the home
// queue for each of its dependents (ARGV from 7: '<queue>\n<job id>\n<step>'),
// in one script, so a crash leaves either both or neither. A run finding
// the step ended with its own mark (go-redis re-sent it) returns 1 again.
// It fails before its first write when the hand-over hash holds another
// type (ErrForeignKey).
var lostScript = luafunc.NewPlain(keyGuardLua + `
key_guard(KEYS[1], 'hash', KEYS[2], 'hash')
if redis.call('EXISTS', KEYS[1]) == 0 or redis.call('HEXISTS', KEYS[1], 'final') == 1 then return 0 end
if redis.call('HSETNX', KEYS[1], ARGV[1], 'dead') == 0 then
  return redis.call('HGET', KEYS[1], ARGV[5]) == ARGV[6] and 1 or 0
end
redis.call('HSET', KEYS[1], ARGV[2], ARGV[3], ARGV[5], ARGV[6])
for i = 7, #ARGV do redis.call('HSET', KEYS[2], ARGV[i], 'lost ' .. ARGV[4]) end
return 1`)

// stepStates returns the state of each of jobs refs ("" for one gone), a
// pipelined round trip of HGETs per stepChunk of them: the maintenance
// leader settles every open workflow on each pass, and reading whole
// records one round trip per step cost a 1 000-step workflow 1 000 round
// trips (and its payloads) per pass. A key of another type reads as
// review, as Get reads it.
func (l *Ledger) stepStates(ctx context.Context, refs []StepRef) ([]State, error) {
	out := make([]State, len(refs))
	for lo := 0; lo < len(refs); lo += stepChunk {
		chunk := refs[lo:min(lo+stepChunk, len(refs))]
		cmds := make([]*redis.StringCmd, len(chunk))
		pipe := l.rdb.Pipeline()
		for i, r := range chunk {
			if !siblingID(r.ID) {
				cmds[i] = pipe.HGet(ctx, l.JobKey(r.Queue, r.ID), "state")
			}
		}
		if _, err := pipe.Exec(ctx); err != nil && !wrongType(err) && !errors.Is(err, redis.Nil) {
			return nil, wrap("read step states", err)
		}
		for i, c := range cmds {
			if c == nil {
				continue
			}
			v, err := c.Result()
			switch {
			case wrongType(err):
				out[lo+i] = Review
			case errors.Is(err, redis.Nil):
			case err != nil:
				return nil, wrap("read step states", err)
			default:
				out[lo+i] = State(v)
			}
		}
	}
	return out, nil
}

// ReopenWorkflow puts workflow id of home queue q, settled final
// (SettleWorkflow), back among the open ones: a step of it runs again (an
// operator re-ran a failed step), so the maintenance leader settles it
// again when it finishes, and counts that outcome. It does nothing to a
// workflow still open or pruned, and is idempotent.
func (l *Ledger) ReopenWorkflow(ctx context.Context, q, id string) error {
	p := l.prefix(q)
	_, err := l.durableWrite(ctx, reopenScript, []string{l.workflowKey(q, id), p + "wf_done", p + "wf_open", p + changedKey}, id, changedMember(q, id))
	return wrap("reopen workflow "+id, err)
}

// reopenScript fails before its first write when the done index or the
// open set holds another type (ErrForeignKey): clearing the outcome alone
// would leave the workflow neither open nor done, for good.
var reopenScript = luafunc.NewPlain(keyGuardLua + `
key_guard(KEYS[1], 'hash', KEYS[2], 'zset', KEYS[3], 'set', KEYS[4], 'set')
if redis.call('HDEL', KEYS[1], 'final') == 0 then return 0 end
redis.call('HDEL', KEYS[1], 'settled')
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('SADD', KEYS[3], ARGV[1])
redis.call('SADD', KEYS[4], ARGV[2])
return 1`)

// reopenStep reopens the workflow of job id of queue q (ReopenWorkflow),
// when it is a step of one: its re-run from a final state (Decide) made
// the workflow run again. A failure here is left to the pruner, which
// reopens a finished workflow it finds with a step not final.
func (l *Ledger) reopenStep(ctx context.Context, q, id string) {
	v, err := l.rdb.HMGet(ctx, l.JobKey(q, id), "wf", "wf_home").Result()
	if err != nil {
		return
	}
	wf, _ := v[0].(string)
	home, _ := v[1].(string)
	if wf != "" && home != "" {
		_ = l.ReopenWorkflow(ctx, home, wf)
	}
}

// pruneWorkflowBatch bounds the finished workflows one PruneWorkflows call
// looks at.
const pruneWorkflowBatch = 100

// PruneWorkflows deletes the records of queue q's workflows that finished
// (SettleWorkflow found them final) more than the retention before now and
// whose steps' jobs have all expired: the record, its operation id (a
// later enqueue with it makes a new workflow) and its index entries. A
// finished workflow with a step still kept (an operator re-ran it) is
// looked at again a retention later, and one with a step not final (it
// runs again) is reopened (ReopenWorkflow). It returns how many it deleted.
func (l *Ledger) PruneWorkflows(ctx context.Context, q string, now time.Time) (int, error) {
	done := l.prefix(q) + "wf_done"
	cut := strconv.FormatInt(now.Add(-l.cfg.Retention).UnixMilli(), 10)
	ids, err := l.rdb.ZRangeByScore(ctx, done, &redis.ZRangeBy{Min: "-inf", Max: "(" + cut, Count: pruneWorkflowBatch}).Result()
	if err != nil {
		return 0, wrap("prune workflows of "+q, err)
	}
	n := 0
	for _, id := range ids {
		info, err := l.Workflow(ctx, q, id)
		if err != nil {
			return n, err
		}
		if info != nil {
			kept, running, err := l.stepsKept(ctx, info)
			if err != nil {
				return n, err
			}
			if running {
				if err := l.ReopenWorkflow(ctx, q, id); err != nil {
					return n, err
				}
				continue
			}
			if kept {
				if err := l.rdb.ZAddXX(ctx, done, redis.Z{Score: float64(now.UnixMilli()), Member: id}).Err(); err != nil {
					return n, wrap("prune workflows of "+q, err)
				}
				continue
			}
		}
		_, err = l.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Del(ctx, l.workflowKey(q, id))
			if info != nil && info.OperationID != "" {
				p.Del(ctx, l.prefix(q)+"wfop:"+info.OperationID)
			}
			p.ZRem(ctx, l.workflowsKey(q), id)
			p.ZRem(ctx, done, id)
			p.SRem(ctx, l.prefix(q)+"wf_open", id)
			return nil
		})
		if err != nil {
			return n, wrap("prune workflow "+id, err)
		}
		n++
	}
	return n, nil
}

// stepsKept reports whether any step of the workflow still has its job,
// and whether any such job is not final (the workflow runs again).
func (l *Ledger) stepsKept(ctx context.Context, info *WorkflowInfo) (kept, running bool, err error) {
	def, err := info.Def()
	if err != nil {
		return false, false, err
	}
	cmds := make([]*redis.StringCmd, len(def.Steps))
	_, err = l.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, s := range def.Steps {
			cmds[i] = p.HGet(ctx, l.JobKey(s.Queue, s.ID), "state")
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return false, false, wrap("read workflow "+info.ID+"'s steps", err)
	}
	for _, c := range cmds {
		if c.Err() != nil {
			continue // expired
		}
		kept = true
		if !State(c.Val()).Final() {
			running = true
		}
	}
	return kept, running, nil
}
