package attempt

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
)

// unknownIs is an error type of a handler's own that says its outcome is
// unknown through an Is method.
type unknownIs struct{}

func (unknownIs) Error() string        { return "timed out after sending" }
func (unknownIs) Is(target error) bool { return target == jobs.ErrUnknown }

func TestDecide(t *testing.T) {
	errMalformed := errors.New("malformed")
	boom := errors.New("boom")
	for _, c := range []struct {
		name   string
		end    End
		to     jobs.State
		reason string
	}{
		{"success", End{}, jobs.Succeeded, ""},
		{"success despite a lost lease (the commit is fenced)", End{Lost: true}, jobs.Succeeded, ""},
		{"effect already applied", End{Err: fmt.Errorf("apply: %w", fence.ErrAlreadyApplied)}, jobs.Succeeded, "effect already applied"},
		{"effect already applied, marked", End{Err: jobs.Permanent(jobs.Unknown(&fence.AlreadyAppliedError{}))}, jobs.Succeeded, "effect already applied"},
		{"applied twice", End{Err: errors.Join(fence.ErrAlreadyApplied, fmt.Errorf("b: %w", fence.ErrAlreadyApplied))}, jobs.Succeeded, "effect already applied"},
		{"unknown beside an applied effect", End{Err: errors.Join(fence.ErrAlreadyApplied, jobs.Unknown(boom))}, jobs.Uncertain, "handler reported an unknown outcome"},
		{"a failure beside an applied effect", End{Err: fmt.Errorf("debit: %w; credit: %w", fence.ErrAlreadyApplied, boom)}, jobs.Pending, ""},
		{"a permanent failure beside an applied effect", End{Err: errors.Join(jobs.Permanent(boom), fence.ErrAlreadyApplied)}, jobs.Dead, "permanent error"},
		{"a refusal beside an applied effect", End{Err: errors.Join(fence.ErrAlreadyApplied, fence.ErrStale)}, jobs.Pending, ""},
		{"malformed payload", End{Err: fmt.Errorf("%w: bad", errMalformed), Malformed: true}, jobs.Dead, "malformed payload"},
		{"permanent", End{Err: jobs.Permanent(boom)}, jobs.Dead, "permanent error"},
		{"unknown kind", End{Err: jobs.Permanent(boom), Reason: "unknown kind"}, jobs.Dead, "unknown kind"},
		{"stale storage", End{Err: &fence.StaleError{StoredToken: 2}}, jobs.Pending, ""},
		{"unknown outcome", End{Err: jobs.Unknown(boom)}, jobs.Uncertain, "handler reported an unknown outcome"},
		{"unknown beats timeout", End{Err: jobs.Unknown(boom), TimedOut: true}, jobs.Uncertain, "handler reported an unknown outcome"},
		{"unknown beats permanent", End{Err: jobs.Permanent(fmt.Errorf("charge: %w", jobs.Unknown(boom)))}, jobs.Uncertain, "handler reported an unknown outcome"},
		{"unknown beats a permanent reason", End{Err: jobs.Unknown(boom), Permanent: true}, jobs.Uncertain, "handler reported an unknown outcome"},
		{"a storage refusal beats unknown", End{Err: jobs.Unknown(&fence.StaleError{StoredToken: 2})}, jobs.Pending, ""},
		{"a storage refusal beats the unknown it caused", End{Err: fmt.Errorf("h: %w", jobs.Unknown(fmt.Errorf("w: %w", fence.ErrStale)))}, jobs.Pending, ""},
		{"unknown beats another effect's storage refusal", End{Err: errors.Join(jobs.Unknown(boom), &fence.StaleError{StoredToken: 2})}, jobs.Uncertain, "handler reported an unknown outcome"},
		{"unknown beats a storage refusal joined after it", End{Err: errors.Join(&fence.StaleError{StoredToken: 2}, fmt.Errorf("b: %w", jobs.Unknown(boom)))}, jobs.Uncertain, "handler reported an unknown outcome"},
		{"a bare unknown beats a storage refusal", End{Err: errors.Join(jobs.ErrUnknown, fence.ErrStale)}, jobs.Uncertain, "handler reported an unknown outcome"},
		{"an unknown wrapping both", End{Err: jobs.Unknown(errors.Join(boom, fence.ErrStale))}, jobs.Pending, ""},
		{"an unknown inside an unknown refusal", End{Err: jobs.Unknown(errors.Join(jobs.Unknown(boom), fence.ErrStale))}, jobs.Uncertain, "handler reported an unknown outcome"},
		{"an unknown of its own type beats a storage refusal", End{Err: errors.Join(unknownIs{}, fence.ErrStale)}, jobs.Uncertain, "handler reported an unknown outcome"},
		{"unknown beats a storage refusal under a retry delay", End{Err: jobs.RetryAfter(errors.Join(jobs.Unknown(nil), fence.ErrStale), time.Second)}, jobs.Uncertain, "handler reported an unknown outcome"},
		{"a permanent context error after the deadline", End{Err: jobs.Permanent(fmt.Errorf("charge: %w", context.DeadlineExceeded)), TimedOut: true}, jobs.Uncertain, "deadline passed mid-call"},
		{"a permanent context error after a lost lease", End{Err: jobs.Permanent(context.Canceled), Lost: true}, jobs.Uncertain, "lease lost mid-call"},
		{"a permanent context error at shutdown", End{Err: jobs.Permanent(context.Canceled), Shutdown: "worker shut down mid-call"}, jobs.Uncertain, "worker shut down mid-call"},
		{"a permanent context error after an operator's cancel", End{Err: jobs.Permanent(context.Canceled), Cancelled: true}, jobs.Pending, ""},
		{"a permanent context cause after an operator's cancel", End{Err: jobs.Permanent(boom), Cancelled: true, Cause: boom}, jobs.Pending, ""},
		{"a permanent context cause after a lost lease", End{Err: jobs.Permanent(lease.ErrLost), Lost: true, Cause: lease.ErrLost}, jobs.Uncertain, "lease lost mid-call"},
		{"a permanent error of its own after the deadline", End{Err: jobs.Permanent(boom), TimedOut: true}, jobs.Dead, "permanent error"},
		{"lease lost mid-call", End{Err: boom, Lost: true, LostCause: lease.ErrLost}, jobs.Uncertain, "lease lost mid-call: " + lease.ErrLost.Error()},
		{"cancelled by an operator", End{Err: boom, Cancelled: true}, jobs.Pending, ""},
		{"cancelled, then the deadline passed", End{Err: boom, Cancelled: true, TimedOut: true}, jobs.Uncertain, "deadline passed mid-call"},
		{"cancelled during a shutdown", End{Err: boom, Cancelled: true, Shutdown: "worker shut down mid-call"}, jobs.Uncertain, "worker shut down mid-call"},
		{"cancelled, dependency timeout, reconcilable", End{Err: fmt.Errorf("call: %w", context.DeadlineExceeded), Cancelled: true, Reconcilable: true}, jobs.Uncertain, "a dependency timed out; it may have accepted the work"},
		{"cancelled, dependency timeout, cannot reconcile", End{Err: context.DeadlineExceeded, Cancelled: true}, jobs.Pending, ""},
		{"deadline passed", End{Err: boom, TimedOut: true}, jobs.Uncertain, "deadline passed mid-call"},
		{"deadline passed, safe to repeat", End{Err: boom, TimedOut: true, RetryOnTimeout: true}, jobs.Pending, ""},
		{"shutdown", End{Err: boom, Shutdown: "worker shut down mid-call"}, jobs.Uncertain, "worker shut down mid-call"},
		{"shutdown, safe to repeat", End{Err: context.Canceled, Shutdown: "worker shut down mid-call", RetryOnTimeout: true}, jobs.Pending, ""},
		{"a permanent context error at shutdown, safe to repeat", End{Err: jobs.Permanent(context.Canceled), Shutdown: "worker shut down mid-call", RetryOnTimeout: true}, jobs.Pending, ""},
		{"an unknown outcome at shutdown, safe to repeat", End{Err: jobs.Unknown(boom), Shutdown: "worker shut down mid-call", RetryOnTimeout: true}, jobs.Uncertain, "handler reported an unknown outcome"},
		{"plain error", End{Err: boom}, jobs.Pending, ""},
		{"dependency timeout, reconcilable", End{Err: fmt.Errorf("call: %w", context.DeadlineExceeded), Reconcilable: true}, jobs.Uncertain, "a dependency timed out; it may have accepted the work"},
		{"network timeout, reconcilable", End{Err: &net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}, Reconcilable: true}, jobs.Uncertain, "a dependency timed out; it may have accepted the work"},
		{"dependency timeout, cannot reconcile", End{Err: context.DeadlineExceeded}, jobs.Pending, ""},
		{"dependency timeout, safe to repeat", End{Err: context.DeadlineExceeded, Reconcilable: true, RetryOnTimeout: true}, jobs.Pending, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := Decide(c.end)
			if o.To != c.to || o.Reason != c.reason {
				t.Fatalf("decide = %s (%q), want %s (%q)", o.To, o.Reason, c.to, c.reason)
			}
			if c.end.Err != nil && o.Error != c.end.Err.Error() {
				t.Fatalf("error text %q, want %q", o.Error, c.end.Err.Error())
			}
		})
	}
}

func TestStorageMark(t *testing.T) {
	f := fence.Fence{Resource: "job:1", Token: 10, Owner: "w/1", OperationID: "1"}
	refusal := func(f fence.Fence, stored lease.Token) error {
		return fmt.Errorf("handler: %w", &fence.StaleError{Fence: f, StoredToken: stored, StoredOwner: "zombie"})
	}
	other := f
	other.Resource = "account:7"
	for name, c := range map[string]struct {
		err  error
		mark lease.Token
		ok   bool
	}{
		"refusal of the attempt's fence": {refusal(f, 99), 99, true},
		"another fence":                  {refusal(other, 99), 0, false},
		"same token of another owner":    {refusal(f, 10), 0, false},
		"plain ErrStale":                 {fence.ErrStale, 0, false},
		"no error":                       {nil, 0, false},
	} {
		mark, ok := StorageMark(c.err, f)
		if mark != c.mark || ok != c.ok {
			t.Errorf("%s: %d, %v; want %d, %v", name, mark, ok, c.mark, c.ok)
		}
	}
}

func TestPlausibleMark(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	us := lease.Token(now.UnixMicro())
	tok := lease.Token(5)<<52 + us
	for mark, want := range map[lease.Token]bool{
		tok - 1:                    true, // below: says nothing, allowed
		tok + 1:                    true, // the same epoch, a later token
		lease.Token(40)<<52 + us:   true, // many epochs ahead (failovers that lost the record)
		lease.Token(4095)<<52 + us: true, // the last epoch
		lease.Token(5)<<52 + us + lease.Token(time.Hour.Microseconds()): true, // a Redis clock an hour ahead
		lease.Token(1<<64 - 2): false, // a time part past the year 2100
		lease.Token(5)<<52 + us + lease.Token((2 * MaxMarkAhead).Microseconds()): false,
	} {
		if got := PlausibleMark(mark, tok, now); got != want {
			t.Errorf("PlausibleMark(%d, %d) = %v, want %v", mark, tok, got, want)
		}
	}
}

// TestResolve: a verdict decides an uncertain job as the reconciler and the
// bridge both decide it: applied succeeds, not applied is a failed attempt
// (a rerun with the retry's delay: pending while attempts are left, else
// dead), cannot
// tell looks again later (backing off, at most base << 10) until the last
// look or when nothing was asked, then goes to review.
func TestResolve(t *testing.T) {
	for _, c := range []struct {
		v               jobs.Verdict
		asked           bool
		tries, maxTries int
		want            jobs.Decision
		nextIn          time.Duration
		result          string
	}{
		{jobs.Applied, true, 0, 3, jobs.DecideSucceeded, 0, "applied"},
		{jobs.NotApplied, true, 2, 3, jobs.DecideRerun, 0, "not_applied"},
		{jobs.CannotTell, true, 0, 3, jobs.DecideLater, 2 * time.Second, "cannot_tell"},
		{jobs.CannotTell, true, 20, 30, jobs.DecideLater, 1024 * time.Second, "cannot_tell"},
		{jobs.CannotTell, true, 2, 3, jobs.DecideReview, 0, "review"},
		{jobs.CannotTell, false, 0, 3, jobs.DecideReview, 0, "review"},
	} {
		var res ledger.Resolution
		asked := 0
		result := Resolve(&res, c.v, c.asked, c.tries, c.maxTries, time.Second, func() time.Duration { asked++; return 7 * time.Second })
		if retry := res.RetryIn != nil && *res.RetryIn == 7*time.Second && asked == 1; retry != (c.v == jobs.NotApplied) || asked > 1 {
			t.Errorf("Resolve(%v): RetryIn %v (delay asked %d times), want the retry's delay only for not applied", c.v, res.RetryIn, asked)
		}
		if res.Decision != c.want || res.NextIn != c.nextIn || result != c.result {
			t.Errorf("Resolve(%v, asked %v, tries %d of %d) = %s in %v counted %q, want %s in %v counted %q",
				c.v, c.asked, c.tries, c.maxTries, res.Decision, res.NextIn, result, c.want, c.nextIn, c.result)
		}
	}
}
