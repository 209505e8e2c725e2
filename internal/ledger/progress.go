package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fencedq/fencedq/lease"
)

// Progress is the latest progress an attempt reported (jobs.Progress).
type Progress struct {
	// Done and Total are as reported; Total 0 means unknown.
	Done  int64 `json:"done"`
	Total int64 `json:"total,omitempty"`
	// Note is a short text about the step reached.
	Note string `json:"note,omitempty"`
	// Attempt and Token identify the attempt that reported it.
	Attempt int         `json:"attempt"`
	Token   lease.Token `json:"token,string"`
	// At is when it was recorded, by Redis's clock.
	At time.Time `json:"at"`
}

// decodeProgress reads the job's 'progress' field; nil when absent or corrupt.
func decodeProgress(s string) *Progress {
	if s == "" {
		return nil
	}
	var raw struct{ Done, Total, Note, Attempt, Token, At string }
	if json.Unmarshal([]byte(s), &raw) != nil {
		return nil
	}
	done, err1 := strconv.ParseInt(raw.Done, 10, 64)
	total, err2 := strconv.ParseInt(raw.Total, 10, 64)
	if err1 != nil || err2 != nil {
		return nil
	}
	return &Progress{Done: done, Total: total, Note: raw.Note, Attempt: atoi(raw.Attempt), Token: token(raw.Token), At: msTime(raw.At)}
}

// ReportProgress records how far the attempt of job id in queue q holding
// ledger token tok got. It returns ErrStale when tok no longer runs the job
// (a newer attempt took over, or the attempt ended): nothing is written.
// The caller validates done, total and note.
func (l *Ledger) ReportProgress(ctx context.Context, q, id string, tok lease.Token, done, total int64, note string) error {
	if err := ValidateQueueRef(q); err != nil {
		return err
	}
	n, err := l.run(ctx, l.lanes.other, progressScript, q, id, tok.String(),
		strconv.FormatInt(done, 10), strconv.FormatInt(total, 10), note).Int()
	if err != nil {
		return wrap("progress "+id, err)
	}
	if n != 1 {
		return fmt.Errorf("%w: progress of job %s by token %s, which no longer runs it", ErrStale, id, tok)
	}
	return nil
}

// attemptKey carries the running attempt in a handler's context.
type attemptKey struct{}

type attemptRef struct {
	l     *Ledger
	q, id string
	tok   lease.Token
	out   *outputSlot
	// ended and outer are set once the attempt (outer) or this scope of it
	// (ended: a handler's, see ScopeAttempt) ended: reports are refused.
	ended, outer *atomic.Bool
}

// over reports whether the attempt, or this scope of it, ended.
func (a attemptRef) over() bool { return a.ended.Load() || a.outer != nil && a.outer.Load() }

// errEnded is the error of a report made after its attempt ended.
func (a attemptRef) errEnded(what string) error {
	return fmt.Errorf("%w: %s of job %s by token %s after its attempt ended", ErrStale, what, a.id, a.tok)
}

// outputSlot holds the output an attempt recorded (jobs.RecordOutput)
// until its outcome is committed.
type outputSlot struct {
	mu           sync.Mutex
	raw, display []byte
}

// WithAttempt returns ctx carrying the attempt of job id in queue q under
// ledger token tok, for ProgressOf, SetOutput and the reads of a workflow
// step: pools, the asynq bridge and fencedqtest give it to the handler,
// and read the recorded output back with OutputOf to commit it. They call
// end once the handler's call returned: later reports through the context
// (from a goroutine the handler leaked) fail with ErrStale.
func WithAttempt(ctx context.Context, l *Ledger, q, id string, tok lease.Token) (_ context.Context, end func()) {
	a := attemptRef{l: l, q: q, id: id, tok: tok, out: &outputSlot{}, ended: new(atomic.Bool)}
	return context.WithValue(ctx, attemptKey{}, a), func() { a.ended.Store(true) }
}

// ScopeAttempt returns ctx with a scope of the attempt it carries (the
// same output, the same fence) that ends, refusing reports, when end is
// called or the attempt ends: a handler's view, ended as it returns while
// the middleware around it still reports. ctx is returned as it is, with
// a no-op end, when it carries no attempt.
func ScopeAttempt(ctx context.Context) (_ context.Context, end func()) {
	a, ok := ctx.Value(attemptKey{}).(attemptRef)
	if !ok {
		return ctx, func() {}
	}
	a.outer, a.ended = a.ended, new(atomic.Bool)
	return context.WithValue(ctx, attemptKey{}, a), func() { a.ended.Store(true) }
}

// SetOutput keeps raw (and its redacted display) as the output of the
// attempt ctx carries, replacing an earlier one; ok is false when ctx
// carries none. It is written with the attempt's successful completion.
// Once the attempt ended it writes nothing and returns ErrStale.
func SetOutput(ctx context.Context, raw, display []byte) (ok bool, err error) {
	a, ok := ctx.Value(attemptKey{}).(attemptRef)
	if !ok {
		return false, nil
	}
	a.out.mu.Lock()
	defer a.out.mu.Unlock()
	if a.over() {
		return true, a.errEnded("output")
	}
	a.out.raw, a.out.display = raw, display
	return true, nil
}

// OutputOf returns the output the attempt ctx carries recorded (nil when
// none), for its completion.
func OutputOf(ctx context.Context) (raw, display []byte) {
	a, ok := ctx.Value(attemptKey{}).(attemptRef)
	if !ok {
		return nil, nil
	}
	a.out.mu.Lock()
	defer a.out.mu.Unlock()
	return a.out.raw, a.out.display
}

// AttemptOf returns the ledger, queue and job id of the attempt ctx
// carries; ok is false when it carries none.
func AttemptOf(ctx context.Context) (l *Ledger, q, id string, ok bool) {
	a, ok := ctx.Value(attemptKey{}).(attemptRef)
	return a.l, a.q, a.id, ok
}

// ProgressOf reports progress for the attempt ctx carries (WithAttempt);
// ok is false, and nothing is done, when ctx carries none. Once the
// attempt ended it writes nothing and returns ErrStale.
func ProgressOf(ctx context.Context, done, total int64, note string) (ok bool, err error) {
	a, ok := ctx.Value(attemptKey{}).(attemptRef)
	if !ok {
		return false, nil
	}
	if a.over() {
		return true, a.errEnded("progress")
	}
	if cause := context.Cause(ctx); errors.Is(cause, lease.ErrLost) {
		// The attempt lost the job (its context was cancelled for it):
		// stale, not merely a cancelled call.
		return true, fmt.Errorf("%w: progress of job %s by token %s: %w", ErrStale, a.id, a.tok, cause)
	}
	return true, a.l.ReportProgress(ctx, a.q, a.id, a.tok, done, total, note)
}
