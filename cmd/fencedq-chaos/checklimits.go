package main

import (
	"sort"
	"time"

	"github.com/fencedq/fencedq/jobs"
)

// Flow control in the workload (--limit-per-account, --rate-limit): every
// transfer holds a permit of its destination account's concurrency limit
// and counts against one rate for all transfers.
const (
	limitPrefix = "inbound:"
	rateKey     = "transfers"
)

// flowOptions are a transfer's enqueue options for o's flow control.
func flowOptions(o *options, to string) []jobs.Option {
	var opts []jobs.Option
	if o.LimitPerAccount > 0 {
		opts = append(opts, jobs.Limit(limitPrefix+to, o.LimitPerAccount))
	}
	if o.RateLimit > 0 {
		opts = append(opts, jobs.Rate(rateKey, o.RateLimit, time.Second))
	}
	return opts
}

// permitSpan is one attempt's hold of a permit, by the ledger's (Redis's)
// clock: from its claim to its end (completion or expiry).
type permitSpan struct {
	key        string
	start, end time.Time
}

// attemptSpans reads each attempt of a job from its history: an attempt
// entry opens a span, the next end entry closes it. An attempt put back
// without running (a busy resource) has no end entry and is skipped: the
// check below counts a subset of the holds, never a hold that was not.
func attemptSpans(key string, hist []jobs.Entry) (spans []permitSpan, starts []time.Time) {
	var open *permitSpan
	for _, e := range hist {
		switch e.Event {
		case "attempt":
			starts = append(starts, e.At)
			open = &permitSpan{key: key, start: e.At}
		case "end":
			if open != nil {
				open.end = e.At
				spans = append(spans, *open)
				open = nil
			}
		}
	}
	return spans, starts
}

// checkFlow adds the flow-control checks over the ledger's jobs: never more
// than the limit's holders of a key at once, and never more than the rate's
// starts in any one-second window.
func checkFlow(o *options, views map[string][]*jobView, rep *report) {
	if o.LimitPerAccount <= 0 && o.RateLimit <= 0 {
		return
	}
	var spans []permitSpan
	starts := map[string][]time.Time{} // queue -> attempt starts
	for _, vs := range views {
		for _, v := range vs {
			if v.rec == nil {
				continue
			}
			// Limits and rates are per ledger queue: a priority copy's
			// queue has its own, and so has each partition of a
			// partitioned queue (the record's queue is the partition).
			q := v.rec.Queue
			sp, st := attemptSpans(q+" "+v.rec.LimitKey, v.hist)
			if v.rec.LimitKey != "" {
				spans = append(spans, sp...)
			}
			if v.rec.RateKey != "" {
				starts[q] = append(starts[q], st...)
			}
		}
	}
	if n := o.LimitPerAccount; n > 0 {
		c := rep.newCheck("never more than N holders", "no more than --limit-per-account attempts of transfers to one account held a permit at once in one queue (limits are per queue, and per partition of a partitioned queue), by the ledger's attempt and end times")
		type ev struct {
			at    time.Time
			delta int
			key   string
		}
		var evs []ev
		for _, s := range spans {
			evs = append(evs, ev{s.start, 1, s.key}, ev{s.end, -1, s.key})
		}
		// Ends first at the same millisecond: a permit released and taken
		// in the same millisecond is one holder.
		sort.Slice(evs, func(i, j int) bool {
			if !evs[i].at.Equal(evs[j].at) {
				return evs[i].at.Before(evs[j].at)
			}
			return evs[i].delta < evs[j].delta
		})
		cur, most := map[string]int{}, 0
		for _, e := range evs {
			cur[e.key] += e.delta
			most = max(most, cur[e.key])
			if cur[e.key] > n {
				rep.fail(c, "%s: %d holders at %s, limit %d", e.key, cur[e.key], e.at.Format(time.RFC3339Nano), n)
			}
		}
		rep.Storage["limit_spans"] = int64(len(spans))
		rep.Storage["limit_most_holders"] = int64(most)
	}
	if n := o.RateLimit; n > 0 {
		c := rep.newCheck("rate never exceeded", "no one-second window holds more than --rate-limit attempt starts in one queue (rates are per queue, and per partition of a partitioned queue), by the ledger's attempt times")
		for q, st := range starts {
			sort.Slice(st, func(i, j int) bool { return st[i].Before(st[j]) })
			for i := 0; i+n < len(st); i++ {
				if d := st[i+n].Sub(st[i]); d < time.Second {
					rep.fail(c, "queue %s: %d starts within %v from %s, rate %d per second", q, n+1, d, st[i].Format(time.RFC3339Nano), n)
				}
			}
			rep.Storage["rate_starts"] += int64(len(st))
		}
	}
}
