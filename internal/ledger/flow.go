package ledger

import "time"

// Flow is a job's flow control (flow.lua): a concurrency limit, a rate
// limit, or both. Its keys are scoped to the job's queue: every key of a
// queue lives in one Redis hash slot, so the claim checks them atomically.
type Flow struct {
	// LimitKey names the concurrency limit ("" = none): at most LimitMax
	// running attempts of the queue hold a permit of the key at once.
	LimitKey string
	LimitMax int
	// RateKey names the rate limit ("" = none): at most RateMax attempts of
	// the queue start per RatePer (whole milliseconds), by Redis's clock.
	RateKey string
	RateMax int
	RatePer time.Duration
}

// args are enqueue_unique.lua's five flow values (a nil f: none).
func (f *Flow) args() []any {
	if f == nil {
		return []any{"", 0, "", 0, 0}
	}
	return []any{f.LimitKey, f.LimitMax, f.RateKey, f.RateMax, f.RatePer.Milliseconds()}
}
