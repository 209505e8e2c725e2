package worker

import (
	"context"
	"log/slog"

	"github.com/fencedq/fencedq/internal/ledger"
)

// jobLog logs with a job's attributes; they are only built when a line is
// actually written, so a quiet logger costs nothing per job.
type jobLog struct {
	l   *slog.Logger
	job *ledger.Claimed
}

// enabled reports whether a line at level would be written.
func (j *jobLog) enabled(level slog.Level) bool { return j.l.Enabled(context.Background(), level) }

func (j *jobLog) log(level slog.Level, msg string, args ...any) {
	ctx := context.Background()
	if !j.l.Enabled(ctx, level) {
		return
	}
	c := j.job
	kind := c.Kind
	if ledger.ValidateKind(kind) != nil { // a record edited by hand: not echoed
		kind = "invalid"
	}
	all := make([]any, 0, 12+len(args))
	all = append(all, "queue", c.Queue, "kind", kind, "job_id", c.ID,
		"operation_id", c.OperationID, "attempt", c.Attempt, "token", c.Token.String())
	j.l.Log(ctx, level, msg, append(all, args...)...)
}

// Debug logs at debug level.
func (j *jobLog) Debug(msg string, args ...any) { j.log(slog.LevelDebug, msg, args...) }

// Info logs at info level.
func (j *jobLog) Info(msg string, args ...any) { j.log(slog.LevelInfo, msg, args...) }

// Warn logs at warn level.
func (j *jobLog) Warn(msg string, args ...any) { j.log(slog.LevelWarn, msg, args...) }

// Error logs at error level.
func (j *jobLog) Error(msg string, args ...any) { j.log(slog.LevelError, msg, args...) }
