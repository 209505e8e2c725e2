package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"

	"github.com/fencedq/fencedq/examples/bank"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/workflow"
)

// overdraftCents is more than all accounts hold together: such a transfer
// must end dead (insufficient funds), never applied.
const overdraftCents = 1_000_000_000_000

// operation is one transfer the workload submitted, with what the queue
// answered.
type operation struct {
	ID        string
	Args      bank.Transfer
	Overdraft bool
	// Queues the operation was submitted to (transfers; maybe priority).
	Queues []string

	// Filled by the submitters, under workload.mu.
	Submissions int
	Jobs        map[string]string // queue -> job id the ledger returned first
	Confirmed   map[string]bool   // queue -> at least one submission accepted
	// Conflicts notes a deduplicated submission that returned another job
	// id than the first (a violation, unless the first job was lost in a
	// failover: then the ledger no longer knew the operation id); Others
	// holds those other ids per queue.
	Conflicts []string
	Others    map[string][]string
	// AckedAt is when a submission to each queue was first acknowledged.
	AckedAt map[string]time.Time
}

// submission is one Enqueue call to make.
type submission struct {
	op    *operation
	queue string
}

// enqueuer submits one submission; it returns whether it was deduplicated.
type enqueuer func(ctx context.Context, op *operation, queue string) (jobID string, dedup bool, err error)

// workload generates and submits transfers.
type workload struct {
	o        *options
	accounts []string
	enqueue  enqueuer

	rng   *rand.Rand // generator goroutine only
	queue chan submission
	wg    sync.WaitGroup

	mu  sync.Mutex
	ops []*operation

	submissions    atomic.Int64
	duplicates     atomic.Int64 // submissions of an operation id submitted before
	concurrentDups atomic.Int64 // duplicate pairs submitted at the same moment
	priorityCopies atomic.Int64
	overdrafts     atomic.Int64
	confirmed      atomic.Int64
	deduplicated   atomic.Int64 // submissions the queue answered as duplicates
	enqueueErrors  atomic.Int64 // failed Enqueue calls (retried)
	neverConfirmed atomic.Int64
}

// newWorkload prepares a workload submitting through enq.
func newWorkload(o *options, accounts []string, enq enqueuer) *workload {
	return &workload{
		o: o, accounts: accounts, enqueue: enq,
		rng:   rand.New(rand.NewPCG(o.Seed, 0x5eed)),
		queue: make(chan submission, 1<<16),
	}
}

// fencedEnqueuer submits through jobs.Client.
func fencedEnqueuer(c *jobs.Client, o *options) enqueuer {
	return func(ctx context.Context, op *operation, queue string) (string, bool, error) {
		opts := append([]jobs.Option{jobs.Queue(queue), jobs.OperationID(op.ID)}, flowOptions(o, op.Args.To)...)
		res, err := c.Enqueue(ctx, op.Args, opts...)
		if err != nil {
			return "", false, err
		}
		return res.JobID, res.Deduplicated, nil
	}
}

// workflowEnqueuer submits each operation as a workflow whose first step
// is the transfer (the operation's job, its operation id the operation's):
// transfer → entry → notify, the notification in the priority queue.
func workflowEnqueuer(c *jobs.Client, o *options) enqueuer {
	return func(ctx context.Context, op *operation, queue string) (string, bool, error) {
		w := workflow.New("transfer").
			Add("transfer", op.Args, workflow.Options(append([]jobs.Option{jobs.Queue(queue), jobs.OperationID(op.ID)}, flowOptions(o, op.Args.To)...)...)).
			Add("entry", wfStep{Op: op.ID, Step: "entry"}, workflow.After("transfer"), workflow.Options(jobs.Queue(queue))).
			Add("notify", wfStep{Op: op.ID, Step: "notify"}, workflow.After("entry"), workflow.Options(jobs.Queue(priorityQueue)))
		res, err := workflow.Enqueue(ctx, c, w, workflow.OperationID(workflowOp(op.ID)))
		if err != nil {
			return "", false, err
		}
		return res.Steps["transfer"].JobID, res.Deduplicated, nil
	}
}

// workflowOp is the operation id of operation op's workflow.
func workflowOp(op string) string { return "wf:" + op }

// baselineEnqueuer submits through a plain asynq.Client: the operation id
// is the task id and completed tasks are retained, which is how an asynq
// user deduplicates.
func baselineEnqueuer(c *asynq.Client, namespace string, timeout time.Duration) enqueuer {
	return func(ctx context.Context, op *operation, queue string) (string, bool, error) {
		payload, _ := json.Marshal(op.Args)
		_, err := c.EnqueueContext(ctx, asynq.NewTask("transfer", payload),
			asynq.TaskID(op.ID), asynq.Queue(baselineQueue(namespace, queue)),
			asynq.MaxRetry(jobs.DefaultMaxRetries), asynq.Timeout(timeout), asynq.Retention(24*time.Hour))
		if errors.Is(err, asynq.ErrTaskIDConflict) {
			return op.ID, true, nil
		}
		if err != nil {
			return "", false, err
		}
		return op.ID, false, nil
	}
}

// newOperation makes a fresh transfer.
func (w *workload) newOperation() *operation {
	n := len(w.accounts)
	from := w.rng.IntN(n)
	to := (from + 1 + w.rng.IntN(n-1)) % n
	op := &operation{
		ID:        fmt.Sprintf("op-%08d-%04x", len(w.ops)+1, w.rng.Uint32()&0xffff),
		Args:      bank.Transfer{From: w.accounts[from], To: w.accounts[to], Cents: 1 + w.rng.Int64N(5000), Memo: "chaos"},
		Queues:    []string{transfersQueue},
		Jobs:      map[string]string{},
		Confirmed: map[string]bool{},
	}
	if w.rng.Float64() < w.o.Overdrafts {
		op.Args.Cents, op.Overdraft = overdraftCents, true
		w.overdrafts.Add(1)
	}
	if w.rng.Float64() < w.o.PriorityCopies && !w.o.Workflows {
		op.Queues = append(op.Queues, priorityQueue)
		w.priorityCopies.Add(1)
	}
	w.mu.Lock()
	w.ops = append(w.ops, op)
	w.mu.Unlock()
	return op
}

// generate submits transfers at the configured rate until ctx ends.
func (w *workload) generate(ctx context.Context) {
	every := time.Duration(float64(time.Second) / w.o.Rate)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		w.mu.Lock()
		known := len(w.ops)
		w.mu.Unlock()
		switch r := w.rng.Float64(); {
		case r < w.o.Dup/2 && known > 0:
			// A customer retry: an earlier operation id, maybe long done.
			w.mu.Lock()
			lo := max(0, known-2000)
			op := w.ops[lo+w.rng.IntN(known-lo)]
			w.mu.Unlock()
			w.duplicates.Add(1)
			w.push(submission{op: op, queue: op.Queues[0]})
		case r < w.o.Dup:
			// Two submissions of a new operation at the same moment.
			op := w.newOperation()
			w.duplicates.Add(1)
			w.concurrentDups.Add(1)
			for _, q := range op.Queues {
				w.push(submission{op: op, queue: q})
			}
			w.push(submission{op: op, queue: op.Queues[0]})
		default:
			op := w.newOperation()
			for _, q := range op.Queues {
				w.push(submission{op: op, queue: q})
			}
		}
	}
}

// push queues a submission for the submitters.
func (w *workload) push(s submission) {
	w.submissions.Add(1)
	w.queue <- s
}

// startSubmitters runs n goroutines that submit until the queue is closed
// and drained; each submission is retried until it is accepted or ctx ends.
func (w *workload) startSubmitters(ctx context.Context, n int) {
	for range n {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			for s := range w.queue {
				w.submit(ctx, s)
			}
		}()
	}
}

// submit makes one submission, retrying with the same operation id until
// the queue acknowledges it or ctx ends.
func (w *workload) submit(ctx context.Context, s submission) {
	w.mu.Lock()
	s.op.Submissions++
	w.mu.Unlock()
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		id, dedup, err := w.enqueue(cctx, s.op, s.queue)
		cancel()
		if err == nil {
			w.confirmed.Add(1)
			if dedup {
				w.deduplicated.Add(1)
			}
			w.mu.Lock()
			if prev, ok := s.op.Jobs[s.queue]; ok && prev != id {
				s.op.Conflicts = append(s.op.Conflicts, fmt.Sprintf("queue %s returned job %s, then %s", s.queue, prev, id))
				if !slices.Contains(s.op.Others[s.queue], id) {
					if s.op.Others == nil {
						s.op.Others = map[string][]string{}
					}
					s.op.Others[s.queue] = append(s.op.Others[s.queue], id)
				}
			} else {
				s.op.Jobs[s.queue] = id
			}
			if !s.op.Confirmed[s.queue] {
				if s.op.AckedAt == nil {
					s.op.AckedAt = map[string]time.Time{}
				}
				s.op.AckedAt[s.queue] = time.Now()
			}
			s.op.Confirmed[s.queue] = true
			w.mu.Unlock()
			return
		}
		if errors.Is(err, jobs.ErrInvalid) {
			panic(fmt.Sprintf("chaos workload built an invalid transfer: %v", err))
		}
		w.enqueueErrors.Add(1)
		select {
		case <-ctx.Done():
			w.neverConfirmed.Add(1)
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// jobIDs returns every job id the queue returned for q, the first first.
func (op *operation) jobIDs(q string) []string {
	id, ok := op.Jobs[q]
	if !ok {
		return nil
	}
	return append([]string{id}, op.Others[q]...)
}

// finish closes the queue and waits for the submitters.
func (w *workload) finish() {
	close(w.queue)
	w.wg.Wait()
}

// operations returns every operation generated.
func (w *workload) operations() []*operation {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]*operation(nil), w.ops...)
}
