package jobs

import (
	"context"
	"unicode"
	"unicode/utf8"

	"github.com/fencedq/fencedq/internal/ledger"
)

// ProgressReport is the latest progress an attempt reported with
// [Progress]: done of total (total 0: unknown), a note, the attempt and
// its token, and when Redis recorded it. [Record].Progress holds it.
//
// go doc github.com/fencedq/fencedq/internal/ledger.Progress lists its fields.
type ProgressReport = ledger.Progress

// MaxProgressNote is the longest note [Progress] takes, in bytes.
const MaxProgressNote = 200

// Progress records how far the running attempt got, for the dashboard's
// job page and `fencedq inspect`: done of total steps (total 0 when the
// total is unknown) and a short note about the step reached ("batch 3 of
// 10"). Call it with the context the handler was given; each call is one
// Redis round trip, so report every few seconds or every few percent, not
// for every item.
//
// Progress is fenced like the attempt's commit: only the attempt that
// runs the job may write it. An attempt that lost the job (its lease
// expired and a newer attempt took over, or it already ended: the handler
// returned, and this is a goroutine it left running) gets an error
// matching [ErrStale] and nothing is written, so a stale attempt
// never overwrites the current one's progress. A context that no attempt
// gave returns [ErrNoAttempt]; done < 0, total < 0, done > total when total
// is known, or a note longer than [MaxProgressNote], not valid UTF-8 or
// holding control characters, return [ErrInvalid], before any write. Notes
// are shown as they are: never put a secret in one.
//
// Pools, the asynq bridge and fencedqtest's inline attempts give their
// handlers such a context. The report stays after the attempt ends (the
// job page shows the last one, with its attempt number); the next
// attempt's first report replaces it.
func Progress(ctx context.Context, done, total int64, note string) error {
	switch {
	case done < 0 || total < 0:
		return invalid("progress: done and total must not be negative (got %d of %d)", done, total)
	case total > 0 && done > total:
		return invalid("progress: done %d is more than the total %d", done, total)
	case len(note) > MaxProgressNote:
		return invalid("progress: the note is %d bytes, more than %d", len(note), MaxProgressNote)
	case !utf8.ValidString(note):
		return invalid("progress: the note is not valid UTF-8")
	}
	for _, r := range note {
		if unicode.IsControl(r) {
			return invalid("progress: the note holds a control character")
		}
	}
	ok, err := ledger.ProgressOf(ctx, done, total, note)
	if !ok {
		return ErrNoAttempt
	}
	return err
}
