package dashboard_test

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/jobs"
)

// TestOverviewShowsLayoutChanges: a partitioned queue's row on the
// overview carries its newest layout changes (who, when, why, from → to),
// newest first and bounded; a plain queue has none.
func TestOverviewShowsLayoutChanges(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	h := f.handler(dashboard.Options{})
	f.enqueue(echoArgs{N: 1}, jobs.Queue("plain"))
	for i, p := range []int{2, 3, 4, 5, 6, 3} {
		note := ""
		if i == 5 {
			note = "<b>back</b> to three"
		}
		_, err := f.client.SetPartitions(ctx, "orders", p, "alice", note)
		must(t, err)
	}
	var ov struct {
		Queues []struct {
			Name          string `json:"name"`
			LayoutChanges []struct {
				From  int    `json:"from"`
				To    int    `json:"to"`
				Actor string `json:"actor"`
				Note  string `json:"note"`
				At    string `json:"at"`
			} `json:"layout_changes"`
		} `json:"queues"`
	}
	getJSON(t, h, "/api/overview", &ov)
	found := false
	for _, q := range ov.Queues {
		switch {
		case q.Name == "plain" && len(q.LayoutChanges) != 0:
			t.Fatalf("a plain queue with layout changes: %+v", q)
		case q.Name == "orders":
			found = true
			chs := q.LayoutChanges
			if len(chs) != 5 || chs[0].From != 6 || chs[0].To != 3 || chs[0].Actor != "operator:alice" ||
				chs[0].Note != "<b>back</b> to three" || chs[0].At == "" || chs[4].From != 2 || chs[4].To != 3 {
				t.Fatalf("layout changes %+v", chs)
			}
		}
	}
	if !found {
		t.Fatalf("overview without orders: %+v", ov)
	}
}

// TestSchedulesAPIShowsRemovals: api/schedules lists the newest schedule
// removals (id, kind, queue, when, who, why); ?id= does not.
func TestSchedulesAPIShowsRemovals(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	h := f.handler(dashboard.Options{})
	var out struct {
		Removed []jobs.ScheduleRemoval `json:"removed"`
	}
	getJSON(t, h, "/api/schedules", &out)
	if out.Removed == nil || len(out.Removed) != 0 {
		t.Fatalf("removals before any: %+v", out.Removed)
	}
	for _, id := range []string{"old", "kept"} {
		_, err := f.ledger.RegisterSchedule(ctx, 1, jobs.ScheduleSpec{ID: id, Schedule: "@every 1h0m0s", Kind: "echo", Queue: "mail"})
		must(t, err)
	}
	ok, err := f.client.RemoveSchedule(ctx, "old", "carol", "replaced by kept")
	must(t, err)
	if !ok {
		t.Fatal("old was not removed")
	}
	getJSON(t, h, "/api/schedules", &out)
	if len(out.Removed) != 1 {
		t.Fatalf("removals %+v", out.Removed)
	}
	r := out.Removed[0]
	if r.ID != "old" || r.Kind != "echo" || r.Queue != "mail" || r.Actor != "operator:carol" || r.Note != "replaced by kept" || r.At.IsZero() {
		t.Fatalf("removal %+v", r)
	}
	out.Removed = nil
	getJSON(t, h, "/api/schedules?id=kept", &out)
	if len(out.Removed) != 0 {
		t.Fatalf("?id= with removals %+v", out.Removed)
	}
}

// TestOperatorEventsSayWhy: the operator actions feed (api/events
// type=operator, the page #/events/operator) carries each action's note
// with its actor: a cancellation, of a scheduled job or of a running
// attempt, as a pause and a run-now do.
func TestOperatorEventsSayWhy(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	h := f.handler(dashboard.Options{Username: user, Password: pass})
	sched := f.enqueue(echoArgs{N: 1}, jobs.Queue("ops"), jobs.Delay(time.Hour))
	run := f.enqueue(echoArgs{N: 2}, jobs.Queue("ops"))
	f.claimOne("ops", run, "w1", time.Minute)
	for id, note := range map[string]string{sched: "customer withdrew <b>", run: "duplicate order"} {
		if res, b := act(t, h, "/api/jobs/ops/"+id+"/cancel", `{"note":"`+note+`"}`); res.StatusCode != http.StatusOK {
			t.Fatalf("cancel %s: %d %s", id, res.StatusCode, b)
		}
	}
	_, err := f.client.Pause(ctx, "ops", "bob", "maintenance")
	must(t, err)
	var evs struct {
		Events []struct{ Type, Job, Actor, Note string } `json:"events"`
	}
	getJSON(t, h, "/api/events?type=operator&queue=ops", &evs)
	got := map[string]string{}
	for _, e := range evs.Events {
		got[e.Type+" "+e.Job] = e.Actor + ": " + e.Note
	}
	for k, want := range map[string]string{
		"cancel " + sched: "operator:admin: customer withdrew <b>",
		"cancel " + run:   "operator:admin: duplicate order",
		"pause ":          "operator:bob: maintenance",
	} {
		if got[k] != want {
			t.Errorf("%s: %q, want %q (events %+v)", k, got[k], want, evs.Events)
		}
	}
}

// TestOperatorEventsShowResolutions: an operator's resolution (re-run,
// mark succeeded, mark dead) is an operator event naming the job, the
// decision, who and why; a reconciler's decision is not.
func TestOperatorEventsShowResolutions(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	h := f.handler(dashboard.Options{})
	review := f.reviewJob("mail", chargeArgs{Account: "a"}, "op-review") // the reconciler's review
	uncertain := f.reviewJob("mail", chargeArgs{Account: "b"}, "op-review-2")
	dead := f.deadJob("mail", "op-dead")
	_, err := f.client.Resolve(ctx, "mail", review, jobs.DecideSucceeded, "alice", "gateway shows it paid")
	must(t, err)
	_, err = f.client.Resolve(ctx, "mail", dead, jobs.DecideRerun, "bob", "card fixed")
	must(t, err)
	_, err = f.client.Resolve(ctx, "mail", uncertain, jobs.DecideDead, "carol", "")
	must(t, err)

	var e struct {
		Events []struct {
			Queue, Type, Job, Actor, Note, Decision string
		} `json:"events"`
	}
	getJSON(t, h, "/api/events?type=operator", &e)
	want := []string{
		"mail resolve " + uncertain + " dead operator:carol ",
		"mail resolve " + dead + " rerun operator:bob card fixed",
		"mail resolve " + review + " succeeded operator:alice gateway shows it paid",
	}
	var got []string
	for _, ev := range e.Events {
		got = append(got, ev.Queue+" "+ev.Type+" "+ev.Job+" "+ev.Decision+" "+ev.Actor+" "+ev.Note)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("operator events:\n got %q\nwant %q", got, want)
	}
	evs, err := f.insp.Events(ctx, "mail", 100)
	must(t, err)
	for _, ev := range evs {
		if ev.Type == "resolve" && (ev.Decision == "" || ev.Actor == "reconciler") {
			t.Fatalf("inspector event %+v", ev)
		}
	}
}
