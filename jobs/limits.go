package jobs

import (
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/metrics"
)

// Limiter is implemented by args whose attempts share a concurrency limit:
// at most max attempts of jobs returning the same key run at once, across
// every pool and process serving the job's queue. A job that cannot get a
// permit is parked (not claimed, no attempt consumed) until one frees; jobs
// of other keys behind it are claimed as usual.
//
// The key's part before the first ':' is the limit's name, used as a metric
// label and in the pool's logs ("export" for "export:cust-42"): keep it one
// of a few fixed words. A key without a ':', or with nothing before it, has
// no name (as a whole it may be user data: "cust-42") and counts as
// "unnamed". A pool labels at most 50 distinct names; any more count as
// "other". A constant key ("export:all") limits the whole kind; the same
// key returned by every kind of a queue limits the queue. Limits are scoped to the job's queue (every
// key of a queue lives in one Redis hash slot, so the claim checks the limit
// in the same script): the same key on two queues is two limits. On a
// partitioned queue a job without a partition key goes to the partition its
// limit's key picks, so the limit holds across the partitions; jobs with
// partition keys share it within each partition, as do unique jobs (a
// unique job goes where its unique key picks, so a duplicate meets the job
// it duplicates).
//
// An attempt's permit is fenced by the attempt's token: renewed with the
// attempt, released when it ends, reclaimed when its lease expires (the
// maintenance leader's expirer), after which the old attempt can neither
// renew nor complete, and storage fenced by its token refuses it once the
// job runs again. Return an empty key for no limit. A Limit method that
// panics, or an invalid key or max, fails the enqueue with ErrInvalid,
// nothing written (the error names the limit by its name only).
type Limiter interface {
	Limit() (key string, max int)
}

// RateLimiter is implemented by args whose starts share a rate limit: at
// most max attempts of jobs returning the same key start per period, in any
// window of that length, by Redis's clock (the namespace's time), across
// every pool and process serving the queue. A job held back is due again at
// the earliest start the rate allows: no polling, no attempt consumed, no
// retry counted. Naming, scope and labels are as for Limiter. Jobs naming
// one key with different periods (two kinds, or jobs enqueued before the
// rate was changed) each count the starts of their own period that the key
// kept: it keeps the starts of the longest period started under it, so a
// job of a longer period than any started in its window counts only the
// starts of the shorter one. A Redis failover that loses starts (a replica
// behind the primary promoted) lets the key start at most max plus the
// starts lost in that period. Return an empty key for no rate limit.
type RateLimiter interface {
	RateLimit() (key string, max int, per time.Duration)
}

// Limits of the flow-control keys (Limit, Rate).
const (
	MaxFlowKeyLen = 200       // bytes of a limit's or rate's key
	MaxFlowMax    = 1_000_000 // the largest max of a limit or rate
	MaxRatePeriod = 24 * time.Hour
)

// Limit sets the job's concurrency limit (see Limiter), for EnqueueRaw or
// to override the args' Limit method (an empty key: no limit).
func Limit(key string, max int) Option {
	return func(o *options) { o.limitKey, o.limitMax, o.limitSet = key, max, true }
}

// Rate sets the job's rate limit (see RateLimiter), for EnqueueRaw or to
// override the args' RateLimit method (an empty key: no rate limit).
func Rate(key string, max int, per time.Duration) Option {
	return func(o *options) { o.rateKey, o.rateMax, o.ratePer, o.rateSet = key, max, per, true }
}

// flowArgs fills o's flow control from args' methods where no option set
// it (a method's panic: ErrInvalid).
func flowArgs(args JobArgs, o *options) error {
	if l, ok := args.(Limiter); ok && !o.limitSet {
		if err := guard(args, "Limit", func() { o.limitKey, o.limitMax = l.Limit() }); err != nil {
			return err
		}
	}
	if r, ok := args.(RateLimiter); ok && !o.rateSet {
		return guard(args, "RateLimit", func() { o.rateKey, o.rateMax, o.ratePer = r.RateLimit() })
	}
	return nil
}

// flowOf validates o's flow control; nil when the job has none.
func flowOf(o *options) (*ledger.Flow, error) {
	if o.limitKey == "" && o.rateKey == "" {
		return nil, nil
	}
	f := &ledger.Flow{}
	if o.limitKey != "" {
		if err := validFlowKey("limit", o.limitKey, o.limitMax); err != nil {
			return nil, err
		}
		f.LimitKey, f.LimitMax = o.limitKey, o.limitMax
	}
	if o.rateKey != "" {
		if err := validFlowKey("rate", o.rateKey, o.rateMax); err != nil {
			return nil, err
		}
		if o.ratePer < time.Millisecond || o.ratePer > MaxRatePeriod {
			return nil, invalid("%s: period %v must be between 1ms and %v", flowNamed("rate", o.rateKey), o.ratePer, MaxRatePeriod)
		}
		f.RateKey, f.RateMax, f.RatePer = o.rateKey, o.rateMax, roundUpMS(o.ratePer)
	}
	return f, nil
}

// validFlowKey checks a limit's or rate's key and max; its errors name
// the key by its name only (flowNamed).
func validFlowKey(what, key string, max int) error {
	switch {
	case len(key) > MaxFlowKeyLen:
		return invalid("%s: key of %d bytes exceeds %d", flowNamed(what, key), len(key), MaxFlowKeyLen)
	case !utf8.ValidString(key) || strings.ContainsFunc(key, unicode.IsControl):
		return invalid("%s: key must be UTF-8 without control characters", flowNamed(what, key))
	case max < 1 || max > MaxFlowMax:
		return invalid("%s: max %d is outside 1-%d", flowNamed(what, key), max, MaxFlowMax)
	}
	return nil
}

// flowNamed names a limit or rate (what) in an error by its key's name,
// the part before its ':' (`limit "export"`), or "(unnamed)": the rest of
// a key, or a key without a name, may be user data.
func flowNamed(what, key string) string {
	if name := metrics.FlowKeyName(key); name != "" {
		return fmt.Sprintf("%s %q", what, ledger.Clip(name))
	}
	return what + " (unnamed)"
}
