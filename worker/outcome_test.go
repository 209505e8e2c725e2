package worker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"testing"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
)

func TestDecide(t *testing.T) {
	boom := errors.New("boom")
	for _, c := range []struct {
		name   string
		end    attemptEnd
		to     jobs.State
		reason string
	}{
		{"success", attemptEnd{}, jobs.Succeeded, ""},
		{"success despite a lost lease (the commit is fenced)", attemptEnd{lost: true}, jobs.Succeeded, ""},
		{"effect already applied", attemptEnd{err: fmt.Errorf("apply: %w", fence.ErrAlreadyApplied)}, jobs.Succeeded, "effect already applied"},
		{"malformed payload", attemptEnd{err: fmt.Errorf("%w: bad", errMalformed)}, jobs.Dead, "malformed payload"},
		{"permanent", attemptEnd{err: jobs.Permanent(boom)}, jobs.Dead, "permanent error"},
		{"unknown kind", attemptEnd{err: jobs.Permanent(boom), reason: "unknown kind"}, jobs.Dead, "unknown kind"},
		{"stale storage", attemptEnd{err: &fence.StaleError{StoredToken: 2}}, jobs.Pending, ""},
		{"unknown outcome", attemptEnd{err: jobs.Unknown(boom)}, jobs.Uncertain, "handler reported an unknown outcome"},
		{"unknown beats timeout", attemptEnd{err: jobs.Unknown(boom), timedOut: true}, jobs.Uncertain, "handler reported an unknown outcome"},
		{"lease lost mid-call", attemptEnd{err: boom, lost: true, lostCause: lease.ErrLost}, jobs.Uncertain, "lease lost mid-call: " + lease.ErrLost.Error()},
		{"cancelled by an operator", attemptEnd{err: boom, cancelled: true}, jobs.Pending, ""},
		{"deadline passed", attemptEnd{err: boom, timedOut: true}, jobs.Uncertain, "deadline passed mid-call"},
		{"deadline passed, safe to repeat", attemptEnd{err: boom, timedOut: true, retryOnTimeout: true}, jobs.Pending, ""},
		{"shutdown", attemptEnd{err: boom, shutdown: true}, jobs.Uncertain, "worker shut down mid-call"},
		{"plain error", attemptEnd{err: boom}, jobs.Pending, ""},
		{"dependency timeout, reconcilable", attemptEnd{err: fmt.Errorf("call: %w", context.DeadlineExceeded), reconcilable: true}, jobs.Uncertain, "a dependency timed out; it may have accepted the work"},
		{"network timeout, reconcilable", attemptEnd{err: &net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}, reconcilable: true}, jobs.Uncertain, "a dependency timed out; it may have accepted the work"},
		{"dependency timeout, cannot reconcile", attemptEnd{err: context.DeadlineExceeded}, jobs.Pending, ""},
		{"dependency timeout, safe to repeat", attemptEnd{err: context.DeadlineExceeded, reconcilable: true, retryOnTimeout: true}, jobs.Pending, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := decide(c.end)
			if o.To != c.to || o.Reason != c.reason {
				t.Fatalf("decide = %s (%q), want %s (%q)", o.To, o.Reason, c.to, c.reason)
			}
			if c.end.err != nil && o.Error != c.end.err.Error() {
				t.Fatalf("error text %q, want %q", o.Error, c.end.err.Error())
			}
		})
	}
}
