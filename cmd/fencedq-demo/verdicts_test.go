package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/examples/bank"
	"github.com/fencedq/fencedq/jobs"
)

// TestVerdictsJudgeWhatHappened: a staged job that did not end as its
// stage requires is a FAIL, named with the job and what happened; a stage
// that never ran is NOT RUN (not a failure); any FAIL fails the demo, with
// --json as without, and the JSON carries every verdict.
func TestVerdictsJudgeWhatHappened(t *testing.T) {
	e := newOperatorEnv(t)
	ctx := context.Background()
	store, err := bank.NewRedisStore(e.ledger.Redis(), e.ns)
	if err != nil {
		t.Fatal(err)
	}
	d := &demo{client: e.client, store: store, ids: map[string]bool{}, ops: map[string]int{}, staged: map[string]stagedJob{}}
	// The paused-worker stage's job, never run: still pending, no effect.
	res := d.enqueueStaged(ctx, checkPaused, bank.Transfer{From: "acct-000", To: "acct-001", Cents: 100, Memo: memoPause}, jobs.OperationID("pay-1"))
	// A repeated submission, deduplicated.
	d.enqueue(ctx, bank.Transfer{From: "acct-000", To: "acct-001", Cents: 100, Memo: memoPause}, jobs.OperationID(res.OperationID))
	s := &summary{Enqueued: len(d.ids), Submissions: d.submissions, MoneyConserved: true, ExactlyOnce: true}
	st, err := e.ledger.Stats(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	if s.Verdicts, err = d.verdicts(ctx, s, st); err != nil {
		t.Fatal(err)
	}
	got := map[string]verdict{}
	for _, v := range s.Verdicts {
		got[v.Check] = v
	}
	want := map[string]string{checkPaused: resultFail, checkLateAnswer: resultNotRun, checkCrash: resultNotRun, checkStray: resultNotRun,
		checkDuplicates: resultPass, checkLost: resultPass, checkMoney: resultPass, checkOnce: resultPass}
	if len(got) != len(want) {
		t.Fatalf("verdicts: %+v", s.Verdicts)
	}
	for c, r := range want {
		if v := got[c]; v.Result != r || v.Required == "" || v.Happened == "" {
			t.Errorf("%s: %+v, want %s", c, v, r)
		}
	}
	if p := got[checkPaused]; p.JobID != res.JobID || !strings.HasPrefix(p.Happened, "pending after 0 attempt(s)") ||
		!strings.Contains(p.Happened, "no record of its transfer") {
		t.Errorf("paused verdict: %+v", p)
	}
	if dv := got[checkDuplicates]; !strings.Contains(dv.Happened, "2 submission(s) of 1 operation id(s), 1 of them repeats; 1 job(s)") {
		t.Errorf("duplicates verdict: %+v", dv)
	}

	for _, asJSON := range []bool{true, false} {
		var out bytes.Buffer
		if err := report(&out, s, asJSON); !errors.Is(err, errCheckFailed) {
			t.Errorf("json %v: a FAIL verdict did not fail the demo: %v", asJSON, err)
		}
		if asJSON {
			var back struct {
				Verdicts []map[string]any `json:"verdicts"`
			}
			if json.Unmarshal(out.Bytes(), &back) != nil || len(back.Verdicts) != len(want) || back.Verdicts[0]["check"] != checkPaused ||
				back.Verdicts[0]["result"] != "fail" || back.Verdicts[0]["job_id"] != res.JobID {
				t.Errorf("json verdicts: %s", out.String())
			}
		} else if txt := out.String(); !strings.Contains(txt, "FAIL    paused worker (job "+res.JobID+")") ||
			!strings.Contains(txt, "NOT RUN late answer") || !strings.Contains(txt, "PASS    duplicate submissions") ||
			!strings.Contains(txt, "1 of 8 checks FAILED") {
			t.Errorf("text verdicts:\n%s", txt)
		}
	}

	// NOT RUN alone does not fail the demo.
	pass := &summary{MoneyConserved: true, ExactlyOnce: true, Verdicts: []verdict{{Check: checkCrash, Result: resultNotRun}, {Check: checkLost, Result: resultPass}}}
	var out bytes.Buffer
	if err := report(&out, pass, false); err != nil || !strings.Contains(out.String(), "every check passed (2)") {
		t.Errorf("not run: %v %q", err, out.String())
	}
}

// TestReconciledOnceAllowsEarlierRefusedAttempts: an attempt before the one
// that went uncertain (a write refused as stale because another transfer of
// the same account ran under a newer token) does not fail the crash and
// late-answer checks; an attempt after it does, as does a missing effect.
func TestReconciledOnceAllowsEarlierRefusedAttempts(t *testing.T) {
	succeeded := &jobs.Record{State: jobs.Succeeded, Attempts: 2}
	cases := []struct {
		name string
		e    evidence
		want bool
	}{
		{"one attempt", evidence{rec: &jobs.Record{State: jobs.Succeeded, Attempts: 1}, applied: true, wentUnc: true}, true},
		{"a refused attempt before", evidence{rec: succeeded, applied: true, wentUnc: true, before: []string{"retry"}}, true},
		{"an attempt after", evidence{rec: succeeded, applied: true, wentUnc: true, after: 1}, false},
		{"never uncertain", evidence{rec: succeeded, applied: true}, false},
		{"no effect", evidence{rec: succeeded, wentUnc: true}, false},
		{"not succeeded", evidence{rec: &jobs.Record{State: jobs.Uncertain, Attempts: 1}, applied: true, wentUnc: true}, false},
	}
	for _, c := range cases {
		if got := c.e.reconciledOnce(); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
