package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/fencedq/fencedq/jobs"
)

// heldJob is a job of logical queue "transfers" in ledger queue lq whose
// one attempt held key's permit (and counted one start of the rate) from
// start for d.
func heldJob(lq, key string, start time.Time, d time.Duration) *jobView {
	return &jobView{queue: transfersQueue, id: fmt.Sprint(lq, key, start.UnixNano()),
		rec:  &jobs.Record{Queue: lq, LimitKey: key, RateKey: rateKey},
		hist: []jobs.Entry{{Event: "attempt", At: start}, {Event: "end", At: start.Add(d)}}}
}

// TestFlowChecksArePerPartition: limits and rates are per ledger queue, so
// on a partitioned queue each partition has its own. Two partitions each
// at the limit (and each at the rate) are not a violation; one partition
// over it is.
func TestFlowChecksArePerPartition(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	o := &options{LimitPerAccount: 2, RateLimit: 2}
	run := func(views []*jobView) *report {
		rep := newReport("fencedq", o)
		checkFlow(o, map[string][]*jobView{"op": views}, rep)
		return rep
	}
	var within []*jobView
	for _, lq := range []string{"transfers#0", "transfers#1"} {
		for i := range 2 {
			within = append(within, heldJob(lq, "inbound:acct-1", t0.Add(time.Duration(i)*time.Millisecond), 100*time.Millisecond))
		}
	}
	if rep := run(within); rep.violationCount() != 0 {
		t.Fatalf("two partitions each at the limit and the rate: want no violation, got %v", rep.Violations)
	}
	over := append(within, heldJob("transfers#1", "inbound:acct-1", t0.Add(5*time.Millisecond), 100*time.Millisecond))
	rep := run(over)
	var holders, rate bool
	for _, c := range rep.Checks {
		switch c.Name {
		case "never more than N holders":
			holders = c.Violations > 0
		case "rate never exceeded":
			rate = c.Violations > 0
		}
	}
	if !holders || !rate {
		t.Fatalf("three holders and starts in one partition: want both checks violated, got %v", rep.Violations)
	}
}
