package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
)

// TestPendingListSaysWhatAParkedJobWaitsFor: a job put back with a reason
// (its resource was busy) and parked on its full limit at its next claim
// is listed as waiting for that limit, not by the put-back's reason, which
// no longer says why it does not run.
func TestPendingListSaysWhatAParkedJobWaitsFor(t *testing.T) {
	e := newOperatorEnv(t)
	ctx := context.Background()
	lim := jobs.Limit("export:c1", 2)
	a := e.enqueue(lim)
	e.enqueue(lim)
	res, err := e.ledger.Claim(ctx, "default", "pool-1", time.Minute, 2)
	if err != nil || len(res.Jobs) != 2 {
		t.Fatalf("claim: %+v %v", res, err)
	}
	// two jobs enqueued in one millisecond are claimed in either order
	ja := res.Jobs[0]
	if ja.ID != a {
		ja = res.Jobs[1]
	}
	if ja.ID != a {
		t.Fatalf("claim did not take %s: %+v", a, res)
	}
	// a's resource was busy: put back, due again shortly
	if _, err := e.ledger.Complete(ctx, "default", []ledger.Completion{{ID: a, Token: ja.Token,
		Outcome: ledger.Outcome{Defer: true, Reason: "resource busy", RetryIn: 200 * time.Millisecond}}}); err != nil {
		t.Fatal(err)
	}
	h2 := e.enqueue(lim) // takes the permit a gave back
	e.claim(h2)
	// a comes due and is parked: h1 and h2 hold the limit
	deadline := time.Now().Add(testsignal.Timeout())
	for parked := false; !parked; {
		if time.Now().After(deadline) {
			t.Fatalf("job %s was not parked on its limit", a)
		}
		r, err := e.ledger.Claim(ctx, "default", "pool-1", time.Minute, 1)
		if err != nil || len(r.Jobs) > 0 {
			t.Fatalf("claim: %+v %v", r, err)
		}
		for _, d := range r.Dropped {
			parked = parked || d.ID == a && d.State == "limit:export"
		}
		if !parked {
			time.Sleep(20 * time.Millisecond) // polling for a's due time, not an assertion
		}
	}
	code, out, errOut := e.cli("inspect", "--state", "pending")
	if code != 0 {
		t.Fatalf("inspect --state pending: code %d, %s", code, errOut)
	}
	var row string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, a) {
			row = l
		}
	}
	if !strings.Contains(row, "waiting for limit export:c1, 2 of 2 held") {
		t.Errorf("the pending list's row of %s does not say what it waits for: %q\n%s", a, row, out)
	}
}
