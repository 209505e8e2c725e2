package jobs

import (
	"context"
	"errors"

	"github.com/fencedq/fencedq/internal/ledger"
)

// LimitStatus is one concurrency limit's key at its limit or with parked
// jobs: its max, the job ids holding a permit, how many jobs wait.
//
// go doc github.com/fencedq/fencedq/internal/ledger.LimitStatus lists its fields.
type LimitStatus = ledger.LimitStatus

// RateStatus is one rate limit's key: its max per period, the starts in the
// last period, the jobs deferred to a later start.
//
// go doc github.com/fencedq/fencedq/internal/ledger.RateStatus lists its fields.
type RateStatus = ledger.RateStatus

// FlowStatus is a queue's flow control as Inspector.Limits reads it.
type FlowStatus struct {
	// Limits are the concurrency limits with parked jobs, or at their
	// limit once a job parked on them, keys at their limit first (of a
	// partitioned queue, per partition).
	Limits []LimitStatus `json:"limits"`
	// Rates are the rate limits with deferred jobs (a rate whose window
	// filled without deferring a job is not listed).
	Rates []RateStatus `json:"rates"`
}

// Limits returns queue q's concurrency limits and rate limits (see Limiter,
// RateLimiter) that hold jobs back: keys with parked jobs, or at their
// limit once a job parked on them, their holders, how many jobs wait;
// rates with deferred jobs. A key whose jobs all run at once is not
// listed, nor one at its limit on which no job parked yet (a claim records
// a key only when it parks a job): its next due job parks; likewise a rate
// whose window filled without deferring a job (a claim records a rate only
// when it defers a job): its next due job is deferred, and lists it.
// Keys built from sensitive args fields show them redacted (see
// LimitStatus.Key). When some partitions of a partitioned queue could not
// be read, it returns the others' with a *PartialError naming them.
func (in *Inspector) Limits(ctx context.Context, q string) (*FlowStatus, error) {
	out := &FlowStatus{Limits: []LimitStatus{}, Rates: []RateStatus{}}
	err := in.eachOf(ctx, q, func(n string) error {
		ls, rs, err := in.l.Limits(ctx, n)
		out.Limits = append(out.Limits, ls...)
		out.Rates = append(out.Rates, rs...)
		return err
	})
	if err != nil && !errors.Is(err, ErrPartial) {
		return nil, err
	}
	return out, err
}
