package jobs_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fence/redisfence"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
)

// recordingFencer is the Redis fence store an operator's client fences
// attempts out of, recording the tokens it fenced.
type recordingFencer struct {
	fence.Fencer
	mu     sync.Mutex
	tokens []lease.Token
}

func (f *recordingFencer) FenceOnAcquire(ctx context.Context, fc fence.Fence) error {
	f.mu.Lock()
	f.tokens = append(f.tokens, fc.Token)
	f.mu.Unlock()
	return f.Fencer.FenceOnAcquire(ctx, fc)
}

func (f *recordingFencer) fenced() []lease.Token {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]lease.Token(nil), f.tokens...)
}

// TestNotAppliedDecisionHeldToItsRead: a client given Config.Fencer reads
// the job before a "not applied" decision (a rerun or dead) and fences its
// last attempt out only when that read finds it uncertain or in review. The
// job moves between that read and the decision: a dead or cancelled job
// another operator re-ran, which was claimed and whose attempt ended with
// an unknown outcome; a running job whose attempt ended so; a job selected
// as uncertain in bulk that went dead and came back uncertain on a new
// attempt; an uncertain job another operator gave up. The decision must
// fail with ErrWrongState and write nothing, else it says "not applied" of
// an attempt never fenced out (whose late write would still land), or
// overrides a decision it never saw.
func TestNotAppliedDecisionHeldToItsRead(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	store, err := redisfence.New(rdb, redisfence.Config{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	fr := &recordingFencer{Fencer: store}
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns, Fencer: fr})
	other := jobs.NewClient(rdb, jobs.Config{Namespace: ns}) // another operator
	in := c.Inspector()
	l := ledger.New(rdb, ledger.Config{Namespace: ns})
	const q = "q"

	claim := func(id string) lease.Token {
		t.Helper()
		a, err := l.ClaimJob(ctx, q, id, "w1", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return a.Token
	}
	end := func(id string, tok lease.Token, to jobs.State) {
		t.Helper()
		cs, err := l.Complete(ctx, q, []ledger.Completion{{ID: id, Token: tok,
			Outcome: ledger.Outcome{To: to, Error: "gateway timed out", Reason: "outcome unknown"}}})
		if err != nil || !cs[0].Applied || cs[0].State != to {
			t.Fatalf("ending attempt %d %s: %+v, %v", tok, to, cs, err)
		}
	}
	enqueue := func(opts ...jobs.Option) string {
		t.Helper()
		res, err := c.Enqueue(ctx, noteArgs{}, append(opts, jobs.Queue(q))...)
		if err != nil {
			t.Fatal(err)
		}
		return res.JobID
	}
	dead := func() string {
		id := enqueue()
		end(id, claim(id), jobs.Dead)
		return id
	}
	cancelled := func() string {
		id := enqueue(jobs.Delay(time.Hour))
		if _, err := other.Cancel(ctx, q, id, "bob", "not needed"); err != nil {
			t.Fatal(err)
		}
		return id
	}
	running := func() string {
		id := enqueue()
		claim(id)
		return id
	}
	uncertain := func() string {
		id := enqueue()
		end(id, claim(id), jobs.Uncertain)
		return id
	}
	// rerunAndLose: another operator re-runs the job, a pool claims it and
	// its attempt ends uncertain (its handler returned jobs.Unknown; or its
	// lease lapsed).
	rerunAndLose := func(id string) {
		if _, err := other.Resolve(ctx, q, id, jobs.DecideRerun, "bob", "retry"); err != nil {
			t.Fatal(err)
		}
		end(id, claim(id), jobs.Uncertain)
	}
	lose := func(id string) {
		rec, err := in.Get(ctx, q, id)
		if err != nil {
			t.Fatal(err)
		}
		end(id, rec.Token, jobs.Uncertain)
	}
	giveUp := func(id string) {
		if _, err := other.Resolve(ctx, q, id, jobs.DecideDead, "bob", "refunded by hand"); err != nil {
			t.Fatal(err)
		}
	}

	for _, tc := range []struct {
		name      string
		job       func() string
		seen      *jobs.Seen // nil: Resolve
		decision  jobs.Decision
		meanwhile func(id string)
	}{
		{"dead re-run, re-run by another and lost meanwhile", dead, nil, jobs.DecideRerun, rerunAndLose},
		{"cancelled re-run, re-run by another and lost meanwhile", cancelled, nil, jobs.DecideRerun, rerunAndLose},
		{"running given up, its attempt lost meanwhile", running, nil, jobs.DecideDead, lose},
		{"running re-run, its attempt lost meanwhile", running, nil, jobs.DecideRerun, lose},
		{"bulk re-run of uncertain jobs, dead at the click, re-run and lost meanwhile", dead,
			&jobs.Seen{State: jobs.Uncertain, AnyToken: true}, jobs.DecideRerun, rerunAndLose},
		{"bulk re-run of dead jobs, re-run and lost meanwhile", dead,
			&jobs.Seen{State: jobs.Dead, AnyToken: true}, jobs.DecideRerun, rerunAndLose},
		{"uncertain re-run, given up by another meanwhile", uncertain, nil, jobs.DecideRerun, giveUp},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := tc.job()
			var after *jobs.Record
			var hist int
			called := false
			jobs.AfterDecisionReadForTest(c, func() {
				if called {
					return
				}
				called = true
				tc.meanwhile(id)
				var err error
				if after, err = in.Get(ctx, q, id); err != nil {
					t.Fatal(err)
				}
				h, err := in.History(ctx, q, id)
				if err != nil {
					t.Fatal(err)
				}
				hist = len(h)
			})
			defer jobs.AfterDecisionReadForTest(c, nil)
			var err error
			if tc.seen != nil {
				_, err = c.ResolveSeen(ctx, q, id, *tc.seen, tc.decision, "alice", "the gateway has no such charge")
			} else {
				_, err = c.Resolve(ctx, q, id, tc.decision, "alice", "the gateway has no such charge")
			}
			if !called {
				// refused before it read: nothing could move in between
				if !errors.Is(err, jobs.ErrWrongState) {
					t.Fatalf("decision: %v, want ErrWrongState", err)
				}
				return
			}
			rec, gerr := in.Get(ctx, q, id)
			if gerr != nil {
				t.Fatal(gerr)
			}
			h, herr := in.History(ctx, q, id)
			if herr != nil {
				t.Fatal(herr)
			}
			if !errors.Is(err, jobs.ErrWrongState) || rec.State != after.State || rec.Token != after.Token || rec.Runs != after.Runs || len(h) != hist {
				t.Fatalf("%s decided after the job moved to %s (token %d, run %d): %v; job now %s (token %d, run %d), %d history entries (%d before); "+
					"attempts fenced out %v: want ErrWrongState and nothing written",
					tc.decision, after.State, after.Token, after.Runs, err, rec.State, rec.Token, rec.Runs, len(h), hist, fr.fenced())
			}
		})
	}
}
