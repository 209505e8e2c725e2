package worker

import (
	"context"
	"log/slog"
)

// jobLog logs with a job's attributes; they are only formatted when a line
// is actually written, so a quiet logger costs nothing per job.
type jobLog struct {
	l     *slog.Logger
	attrs []any
}

func (j *jobLog) log(level slog.Level, msg string, args ...any) {
	ctx := context.Background()
	if !j.l.Enabled(ctx, level) {
		return
	}
	all := make([]any, 0, len(j.attrs)+len(args))
	j.l.Log(ctx, level, msg, append(append(all, j.attrs...), args...)...)
}

// Debug logs at debug level.
func (j *jobLog) Debug(msg string, args ...any) { j.log(slog.LevelDebug, msg, args...) }

// Info logs at info level.
func (j *jobLog) Info(msg string, args ...any) { j.log(slog.LevelInfo, msg, args...) }

// Warn logs at warn level.
func (j *jobLog) Warn(msg string, args ...any) { j.log(slog.LevelWarn, msg, args...) }

// Error logs at error level.
func (j *jobLog) Error(msg string, args ...any) { j.log(slog.LevelError, msg, args...) }
