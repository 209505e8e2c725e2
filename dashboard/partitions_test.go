package dashboard_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestOverviewShowsPartitions: on a three-master cluster the overview
// shows a partitioned queue as one row, with each partition's depth and
// master beneath it, and a partition's jobs can be listed and opened by
// the partition's name.
func TestOverviewShowsPartitions(t *testing.T) {
	cl := redistest.StartCluster(t)
	rdb := cl.Client()
	ns := redistest.Namespace(t)
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	ctx := context.Background()
	must(t, func() error { _, err := c.SetPartitions(ctx, "orders", 3, "test", ""); return err }())
	var last *jobs.Result
	for range 6 {
		var err error
		last, err = c.Enqueue(ctx, echoArgs{N: 1}, jobs.Queue("orders"))
		must(t, err)
	}
	h, err := dashboard.New(c.Inspector(), c, dashboard.Options{Logger: slog.New(slog.DiscardHandler)})
	must(t, err)
	var ov struct {
		Queues []struct {
			Name       string         `json:"name"`
			Counts     map[string]int `json:"counts"`
			Partitions []struct {
				Name   string         `json:"name"`
				Index  int            `json:"index"`
				Master string         `json:"master"`
				Counts map[string]int `json:"counts"`
			} `json:"partitions"`
		} `json:"queues"`
	}
	getJSON(t, h, "/api/overview", &ov)
	if len(ov.Queues) != 1 || ov.Queues[0].Name != "orders" || ov.Queues[0].Counts["pending"] != 6 || len(ov.Queues[0].Partitions) != 3 {
		t.Fatalf("overview %+v", ov)
	}
	masters, depth := map[string]bool{}, 0
	for k, p := range ov.Queues[0].Partitions {
		if p.Index != k || !strings.HasPrefix(p.Name, "orders#") || p.Master == "" {
			t.Fatalf("partition %d: %+v", k, p)
		}
		masters[p.Master] = true
		depth += p.Counts["pending"]
	}
	if len(masters) != 3 || depth != 6 {
		t.Fatalf("partitions on %d masters, %d pending", len(masters), depth)
	}
	var list struct {
		Total int `json:"total"`
	}
	getJSON(t, h, "/api/jobs?state=pending&queue="+strings.ReplaceAll(last.Partition, "#", "%23"), &list)
	if list.Total < 1 || list.Total > 6 {
		t.Fatalf("a partition's list: %+v", list)
	}
	body := getJSON(t, h, fmt.Sprintf("/api/jobs/%s/%s", strings.ReplaceAll(last.Partition, "#", "%23"), last.JobID), &struct{}{})
	if !strings.Contains(string(body), last.JobID) {
		t.Fatalf("job detail %s", body)
	}
}

// TestPauseOfAMistypedPartition: pausing a partition name its queue does
// not have is refused with 400 and leaves nothing behind: the overview
// neither shows the queue paused nor lists the name as a partition.
func TestPauseOfAMistypedPartition(t *testing.T) {
	f := newFixture(t)
	h := f.handler(dashboard.Options{Username: user, Password: pass})
	f.enqueue(echoArgs{N: 1}, jobs.Queue("plain"))
	for _, path := range []string{"/api/queues/plain%237/pause", "/api/queues/plain%237/resume"} {
		res, body := act(t, h, path, `{"note":"one partition is slow"}`)
		if res.StatusCode != 400 || errCode(t, body) != "invalid" || !strings.Contains(string(body), "no partition plain#7") {
			t.Fatalf("POST %s: %d %s, want 400 naming the partition", path, res.StatusCode, body)
		}
	}
	var ov struct {
		Queues []struct {
			Name       string                  `json:"name"`
			Paused     *jobs.Pause             `json:"paused"`
			Partitions []struct{ Name string } `json:"partitions"`
		} `json:"queues"`
	}
	getJSON(t, h, "/api/overview", &ov)
	if len(ov.Queues) != 1 || ov.Queues[0].Name != "plain" || ov.Queues[0].Paused != nil || len(ov.Queues[0].Partitions) != 0 {
		t.Fatalf("overview after a refused pause: %+v", ov)
	}
}
