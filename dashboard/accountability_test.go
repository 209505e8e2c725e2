package dashboard_test

import (
	"context"
	"testing"

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
