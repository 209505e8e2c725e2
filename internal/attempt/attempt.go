// Package attempt holds the rules shared by every place that runs a fenced
// attempt (worker pools and the asynq bridge): how a handler call's end
// becomes the outcome committed to the ledger, and how an uncertain job's
// verdict is asked of the kind's Reconcile or the effect log, and what that
// verdict decides.
package attempt

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"reflect"
	"runtime/debug"
	"slices"
	"time"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/metrics"
	"github.com/fencedq/fencedq/jobs"
)

// End is how an attempt's handler call ended.
type End struct {
	Err            error  // the handler's error (nil: success)
	Reason         string // why, when the caller already knows (a permanent failure's reason)
	Malformed      bool   // the payload did not decode into the kind's args
	Permanent      bool   // the error must not be retried (besides jobs.ErrPermanent)
	Lost           bool   // a lease was lost mid-call
	LostCause      error  // why (for the reason text)
	Cancelled      bool   // an operator asked to cancel the job
	TimedOut       bool   // the handler's deadline passed
	Shutdown       string // non-empty when the runner cancelled the call: the reason shown
	Cause          error  // the cause the runner gave the call's context when it cut it short (nil: none)
	RetryOnTimeout bool   // the kind's effects are safe to repeat after a timeout
	Reconcilable   bool   // the kind has Reconcile, or an effect log answers for it
	// Output and OutputDisplay are what the handler recorded
	// (jobs.RecordOutput), committed only with a success.
	Output, OutputDisplay []byte
}

// IsTimeout reports whether err is a timeout: the call may have reached
// the dependency, which may have accepted the work.
func IsTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) ||
		(errors.As(err, &ne) && ne.Timeout())
}

// interruptedBy reports whether err is the end of the call's context (a
// cancellation, a timeout, or the cause the runner gave it) after the call
// was cut short (its lease lost, its deadline passed, an operator
// cancelled it, the runner shutting down): marked permanent or not, it
// says only that the handler stopped, not that its effect did not happen
// or that the job failed.
func (e End) interruptedBy(err error) bool {
	return (e.Lost || e.TimedOut || e.Cancelled || e.Shutdown != "") &&
		(errors.Is(err, context.Canceled) || IsTimeout(err) || e.Cause != nil && errors.Is(err, e.Cause))
}

// Decide maps how an attempt ended to the outcome to commit. Only a proven
// result is final: a timeout, a lost lease or a shutdown mid-call leaves the
// job uncertain, never guessed failed or succeeded, even when the handler
// marked its context's error permanent or an operator asked the attempt to
// stop. So does a dependency
// call that timed out before the job's own deadline, for kinds that can be
// reconciled; other kinds retry it (they should return jobs.Unknown
// themselves when a repeat would be harmful). A kind whose effects are
// safe to repeat (RetryOnTimeout) retries after its deadline or a shutdown
// mid-call instead. A retry's due time is set by the caller.
func Decide(e End) ledger.Outcome {
	err := e.Err
	text := ""
	if err != nil {
		text = err.Error()
	}
	switch {
	case err == nil:
		return ledger.Outcome{To: jobs.Succeeded, Output: e.Output, OutputDisplay: e.OutputDisplay}
	case onlyApplied(err):
		// The effect log says this operation's effect is applied, and the
		// handler reported nothing else.
		reason := "effect already applied"
		var ae *fence.AlreadyAppliedError
		if errors.As(err, &ae) && ae.Elsewhere() {
			// Its token, not its owner: the two authorise writes as that holder.
			reason = fmt.Sprintf("effect already applied by another holder (token %d on %s)", ae.Record.Token, ae.Record.Resource)
		}
		return ledger.Outcome{To: jobs.Succeeded, Error: text, Reason: reason}
	case e.Malformed:
		return ledger.Outcome{To: jobs.Dead, Error: text, Reason: "malformed payload"}
	case errors.Is(err, jobs.ErrUnknown) && (!errors.Is(err, fence.ErrStale) || unrefusedUnknown(err)):
		// Even when also marked permanent: an effect that may have
		// happened is reconciled, not dropped as failed. (A storage
		// refusal the unknown wraps, below, proves that its effect did
		// not happen; one beside it proves nothing of the unknown one.)
		return ledger.Outcome{To: jobs.Uncertain, Error: text, Reason: "handler reported an unknown outcome"}
	case (e.Permanent || errors.Is(err, jobs.ErrPermanent)) && !e.interruptedBy(err):
		reason := e.Reason
		if reason == "" {
			reason = "permanent error"
		}
		return ledger.Outcome{To: jobs.Dead, Error: text, Reason: reason}
	case errors.Is(err, fence.ErrStale):
		// Storage saw a newer token: this attempt is superseded and its
		// effect was refused. A retry; if a newer attempt owns the job the
		// commit itself is refused.
		return ledger.Outcome{To: jobs.Pending, Error: text}
	case e.Lost:
		reason := "lease lost mid-call"
		if e.LostCause != nil {
			reason += ": " + e.LostCause.Error()
		}
		return ledger.Outcome{To: jobs.Uncertain, Error: text, Reason: reason}
	case e.TimedOut && !e.RetryOnTimeout:
		return ledger.Outcome{To: jobs.Uncertain, Error: text, Reason: "deadline passed mid-call"}
	case e.Shutdown != "" && !e.RetryOnTimeout:
		// A kind whose effects are safe to repeat is retried below, as
		// after its own timeout: nothing needs reconciling.
		return ledger.Outcome{To: jobs.Uncertain, Error: text, Reason: e.Shutdown}
	case IsTimeout(err) && e.Reconcilable && !e.RetryOnTimeout:
		return ledger.Outcome{To: jobs.Uncertain, Error: text, Reason: "a dependency timed out; it may have accepted the work"}
	}
	// A retry; the ledger turns a retry of a job an operator cancelled into
	// cancelled. An operator's stop request never hides an unknown outcome
	// (above): that one is reconciled, and ends cancelled if not applied.
	return ledger.Outcome{To: jobs.Pending, Error: text}
}

// unknownType is the type of the errors jobs.Unknown returns.
var unknownType = reflect.TypeOf(jobs.Unknown(nil))

// unrefusedUnknown reports whether err's tree (as errors.Is walks it)
// holds an unknown outcome that no storage refusal explains: the bare
// jobs.ErrUnknown, a jobs.Unknown or an error of another type matching
// ErrUnknown through its Is method, unless what that unknown wraps is a
// refusal (fence.ErrStale: the effect it was unsure of did not happen).
// A refusal beside an unknown (errors.Join of both, two effects of one
// handler) proves nothing of the unknown one.
func unrefusedUnknown(err error) bool {
	if err == nil {
		return false
	}
	if err == jobs.ErrUnknown {
		return true
	}
	var kids []error
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		kids = []error{u.Unwrap()}
	case interface{ Unwrap() []error }:
		kids = u.Unwrap()
	}
	marks := false
	if reflect.TypeOf(err) == unknownType && len(kids) == 2 && kids[0] == jobs.ErrUnknown {
		marks, kids = true, kids[1:] // jobs.Unknown(kids[1]); Unknown(nil) wraps ErrUnknown itself
	} else if x, ok := err.(interface{ Is(error) bool }); ok && x.Is(jobs.ErrUnknown) {
		marks = true
	}
	if marks && !slices.ContainsFunc(kids, func(k error) bool { return errors.Is(k, fence.ErrStale) }) {
		return true
	}
	return slices.ContainsFunc(kids, unrefusedUnknown)
}

// onlyApplied reports whether every branch of err's tree (as errors.Is
// walks it) ends in fence.ErrAlreadyApplied, a jobs.Permanent or
// jobs.Unknown mark around it aside: the handler reported its operation
// applied, and nothing else. An error beside it (errors.Join of an effect
// found applied and another that failed, or whose outcome is unknown: two
// effects of one handler) is not hidden by it, and steers the outcome.
func onlyApplied(err error) bool {
	if err == nil {
		return false
	}
	if x, ok := err.(interface{ Is(error) bool }); err == fence.ErrAlreadyApplied || ok && x.Is(fence.ErrAlreadyApplied) {
		return true
	}
	var kids []error
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		kids = []error{u.Unwrap()}
	case interface{ Unwrap() []error }:
		kids = u.Unwrap()
	}
	if reflect.TypeOf(err) == unknownType && len(kids) == 2 {
		kids = kids[1:] // jobs.Permanent(kids[1]) or jobs.Unknown(kids[1]): the mark says nothing of the effect
	}
	applied := false
	for _, k := range kids {
		if k == nil {
			continue
		}
		if !onlyApplied(k) {
			return false
		}
		applied = true
	}
	return applied
}

// ReconcileFunc asks a job kind whether an uncertain job's effect happened.
type ReconcileFunc func(ctx context.Context, rec *jobs.Record) (jobs.Verdict, error)

// ErrNoAnswer is the error of a Reconcile call or an effect log read that
// did not return before its context ended (one that ignores its context):
// the caller stops waiting for it and the answer is CannotTell.
var ErrNoAnswer = errors.New("did not return before its context ended")

// Verdict asks f (the kind's Reconcile) if there is one, else the effect
// log, about rec's effect, and says what the answer rests on (evidence,
// capped as an attempt's error is: it goes into the job's history).
// failure is non-nil when Reconcile failed, panicked (Stack returns its
// stack, for the log) or did not return before ctx ended (ErrNoAnswer), or
// the effect log could not be read: the answer is then CannotTell. out,
// when not nil, is called before Reconcile or the effect log is asked
// (fenceout.Attempt: the attempt is cut off from the log's store first, so a "not
// applied" stays true for writes through that store, whichever of the two
// answers); its failure is one too, and neither is asked. asked
// is false when there was nothing to ask. Verdict returns once ctx ends,
// whatever f or the log do: a call that ignores its context is left to
// finish on its own and its late answer is dropped.
func Verdict(ctx context.Context, rec *jobs.Record, f ReconcileFunc, log fence.EffectLog, out func(context.Context) error) (v jobs.Verdict, evidence string, asked bool, failure error) {
	if f == nil && log == nil {
		return jobs.CannotTell, "kind has no Reconcile method and no effect log answers for it", false, nil
	}
	if out != nil {
		if _, err := bounded(ctx, func() (struct{}, error) { return struct{}{}, out(ctx) }); err != nil {
			return jobs.CannotTell, ledger.CapError("the attempt could not be fenced out of the effect log's store: " + err.Error()), true, err
		}
	}
	if f != nil {
		v, err := bounded(ctx, func() (jobs.Verdict, error) { return f(ctx, rec) })
		if err != nil {
			return jobs.CannotTell, ledger.CapError("Reconcile failed: " + err.Error()), true, err
		}
		return v, "Reconcile answered " + v.String(), true, nil
	}
	type answer struct {
		rec fence.Effect
		ok  bool
	}
	a, err := bounded(ctx, func() (answer, error) {
		rec, ok, err := log.Applied(ctx, rec.OperationID)
		return answer{rec: rec, ok: ok}, err
	})
	applied, ok := a.rec, a.ok
	switch {
	case err != nil:
		return jobs.CannotTell, ledger.CapError("effect log unavailable: " + err.Error()), true, err
	case ok:
		return jobs.Applied, fmt.Sprintf("effect log: operation applied with token %d", applied.Token), true, nil
	default:
		return jobs.NotApplied, "effect log: operation not applied", true, nil
	}
}

// Resolve sets res's decision on an uncertain job from verdict v (asked as
// Verdict says) and returns the result its decisions metric counts (v's
// name, or metrics.ResultReview): applied, the job succeeded; not applied,
// the attempt failed: a retry after retryIn() (asked only then) while the
// job has attempts left, else dead (ledger.Resolution.RetryIn); cannot
// tell, it is left for an operator's review when nothing was asked or this
// was the last of maxTries looks (tries made before it), else looked at
// again in base << (tries+1), at most base << 10.
func Resolve(res *ledger.Resolution, v jobs.Verdict, asked bool, tries, maxTries int, base time.Duration, retryIn func() time.Duration) (result string) {
	switch v {
	case jobs.Applied:
		res.Decision = jobs.DecideSucceeded
	case jobs.NotApplied:
		res.Decision = jobs.DecideRerun
		d := retryIn()
		res.RetryIn = &d
	default:
		if !asked || tries+1 >= maxTries {
			res.Decision = jobs.DecideReview
			return metrics.ResultReview
		}
		res.Decision = jobs.DecideLater
		res.NextIn = base << min(tries+1, 10)
	}
	return v.String()
}

// panicError is a panic in a Reconcile call or an effect log read: its
// text is the panic's value, its stack kept apart for the log.
type panicError struct {
	value any
	stack []byte
}

func (e *panicError) Error() string { return fmt.Sprintf("panicked: %v", e.value) }

// Stack returns the stack of a panic Verdict's failure reports ("" for
// another failure).
func Stack(err error) string {
	var p *panicError
	if errors.As(err, &p) {
		return string(p.stack)
	}
	return ""
}

// bounded returns call's result, or ErrNoAnswer (with ctx's cause) once
// ctx ends before call returns. A panic in call, or its end of the
// goroutine (runtime.Goexit), is its error.
func bounded[T any](ctx context.Context, call func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1) // a late answer is dropped, not blocked on
	go func() {
		r := result{err: errors.New("ended its goroutine without returning")}
		defer func() {
			if p := recover(); p != nil {
				r.err = &panicError{value: p, stack: debug.Stack()}
			}
			done <- r
		}()
		r.v, r.err = call()
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		select {
		case r := <-done: // it returned as ctx ended
			return r.v, r.err
		default:
		}
		var zero T
		return zero, fmt.Errorf("%w: %w", ErrNoAnswer, context.Cause(ctx))
	}
}

// Reached reports whether a job in state got may have been put there by
// an outcome that wanted state want (a retry can also end dead or
// cancelled): a commit sent again that finds this, under the attempt's own
// token, finds its first try applied.
func Reached(want, got jobs.State) bool {
	return got == want || want == jobs.Pending && (got == jobs.Dead || got == jobs.Cancelled)
}

// Validate calls args' Validate, if it has one, for an attempt: with
// sensitive (the kind has sensitive fields), the error's text and a
// panic's value have args' sensitive values replaced (Redact), as a
// handler's are.
func Validate(args any, sensitive bool) (err error) {
	v, ok := args.(jobs.Validator)
	if !ok {
		return nil
	}
	if sensitive {
		defer Redact(args, &err)
	}
	return v.Validate()
}

// Redact is deferred by a handler's or Reconcile's call for a kind with
// sensitive fields: it replaces, in *err's text and in a panic's value,
// every sensitive value of args (jobs.RedactText), so a text quoting one
// is stored, logged and traced without it. errors.Is and errors.As see
// the error, and a panic value that is an error, as before.
func Redact(args any, err *error) {
	if r := recover(); r != nil {
		text := fmt.Sprint(r)
		hidden := jobs.RedactText(args, text)
		if hidden == text {
			panic(r)
		}
		if e, ok := r.(error); ok {
			panic(jobs.RedactError(args, e))
		}
		panic(hidden)
	}
	*err = jobs.RedactError(args, *err)
}
