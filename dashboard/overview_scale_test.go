package dashboard_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// manyQueues registers n idle queues q0..q(n-1), pauses q7 and splits
// queue "parts" into 3 partitions.
func manyQueues(t *testing.T, f *fixture, n int) {
	t.Helper()
	ctx := context.Background()
	pipe := f.rdb.Pipeline()
	for i := range n {
		pipe.SAdd(ctx, f.ns+":queues", "q"+strconv.Itoa(i))
	}
	_, err := pipe.Exec(ctx)
	must(t, err)
	_, err = f.client.Pause(ctx, "q7", "alice", "hold")
	must(t, err)
	_, err = f.client.SetPartitions(ctx, "parts", 3, "bob", "split")
	must(t, err)
}

// TestAllQueueViewsBoundedOverManyQueues: the views reading every queue
// (overview, limits, stuck) cost a fixed number of round trips over
// 1 000 queues, not a few per queue, and show the same.
func TestAllQueueViewsBoundedOverManyQueues(t *testing.T) {
	f := newFixture(t)
	const queues = 1000
	manyQueues(t, f, queues)
	h := f.handler(dashboard.Options{})
	var rt redistest.RoundTrips
	var n commandCount
	f.rdb.AddHook(&rt)
	f.rdb.AddHook(&n)

	var ov struct {
		Paused []string `json:"paused"`
		Queues []struct {
			Name       string
			Counts     map[jobs.State]int64
			Paused     *jobs.Pause
			Partitions []struct {
				Name  string
				Index int
			}
			LayoutChanges []jobs.PartitionChange `json:"layout_changes"`
		}
	}
	for _, path := range []string{"/api/overview", "/api/limits", "/api/stuck"} {
		rt.Reset()
		n.Reset()
		var v any = &ov
		if path != "/api/overview" {
			v = new(map[string]any)
		}
		getJSON(t, h, path, v)
		if rt.N() > 12 || n.N() > 20*queues {
			t.Errorf("%s: %d round trips, %d commands over %d queues", path, rt.N(), n.N(), queues)
		}
	}
	if len(ov.Queues) != queues+1 || len(ov.Paused) != 1 || ov.Paused[0] != "q7" {
		t.Fatalf("overview: %d queues, paused %v", len(ov.Queues), ov.Paused)
	}
	for _, q := range ov.Queues {
		switch q.Name {
		case "q7":
			if q.Paused == nil || q.Paused.Actor != "operator:alice" {
				t.Fatalf("q7: %+v", q)
			}
		case "parts":
			if len(q.Partitions) != 3 || len(q.LayoutChanges) != 1 || q.LayoutChanges[0].To != 3 || q.Partitions[2].Index != 2 {
				t.Fatalf("parts: %+v", q)
			}
		default:
			if q.Paused != nil || q.Partitions != nil || len(q.Counts) != len(jobs.States) {
				t.Fatalf("%s: %+v", q.Name, q)
			}
		}
	}
}

// TestOddRegistryNameLeavesTheViews: a queue registry member no call could
// take (written by hand: a space, a slash) is left out of the overview, the
// limits and the stuck pages, which show the other queues, instead of
// failing each of them with 400.
func TestOddRegistryNameLeavesTheViews(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	must(t, f.rdb.SAdd(ctx, f.ns+":queues", "bad name", "a/b", "ok").Err())
	h := f.handler(dashboard.Options{})
	var ov struct{ Queues []struct{ Name string } }
	getJSON(t, h, "/api/overview", &ov)
	if len(ov.Queues) != 1 || ov.Queues[0].Name != "ok" {
		t.Fatalf("overview: %+v", ov.Queues)
	}
	for _, path := range []string{"/api/limits", "/api/stuck"} {
		getJSON(t, h, path, new(map[string]any))
	}
}
