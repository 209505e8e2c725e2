package ledger_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// fcall is one function call a client sent: the function's name (its
// library's prefix cut), its key count and its argument count.
type fcall struct {
	fn          string
	keys, nargs int
}

// fcallHook records the function calls of a client in calls.
type fcallHook struct{ calls *[]fcall }

func (fcallHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h fcallHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.record(cmd)
		return next(ctx, cmd)
	}
}

func (h fcallHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			h.record(cmd)
		}
		return next(ctx, cmds)
	}
}

func (h fcallHook) record(cmd redis.Cmder) {
	a := cmd.Args() // FCALL function numkeys keys... args...
	if len(a) < 3 || !strings.EqualFold(fmt.Sprint(a[0]), "fcall") {
		return
	}
	fn := fmt.Sprint(a[1])
	if _, rest, ok := strings.Cut(fn, "_"); ok { // fencedq_<hash>_<script>
		if _, name, ok := strings.Cut(rest, "_"); ok {
			fn = name
		}
	}
	n, _ := a[2].(int)
	*h.calls = append(*h.calls, fcall{fn: fn, keys: n, nargs: len(a) - 3 - n})
}

// TestCompleteShortSuccess: a plain success (no error, reason, fence nor
// output) goes to the completion as 3 values, the others as 9, and a batch
// mixing both forms (and a stale one) applies each outcome as it says.
func TestCompleteShortSuccess(t *testing.T) {
	rdb, _ := redistest.New(t)
	f := newFixture(t, rdb)
	var calls []fcall
	rdb.AddHook(fcallHook{calls: &calls})
	for range 5 {
		f.enqueue()
	}
	res, err := f.l.Claim(f.ctx, f.q, "w1", time.Minute, 10)
	if err != nil || len(res.Jobs) != 5 {
		t.Fatalf("claim: %+v, %v", res, err)
	}
	js := res.Jobs
	cs := []ledger.Completion{
		{ID: js[0].ID, Token: js[0].Token, Outcome: ledger.Outcome{To: jobs.Succeeded}},
		{ID: js[1].ID, Token: js[1].Token, Outcome: ledger.Outcome{To: jobs.Succeeded, Output: []byte(`{"n":1}`)}},
		{ID: js[2].ID, Token: js[2].Token - 1, Outcome: ledger.Outcome{To: jobs.Succeeded}}, // stale
		{ID: js[3].ID, Token: js[3].Token, Outcome: ledger.Outcome{To: jobs.Pending, Error: "boom", RetryIn: time.Hour}},
		{ID: js[4].ID, Token: js[4].Token, Outcome: ledger.Outcome{To: jobs.Succeeded}, Fence: 7},
	}
	calls = nil
	out, err := f.l.Complete(f.ctx, f.q, cs)
	if err != nil {
		t.Fatal(err)
	}
	// the prefix and the retention, then the outcomes
	if want := 2 + 3 + 9 + 3 + 9 + 9; len(calls) != 1 || calls[0].fn != "complete" || calls[0].nargs != want {
		t.Fatalf("completion calls %+v, want one of %d arguments", calls, want)
	}
	wantState := []jobs.State{jobs.Succeeded, jobs.Succeeded, jobs.Running, jobs.Pending, jobs.Succeeded}
	for i, c := range out {
		if c.State != wantState[i] || c.Applied != (i != 2) {
			t.Fatalf("outcome %d: %+v, want %s", i, c, wantState[i])
		}
		rec, err := f.l.Get(f.ctx, f.q, js[i].ID)
		if err != nil || rec.State != wantState[i] {
			t.Fatalf("job %d: %+v, %v", i, rec, err)
		}
		switch i {
		case 0:
			if rec.Error != "" || rec.Fence != 0 || len(rec.Output) != 0 || rec.Finished.IsZero() {
				t.Fatalf("short success: %+v", rec)
			}
		case 1:
			if string(rec.Output) != `{"n":1}` {
				t.Fatalf("success with output: %q", rec.Output)
			}
		case 3:
			if rec.Error != "boom" || !rec.RunAt.After(time.Now().Add(50*time.Minute)) {
				t.Fatalf("retry: %+v", rec)
			}
		case 4:
			if rec.Fence != 7 {
				t.Fatalf("success with a fence: %+v", rec)
			}
		}
	}
}

// TestScriptsTakeTwoKeys: the ledger's scripts are called with the queue's
// pending index and the clock record alone (the scripts derive the queue's
// other keys from its prefix), and write the keys the readers read.
func TestScriptsTakeTwoKeys(t *testing.T) {
	rdb, _ := redistest.New(t)
	f := newFixture(t, rdb)
	var calls []fcall
	rdb.AddHook(fcallHook{calls: &calls})
	a := f.enqueue()
	f.complete(f.claimOne(a), ledger.Outcome{To: jobs.Succeeded})
	b := f.enqueue()
	if _, err := f.l.Cancel(f.ctx, f.q, b, "op", "test"); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, c := range calls {
		seen[c.fn] = true
		if c.keys != 2 {
			t.Errorf("%s called with %d keys, want 2", c.fn, c.keys)
		}
	}
	for _, fn := range []string{"enqueue", "claim", "complete", "cancel"} {
		if !seen[fn] {
			t.Errorf("no call of %s among %+v", fn, calls)
		}
	}
	// the readers (Go) find what the scripts wrote under the keys they derived
	counts, err := f.l.Counts(f.ctx, f.q)
	if err != nil || counts[jobs.Succeeded] != 1 || counts[jobs.Cancelled] != 1 || counts[jobs.Pending] != 0 {
		t.Fatalf("counts %v, %v: want a succeeded and b cancelled", counts, err)
	}
	if n := f.stat("succeeded"); n != 1 {
		t.Fatalf("succeeded counter %d, want 1", n)
	}
}
