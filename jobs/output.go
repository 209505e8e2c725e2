package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/fencedq/fencedq/internal/ledger"
)

// MaxOutput is the largest output RecordOutput takes, in bytes of JSON.
const MaxOutput = 64 << 10

// RecordOutput records v, encoded as JSON, as the output of the running
// attempt, for Client.Output, `fencedq inspect`, the dashboard's job page
// and the steps of a workflow that depend on this job. Call it with the
// context the handler was given; a later call replaces the earlier value.
//
// Nothing is written by the call: the output is written with the
// attempt's successful completion, in the same script and only if the
// attempt's token still runs the job. An attempt that fails, or whose
// completion is fenced (its lease expired and a newer attempt took over),
// leaves no output, so a stale attempt never overwrites the output of the
// one that succeeded. A call after the handler returned (from a goroutine
// it left running) records nothing and returns an error matching
// [ErrStale]. A context that no attempt gave returns
// [ErrNoAttempt]; a value that does not encode, or encodes to more than
// [MaxOutput] bytes, returns [ErrInvalid]. Fields tagged
// `fencedq:"sensitive"` are shown redacted like args (see RedactJSON);
// Client.Output returns them as recorded.
func RecordOutput(ctx context.Context, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return invalid("output: %v", err)
	}
	if len(raw) > MaxOutput {
		return invalid("output: %d bytes of JSON, more than %d", len(raw), MaxOutput)
	}
	shown, err := RedactJSON(v)
	if err != nil {
		return invalid("output: %v", err)
	}
	ok, err := ledger.SetOutput(ctx, raw, shown)
	if !ok {
		return ErrNoAttempt
	}
	return err
}

// Output decodes into v the output job id of queue q (for a job of a
// partitioned queue, the queue's name or its partition's) recorded with its
// success (see RecordOutput), sensitive fields included. It returns
// [ErrNotFound] when there is no such job and [ErrNoOutput] when the job
// has none (not succeeded yet, or nothing recorded), matching
// [ErrDecidedWithoutOutput] too when it was marked succeeded after its
// outcome was unknown (Resolve with DecideSucceeded, or a reconciler).
func (c *Client) Output(ctx context.Context, q, id string, v any) error {
	if err := c.err(); err != nil {
		return err
	}
	if err := ledger.ValidateQueueRef(q); err != nil {
		return err
	}
	q, err := locate(ctx, c.ledger, q, id) // a partitioned queue's name: the job's partition
	if err != nil {
		return err
	}
	raw, _, err := c.ledger.Output(ctx, q, id)
	if err != nil {
		return notFoundIn(ctx, c.ledger, q, err)
	}
	if raw == "" {
		return noOutput(ctx, c.ledger, q, id, "job "+ledger.ShownID(id))
	}
	return decodeOutput(id, raw, v)
}

// noOutput is the error for job id of queue q (what names it) recording
// no output: ErrDecidedWithoutOutput, naming who decided, when its last
// resolution marked it succeeded (its history says so), else ErrNoOutput.
// The history is read only here, when there is no output.
func noOutput(ctx context.Context, l *ledger.Ledger, q, id, what string) error {
	h, err := l.History(ctx, q, id)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("jobs: reading the history of %s, which has no output: %w", what, err)
	}
	for i := len(h) - 1; i >= 0; i-- {
		if h[i].Event != "resolve" {
			continue
		}
		if h[i].Decision == string(DecideSucceeded) {
			return fmt.Errorf("%w: %s was marked succeeded by %s (from %s: its attempt's outcome was unknown, and it recorded no output)",
				ErrDecidedWithoutOutput, what, h[i].Actor, h[i].From)
		}
		break
	}
	return fmt.Errorf("%w: %s", ErrNoOutput, what)
}

func decodeOutput(id, raw string, v any) error {
	if raw == "" {
		return fmt.Errorf("%w: job %s", ErrNoOutput, id)
	}
	if err := decodeJSON([]byte(raw), v, "output"); err != nil { // quotes no sensitive value, as args
		return fmt.Errorf("jobs: decoding the output of job %s: %w", id, err)
	}
	return nil
}

// DependencyOutput decodes into v the output of step, a step this job's
// workflow step depends on, directly or through other steps (see package
// workflow). Call it with the context the handler was given. A step runs
// only after every dependency it waits for succeeded, so their outputs are
// final. It returns [ErrNoAttempt] outside a handler, [ErrInvalid] when
// this job is not a workflow step or step is not one it depends on, and
// [ErrNoOutput] when that step recorded none (or failed and was allowed
// to, or its job expired: its retention, jobs.Config.Retention, passed
// before this step ran), matching [ErrDecidedWithoutOutput] too when it
// was marked succeeded after its outcome was unknown (an operator's
// DecideSucceeded, or a reconciler): its attempt recorded none.
func (j *Job[T]) DependencyOutput(ctx context.Context, step string, v any) error {
	l, q, id, ok := ledger.AttemptOf(ctx)
	if !ok {
		return ErrNoAttempt
	}
	if q != j.Queue || id != j.ID {
		return errors.New("jobs: DependencyOutput needs the context given with this job")
	}
	ref, err := l.StepOf(ctx, q, id, step)
	if err != nil {
		return err
	}
	raw, _, err := l.Output(ctx, ref.Queue, ref.ID)
	if errors.Is(err, ErrNotFound) {
		return fmt.Errorf("%w: step %s (job %s) expired: its retention passed before this step ran", ErrNoOutput, step, ref.ID)
	}
	if err != nil {
		return err
	}
	if raw == "" {
		return noOutput(ctx, l, ref.Queue, ref.ID, "step "+step+" (job "+ledger.ShownID(ref.ID)+")")
	}
	return decodeOutput(ref.ID, raw, v)
}
