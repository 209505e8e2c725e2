package dashboard

import (
	"math"
	"testing"
	"time"

	"github.com/fencedq/fencedq/jobs"
)

func TestSamplerRates(t *testing.T) {
	s := newSampler(time.Minute)
	t0 := time.UnixMilli(1_700_000_000_000)
	if tp := s.observe("q", counters{at: t0, attempted: 10, succeeded: 8}); tp != nil {
		t.Fatalf("rate from one sample: %+v", tp)
	}
	if tp := s.observe("q", counters{at: t0.Add(500 * time.Millisecond), attempted: 11}); tp != nil {
		t.Fatalf("rate over half a second: %+v", tp)
	}
	tp := s.observe("q", counters{at: t0.Add(10 * time.Second), attempted: 30, succeeded: 28, dead: 1, fenced: 5})
	if tp == nil || tp.WindowSeconds != 10 || tp.Attempted != 2 || tp.Succeeded != 2 || tp.Dead != 0.1 || tp.Fenced != 0.5 {
		t.Fatalf("rates: %+v", tp)
	}
	// Samples older than the window are dropped (one is kept to measure from).
	for i := 1; i <= 120; i++ {
		s.observe("q", counters{at: t0.Add(10*time.Second + time.Duration(i)*time.Second), attempted: 30 + int64(i), succeeded: 28 + int64(i)})
	}
	tp = s.observe("q", counters{at: t0.Add(131 * time.Second), attempted: 151, succeeded: 149})
	if tp == nil || tp.WindowSeconds > 61 || math.Abs(tp.Attempted-1) > 1e-9 {
		t.Fatalf("windowed rates: %+v", tp)
	}
	if n := len(s.samples["q"]); n > 62 {
		t.Fatalf("%d samples kept", n)
	}
	// A counter that went down (namespace reset) restarts the window.
	if tp := s.observe("q", counters{at: t0.Add(132 * time.Second), attempted: 1}); tp != nil {
		t.Fatalf("rate across a reset: %+v", tp)
	}
	s.observe("gone", counters{at: t0})
	s.forget([]string{"q"})
	if _, ok := s.samples["gone"]; ok {
		t.Fatal("forgotten queue kept")
	}
}

func TestAttemptsFromHistory(t *testing.T) {
	at := func(s int) time.Time { return time.UnixMilli(int64(s) * 1000) }
	h := []jobs.Entry{
		{Event: "enqueued", At: at(0)},
		{Event: "attempt", At: at(1), Attempt: 1, Token: "100", Owner: "w1/j"},
		{Event: "end", At: at(2), Attempt: 1, Token: "100", Outcome: "pending", Error: "boom"},
		{Event: "attempt", At: at(3), Attempt: 2, Token: "200", Owner: "w2/j"},
		{Event: "end", At: at(9), Attempt: 2, Token: "200", Fence: "7", Outcome: "uncertain", Reason: "lease expired without commit"},
		{Event: "resolve", At: at(10), Decision: "rerun", Actor: "reconciler"},
		{Event: "attempt", At: at(11), Attempt: 3, Token: "300", Owner: "w3/j"},
		{Event: "fenced", At: at(12), Stage: "commit", Token: "200", Outcome: "succeeded", Error: "late"},
		{Event: "fenced", At: at(13), Stage: "commit", Token: "50", Outcome: "dead"},
		{Event: "cancel", At: at(14), From: "running", Actor: "operator:alice", Note: "wrong amount"},
	}
	a := attemptsOf(h)
	if len(a) != 4 {
		t.Fatalf("attempts: %+v", a)
	}
	if a[0].Attempt != 1 || a[0].Outcome != "pending" || a[0].Error != "boom" || !a[0].Ended.Equal(at(2)) {
		t.Errorf("first: %+v", a[0])
	}
	if a[1].Outcome != "uncertain" || a[1].Fence != "7" || a[0].Fence != "" || len(a[1].Fenced) != 1 || a[1].Fenced[0].Outcome != "succeeded" || a[1].Fenced[0].Error != "late" {
		t.Errorf("second: %+v", a[1])
	}
	if a[2].Outcome != "running" || a[2].Token != "300" || !a[2].Ended.IsZero() {
		t.Errorf("third: %+v", a[2])
	}
	if a[3].Outcome != "fenced" || a[3].Token != "50" {
		t.Errorf("unknown token: %+v", a[3])
	}
}

func TestCSRFTokens(t *testing.T) {
	a := &Handler{csrfKey: []byte("key-a")}
	b := &Handler{csrfKey: []byte("key-b")}
	tok := a.newCSRFToken()
	if !a.validCSRF(tok) || b.validCSRF(tok) {
		t.Fatal("signature check")
	}
	if a.newCSRFToken() == tok {
		t.Fatal("tokens repeat")
	}
	for _, bad := range []string{"", ".", "abc", "abc.", tok + "x", "x" + tok} {
		if a.validCSRF(bad) {
			t.Errorf("accepted %q", bad)
		}
	}
}
