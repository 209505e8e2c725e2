package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/jobs"
)

// TestInspectPagesWithOffset: inspect --state pages one list merged across
// queues (--offset, --limit), in due order, and says where the page is.
func TestInspectPagesWithOffset(t *testing.T) {
	e := newOperatorEnv(t)
	var ids []string // due a minute apart, alternating between two queues
	for i := range 6 {
		q := "default"
		if i%2 == 1 {
			q = "other"
		}
		ids = append(ids, e.enqueue(jobs.Queue(q), jobs.Delay(time.Duration(i+1)*time.Minute)))
	}
	code, out, errOut := e.cli("inspect", "--state", "pending", "--offset", "2", "--limit", "3")
	if code != 0 {
		t.Fatalf("--offset 2 --limit 3: %d %q %q", code, out, errOut)
	}
	var got []string
	for _, line := range strings.Split(out, "\n") {
		if len(line) > 36 && strings.Contains(strings.Join(ids, " "), line[:36]) {
			got = append(got, line[:36])
		}
	}
	if strings.Join(got, " ") != strings.Join(ids[2:5], " ") {
		t.Fatalf("--offset 2 --limit 3: jobs %v, want %v\n%s", got, ids[2:5], out)
	}
	if !strings.Contains(out, "jobs 3-5 of 6 pending job(s) shown (--offset 2 --limit 3); next page: --offset 5") {
		t.Errorf("the page says where it is: %q", out)
	}
	code, out, _ = e.cli("inspect", "--state", "pending", "--offset", "4", "--limit", "3", "--json")
	var recs []*jobs.Record
	if err := json.Unmarshal([]byte(out), &recs); code != 0 || err != nil || len(recs) != 2 || recs[0].ID != ids[4] || recs[1].ID != ids[5] {
		t.Fatalf("--offset 4 --json: %d %q %v", code, out, err)
	}
	code, out, _ = e.cli("inspect", "--state", "pending", "--offset", "6")
	if code != 0 || !strings.Contains(out, "no pending job at --offset 6 (6 in all)") {
		t.Errorf("past the end: %d %q", code, out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--state", "pending", "--offset", "-1"}, "--offset -1"},
		{[]string{"--state", "pending", "--offset", "999999", "--limit", "2"}, "--offset plus --limit"},
		{[]string{"--job", ids[0], "--offset", "1"}, "--offset pages a list"},
	} {
		if code, _, errOut := e.cli(append([]string{"inspect"}, c.args...)...); code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: %d %q (want 2 and %q)", c.args, code, errOut, c.want)
		}
	}
}

// TestInspectFiltersByKind: inspect --state --kind lists one kind's jobs,
// as the dashboard's kind filter does; a bad kind is bad usage.
func TestInspectFiltersByKind(t *testing.T) {
	e := newOperatorEnv(t)
	transfer := e.enqueue()
	res, err := e.client.EnqueueRaw(context.Background(), "report", []byte(`{"customer":"acme"}`), jobs.Unchecked())
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut := e.cli("inspect", "--state", "pending", "--kind", "report")
	if code != 0 || !strings.Contains(out, res.JobID) || strings.Contains(out, transfer) || !strings.Contains(out, "1 pending job(s)") {
		t.Fatalf("--kind report: %d %q %q", code, out, errOut)
	}
	if code, _, errOut := e.cli("inspect", "--state", "pending", "--kind", "re\x1bport"); code != 2 || !strings.Contains(errOut, "--kind") {
		t.Errorf("a bad --kind: %d %q", code, errOut)
	}
	if code, _, errOut := e.cli("inspect", "--job", transfer, "--kind", "report"); code != 2 || !strings.Contains(errOut, "--kind filters a list") {
		t.Errorf("--kind without --state: %d %q", code, errOut)
	}
}
