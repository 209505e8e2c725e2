package fencedqtest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/internal/argtype"
	rules "github.com/fencedq/fencedq/internal/attempt"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
	"github.com/fencedq/fencedq/worker"
)

// DefaultTimeout bounds an inline handler whose job sets no timeout, as a
// pool's default worker.DefaultHandlerTimeout does.
const DefaultTimeout = worker.DefaultHandlerTimeout

// leaseWait is how long an inline attempt waits for a busy resource.
const leaseWait = 5 * time.Second

// Result is how an inline attempt ended.
type Result struct {
	// Err is what the handler returned (a panic: an error saying so).
	Err error
	// Outcome is what the attempt committed: worker.OutcomeSucceeded,
	// OutcomeRetry (the job is pending again, due at once), OutcomeDead,
	// OutcomeUncertain or OutcomeCancelled.
	Outcome string
	// Token is the attempt's fencing token (the resource lease's when the
	// kind names a resource).
	Token lease.Token
	// Record is the job after the commit.
	Record *jobs.Record
}

// Work enqueues args with opts, through a client built from the Env's
// jobs.Config, and runs the job's attempt inline with w (see WorkJob). An
// enqueue deduplicated to an existing job (its operation id known, or its
// unique key held) fails the test, naming that job.
func Work[T jobs.JobArgs](ctx context.Context, tb testing.TB, e *Env, w jobs.Worker[T], args T, opts ...jobs.Option) *Result {
	tb.Helper()
	e.check(tb)
	checkArgsType[T](tb)
	checkWorker(tb, w)
	checkContext(ctx, tb, "Work")
	res, err := e.client.Enqueue(ctx, args, opts...)
	if err != nil {
		tb.Fatalf("fencedqtest: enqueue: %v", err)
	}
	if res.Deduplicated {
		// by its operation id, or by a unique key the job holds (Result
		// does not say which)
		tb.Fatalf("fencedqtest: the enqueue was deduplicated to job %s (operation id %s), which holds its operation id or its unique key: nothing was enqueued to work", res.JobID, res.OperationID)
	}
	return WorkJob(ctx, tb, e, w, res.Queue, res.JobID)
}

// WorkJob runs one attempt of pending job id of queue (a partitioned
// queue's name finds the job's partition), due or not and the queue paused
// or not, inline with w, as a pool would: a fenced claim with
// a new token, the lease of the resource the job names, w.Work under a
// context carrying the fence (fence.FromContext), the lease
// (lease.FromContext) and the deadline (the job's timeout, else the one
// given to New with WithHandlerTimeout, else DefaultTimeout), then the
// outcome committed by the attempt's token, decided by the pool's rules (a
// Reconcile method or RetryOnTimeout on w, and an effect log given to New,
// count as they do in a pool; an effect another job applied is named in
// the reason as a pool names it). A retry is due at once, so a second WorkJob
// runs the next attempt. An operator's cancel of the job while the handler
// runs cancels its context, as a pool's renewal does (within 50ms,
// sooner where the server sends keyspace notifications): a retry then ends
// the job cancelled. A ctx that ends while the handler runs cuts it off
// as a pool's shutdown does: unless the handler still succeeded, the job is
// left uncertain. A handler that ends the goroutine (t.Fatal) gets its
// attempt committed as a pool commits it: a retry, or uncertain once its
// deadline passed or ctx ended. A handler that has not returned when the
// attempt's leases lapse (its deadline and a second) fails the test, the
// attempt committed uncertain, as a pool's lapsed lease leaves it. It
// fails the test if the job is not a pending job of T's
// kind, if T cannot encode as a JSON object or if w is nil (worker.Register
// refuses both).
func WorkJob[T jobs.JobArgs](ctx context.Context, tb testing.TB, e *Env, w jobs.Worker[T], queue, id string) *Result {
	tb.Helper()
	e.check(tb)
	checkArgsType[T](tb)
	checkWorker(tb, w)
	checkContext(ctx, tb, "WorkJob")
	// A partitioned queue's name finds the job's partition, as the
	// Inspector does; the attempt then runs on the partition.
	rec, err := e.client.Inspector().Get(ctx, queue, id)
	if err != nil {
		tb.Fatalf("fencedqtest: %v", err)
	}
	queue = rec.Queue
	if kind := kindOf[T](tb); rec.Kind != kind {
		tb.Fatalf("fencedqtest: job %s is of kind %s, not %s", id, rec.Kind, kind)
	}
	timeout := rec.Timeout
	if timeout <= 0 {
		timeout = e.timeout
	}
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ttl := timeout + time.Second // no renewals: the leases outlast the handler
	owner := "fencedqtest-" + uuid.NewString()[:8] + "/" + id
	c, err := e.ledger.ClaimJob(ctx, queue, id, owner, ttl)
	if err != nil {
		tb.Fatalf("fencedqtest: %v", err)
	}
	resource, tok := jobs.LeaseResource(c.ID, c.Resource), c.Token
	var held *lease.Lease
	if c.Resource != "" {
		wctx, cancel := context.WithTimeout(ctx, leaseWait)
		held, err = e.leases.AcquireWait(wctx, c.Resource, owner, ttl)
		cancel()
		if err != nil {
			e.putBack(ctx, c)
			tb.Fatalf("fencedqtest: job %s: leasing %s: %v (the job is pending again)", id, c.Resource, err)
		}
		defer func() { _ = e.leases.Release(context.WithoutCancel(ctx), held) }()
		tok = held.Token
	}
	deadline := time.Now().Add(timeout)
	actx, cancelAttempt := context.WithCancelCause(ctx)
	defer cancelAttempt(nil)
	hctx, cancel := context.WithDeadline(actx, deadline)
	defer cancel()
	stopWatch := e.watchCancel(actx, c, cancelAttempt)
	hctx = fence.NewContext(hctx, fence.Fence{Resource: resource, Token: tok, Owner: owner, OperationID: c.OperationID})
	hctx = lease.NewContext(hctx, &lease.Lease{Resource: resource, Owner: owner, Token: tok, Deadline: c.Deadline})
	hctx, endAttempt := ledger.WithAttempt(hctx, e.ledger, c.Queue, c.ID, c.Token)
	job := &jobs.Job[T]{
		ID: c.ID, Kind: c.Kind, Queue: c.Queue, OperationID: c.OperationID, Attempt: c.Attempt, MaxRetries: c.MaxRetries,
		Resource: resource, Token: tok, Owner: owner, Deadline: deadline, Headers: c.Headers,
	}
	// endOf is how the call ended with err, by the pool's rules.
	_, reconciles := w.(jobs.Reconciler[T])
	endOf := func(err error, malformed bool) rules.End {
		stopWatch()
		cause := context.Cause(actx)
		end := rules.End{
			Err: err, Malformed: malformed, Reconcilable: reconciles || e.effects != nil,
			TimedOut:  errors.Is(hctx.Err(), context.DeadlineExceeded) && !time.Now().Before(deadline),
			Cancelled: errors.Is(cause, errCancelled), Cause: cause,
		}
		end.Output, end.OutputDisplay = ledger.OutputOf(hctx)
		if r, ok := w.(jobs.RetryOnTimeout); ok {
			end.RetryOnTimeout = r.RetryOnTimeout()
		}
		if ctx.Err() != nil {
			// The caller's context ended mid-call, as a pool's does when it
			// shuts down: the handler was cut off, its effect unknown.
			end.Shutdown = "the caller's context ended mid-call"
		}
		return end
	}
	// The handler runs on a goroutine of its own, so that one that never
	// returns fails the test once the attempt's leases lapse instead of
	// hanging it; one that ends that goroutine (t.Fatal) ends the caller's
	// too, after the commit, as if it had run there.
	type ran struct {
		malformed bool
		err       error
	}
	out, exited := make(chan ran, 1), make(chan struct{})
	go func() {
		defer close(exited)
		malformed, err := run(hctx, w, job, c.Payload)
		out <- ran{malformed, err}
	}()
	lapse := time.NewTimer(time.Until(deadline.Add(time.Second))) // the leases' TTL
	defer lapse.Stop()
	var r ran
	select {
	case r = <-out:
	case <-exited:
		select {
		case r = <-out:
		default:
			endAttempt()
			e.goexited(ctx, c, held, endOf(errGoexit, false))
			runtime.Goexit()
		}
	case <-lapse.C:
		endAttempt()
		stopWatch()
		e.abandoned(ctx, c, held)
		tb.Fatalf("fencedqtest: job %s: the handler did not return by the end of its attempt's lease (its deadline %v and a second), "+
			"ignoring its context: the attempt is committed uncertain (its effect may still happen), as the lapsed lease leaves it in a pool",
			id, timeout)
	}
	malformed, err := r.malformed, r.err
	endAttempt()
	outcome := rules.NameApplier(ctx, e.ledger, queue, id, err, rules.Decide(endOf(err, malformed)))
	committed, err2 := e.ledger.Complete(context.WithoutCancel(ctx), queue, []ledger.Completion{{ID: c.ID, Token: c.Token, Fence: fenceOf(held), Outcome: outcome}})
	if err2 != nil {
		tb.Fatalf("fencedqtest: job %s: committing the outcome: %v", id, err2)
	}
	if !committed[0].Applied {
		tb.Fatalf("fencedqtest: job %s: the attempt's commit was fenced: another attempt (token %d) runs the job", id, committed[0].Current)
	}
	after, err2 := e.ledger.Get(context.WithoutCancel(ctx), queue, id)
	if err2 != nil {
		tb.Fatalf("fencedqtest: %v", err2)
	}
	name := string(committed[0].State)
	if committed[0].State == jobs.Pending {
		name = worker.OutcomeRetry
	}
	return &Result{Err: err, Outcome: name, Token: tok, Record: after}
}

// checkWorker fails the test when w is nil (a nil interface, pointer or
// func), as worker.Register refuses it with worker.ErrNilWorker.
func checkWorker[T jobs.JobArgs](tb testing.TB, w jobs.Worker[T]) {
	tb.Helper()
	if argtype.IsNil(w) {
		tb.Fatalf("fencedqtest: %v for kind %s: build the worker before calling Work or WorkJob", worker.ErrNilWorker, kindOf[T](tb))
	}
}

// run decodes payload into job's args as a pool does and calls w,
// recovering a panic; malformed reports args that do not decode or validate.
// As a pool, it replaces the sensitive values of a kind with sensitive
// fields in the texts of Validate's error, w's error and a panic (of
// Validate or w).
func run[T jobs.JobArgs](ctx context.Context, w jobs.Worker[T], job *jobs.Job[T], payload []byte) (malformed bool, err error) {
	if err := jobs.DecodeArgs(payload, &job.Args); err != nil {
		return true, fmt.Errorf("fencedqtest: malformed payload: %s: %v", job.Kind, err)
	}
	if !argtype.IsJSONObject(payload) {
		return true, fmt.Errorf("fencedqtest: malformed payload: %s: args are not a JSON object", job.Kind)
	}
	sensitive := jobs.RulesOf(job.Args).Sensitive
	defer func() {
		if r := recover(); r != nil { // Validate's too, as a pool's
			malformed, err = false, fmt.Errorf("handler panicked: %v", r)
		}
	}()
	if err := rules.Validate(job.Args, sensitive); err != nil {
		return true, fmt.Errorf("fencedqtest: malformed payload: %s: invalid args: %v", job.Kind, err)
	}
	if sensitive {
		defer rules.Redact(job.Args, &err)
	}
	err = w.Work(ctx, job)
	if err != nil {
		_ = err.Error() // one that panics (a nil pointer of an error type) is the handler's panic
	}
	return false, err
}

// errCancelled is the cause given to an inline handler's context when an
// operator cancels its running job.
var errCancelled = errors.New("fencedqtest: job cancelled by an operator")

// watchCancel cancels ctx, the context of the attempt of c, with
// errCancelled once an operator asks to cancel the job, as a pool's
// renewal does. It reads the job when a keyspace notification says its
// record changed and every pollEvery otherwise; stop ends the watch and
// waits for it (safe to call more than once).
func (e *Env) watchCancel(ctx context.Context, c *ledger.Claimed, cancel context.CancelCauseFunc) (stop func()) {
	wctx, end := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		wake := e.notifications(wctx, e.ledger.JobKey(c.Queue, c.ID))
		tick := time.NewTicker(pollEvery)
		defer tick.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-wake:
			case <-tick.C:
			}
			// Asked to stop while this attempt's token runs the job, as a
			// renewal reads it.
			rec, err := e.ledger.Get(wctx, c.Queue, c.ID)
			if err == nil && rec.State == jobs.Running && rec.Token == c.Token && rec.CancelledBy != "" {
				cancel(errCancelled)
				return
			}
		}
	}()
	return func() {
		end()
		<-done
	}
}

// errGoexit is the error of an inline attempt whose handler ended the
// goroutine (runtime.Goexit: t.FailNow, t.Fatal) instead of returning.
var errGoexit = errors.New("handler called runtime.Goexit (t.FailNow, t.Fatal) instead of returning")

// goexited commits the attempt of c whose handler ended the test's
// goroutine instead of returning, as a pool commits it (end: how the call
// ended): a retry (due at once), or uncertain when its deadline had passed
// or the caller's context ended mid-call, so the job is not left running
// for the tests after this one.
func (e *Env) goexited(ctx context.Context, c *ledger.Claimed, held *lease.Lease, end rules.End) {
	outcome := rules.Decide(end)
	_, _ = e.ledger.Complete(context.WithoutCancel(ctx), c.Queue, []ledger.Completion{{ID: c.ID, Token: c.Token, Fence: fenceOf(held), Outcome: outcome}})
}

// errStillRunning is the error of an inline attempt abandoned with its
// handler still running past the attempt's lease.
var errStillRunning = errors.New("fencedqtest: the handler was still running when its attempt's lease lapsed: abandoned")

// abandoned commits the attempt of c, whose handler still runs past the
// attempt's lease, uncertain: its effect may still happen.
func (e *Env) abandoned(ctx context.Context, c *ledger.Claimed, held *lease.Lease) {
	_, _ = e.ledger.Complete(context.WithoutCancel(ctx), c.Queue, []ledger.Completion{{ID: c.ID, Token: c.Token, Fence: fenceOf(held),
		Outcome: ledger.Outcome{To: jobs.Uncertain, Error: errStillRunning.Error(), Reason: "the handler did not return by the end of its lease: abandoned"}}})
}

// putBack returns a claimed job to pending without consuming its attempt.
func (e *Env) putBack(ctx context.Context, c *ledger.Claimed) {
	_, _ = e.ledger.Complete(context.WithoutCancel(ctx), c.Queue, []ledger.Completion{{ID: c.ID, Token: c.Token,
		Outcome: ledger.Outcome{Defer: true, Reason: "fencedqtest: resource busy"}}})
}

// fenceOf is the token of the resource lease an attempt held (recorded
// with its outcome), or 0 when it held none.
func fenceOf(held *lease.Lease) lease.Token {
	if held == nil {
		return 0
	}
	return held.Token
}
