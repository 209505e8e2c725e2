package dashboard_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/jobs"
)

// TestAllQueueViewsWithAMasterDown: with the master holding some of queue
// orders' partitions killed, every view over all queues (jobs, limits,
// events, stuck jobs, history) answers 200 with what the other masters
// hold, flagged partial and naming exactly the lost partitions, instead of
// a 503; and a job of a queue on a master that answers can still be
// cancelled.
func TestAllQueueViewsWithAMasterDown(t *testing.T) {
	d := startDegradedCluster(t)
	h, err := dashboard.New(d.client.Inspector(), nil, dashboard.Options{Logger: slog.New(slog.DiscardHandler)})
	must(t, err)
	d.victim.Kill()
	type answer struct {
		Partial     bool     `json:"partial"`
		Unreachable []string `json:"unreachable"`
		Total       int      `json:"total"`
		Jobs        []struct {
			Queue string `json:"queue"`
			ID    string `json:"id"`
		} `json:"jobs"`
	}
	for _, path := range []string{"/api/jobs?state=pending&limit=100", "/api/limits", "/api/events", "/api/stuck", "/api/series?window=1h"} {
		var v answer
		getJSON(t, h, path, &v)
		if !v.Partial || len(v.Unreachable) != len(d.lost) {
			t.Fatalf("%s: %+v, want partial naming the %d partitions lost", path, v, len(d.lost))
		}
		for _, n := range v.Unreachable {
			if !d.lost[n] {
				t.Fatalf("%s: %+v names %s, which answers", path, v, n)
			}
		}
	}
	var list answer
	getJSON(t, h, "/api/jobs?state=pending&limit=100", &list)
	plain := ""
	for _, j := range list.Jobs {
		if d.lost[j.Queue] {
			t.Fatalf("listed %+v of a lost partition", j)
		}
		if j.Queue == d.plain {
			plain = j.ID
		}
	}
	if list.Total != len(list.Jobs) || list.Total <= 3 || list.Total >= 15 || plain == "" {
		t.Fatalf("pending list %+v: want the reachable partitions' jobs and plain's 3", list)
	}
	rec, err := d.client.Cancel(context.Background(), d.plain, plain, "test", "")
	if err != nil || rec.State != jobs.Cancelled {
		t.Fatalf("cancel a job of reachable queue %s: %v %v", d.plain, rec, err)
	}
}
