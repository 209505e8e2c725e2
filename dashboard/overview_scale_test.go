package dashboard_test

import (
	"context"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/internal/ledger"
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

// TestHistoryBoundedOverManyQueues: the history of every queue
// (/api/series without a queue) costs a fixed number of round trips over
// 1 000 queues, and reads no minute the maintenance leader's snapshots
// prove idle, while showing what the queues' own histories add up to.
func TestHistoryBoundedOverManyQueues(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	const queues = 1000
	manyQueues(t, f, queues)
	now, err := f.ledger.ServerTime(ctx)
	must(t, err)
	// The leader's snapshot of every queue, near the start of the day's
	// window (before the hour's), then work in three queues.
	var names []string
	for i := range queues {
		names = append(names, "q"+strconv.Itoa(i))
	}
	names = append(names, ledger.PartitionNames("parts", 3)...)
	writeSnapshots(t, f, names, now.Add(-24*time.Hour+time.Minute))
	f.enqueue(echoArgs{N: 1}, jobs.Queue("q3"))
	f.enqueue(echoArgs{N: 2}, jobs.Queue("q3"), jobs.Delay(time.Hour))
	f.enqueue(echoArgs{N: 3}, jobs.Queue("parts"))
	f.enqueue(echoArgs{N: 4}, jobs.Queue("parts"))
	h := f.handler(dashboard.Options{})
	var rt redistest.RoundTrips
	var n commandCount
	f.rdb.AddHook(&rt)
	f.rdb.AddHook(&n)
	type view struct {
		Points []map[string]any     `json:"points"`
		Now    map[jobs.State]int64 `json:"now"`
	}
	for _, window := range []string{"1h", "24h"} {
		rt.Reset()
		n.Reset()
		var all view
		getJSON(t, h, "/api/series?window="+window, &all)
		if rt.N() > 12 || n.N() > 30*queues {
			t.Errorf("%s: %d round trips, %d commands over %d queues", window, rt.N(), n.N(), queues)
		}
		// What the queues' own histories add up to (the idle ones alike).
		want := view{Now: map[jobs.State]int64{}}
		points := map[string]map[string]any{}
		for _, q := range []string{"q0", "q3", "parts", "q999"} {
			var one view
			getJSON(t, h, "/api/series?window="+window+"&queue="+q, &one)
			for s, c := range one.Now {
				want.Now[s] += c
			}
			for _, p := range one.Points {
				at := p["at"].(string)
				if points[at] == nil {
					points[at] = map[string]any{}
					for k, v := range p {
						points[at][k] = v
					}
					continue
				}
				for k, v := range p {
					if x, ok := v.(float64); ok {
						points[at][k] = points[at][k].(float64) + x
					}
				}
			}
		}
		if len(all.Points) != len(points) || !reflect.DeepEqual(all.Now, want.Now) {
			t.Fatalf("%s: %d points, now %v; want %d, %v", window, len(all.Points), all.Now, len(points), want.Now)
		}
		enq := 0.0
		for _, p := range all.Points {
			if !reflect.DeepEqual(p, points[p["at"].(string)]) {
				t.Fatalf("%s: point %v, want %v", window, p, points[p["at"].(string)])
			}
			enq += p["enqueued"].(float64)
		}
		if enq != 4 || all.Now[jobs.Pending] != 4 {
			t.Fatalf("%s: %v enqueued, now %v", window, enq, all.Now)
		}
	}
}

// writeSnapshots writes the buckets the maintenance leader would have
// recorded at t for each of names (their counters now, read at t).
func writeSnapshots(t *testing.T, f *fixture, names []string, at time.Time) {
	t.Helper()
	ctx := context.Background()
	at = at.Truncate(time.Minute).UTC()
	pipe := f.rdb.Pipeline()
	for _, q := range names {
		st, err := f.ledger.Stats(ctx, q)
		must(t, err)
		b := ledger.SeriesBucket{At: at, Read: at.Add(time.Second), Stats: map[string]int64{}, Counts: map[jobs.State]int64{}}
		for k, v := range st {
			if v != 0 {
				b.Stats[k] = v
			}
		}
		raw, err := json.Marshal(b)
		must(t, err)
		pipe.ZAdd(ctx, f.ns+":{"+q+"}:series", redis.Z{Score: float64(at.UnixMilli()), Member: raw})
	}
	_, err := pipe.Exec(ctx)
	must(t, err)
}

// TestSearchRewindsAndJobsBoundedOverManyQueues: an exact search, the
// rewinds page and a list of every queue's pending jobs cost a fixed
// number of round trips over 1 000 queues (a few more per queue holding
// jobs), not a few per queue, and show the same.
func TestSearchRewindsAndJobsBoundedOverManyQueues(t *testing.T) {
	f := newFixture(t)
	const queues = 1000
	manyQueues(t, f, queues)
	a := f.enqueue(echoArgs{N: 1}, jobs.Queue("q3"), jobs.OperationID("op a"))
	b := f.enqueue(echoArgs{N: 2}, jobs.Queue("q500"))
	h := f.handler(dashboard.Options{})
	var rt redistest.RoundTrips
	f.rdb.AddHook(&rt)
	check := func(path string, v any) {
		t.Helper()
		rt.Reset()
		getJSON(t, h, path, v)
		if rt.N() > 16 {
			t.Errorf("%s: %d round trips over %d queues", path, rt.N(), queues)
		}
	}
	var found struct {
		Matches []struct {
			By  string
			Job struct{ ID, Queue string }
		}
	}
	for _, c := range []struct{ q, by, id, queue string }{{"op%20a", "operation_id", a, "q3"}, {b, "job_id", b, "q500"}} {
		check("/api/search?prefix=0&q="+c.q, &found)
		if len(found.Matches) == 0 || found.Matches[0].By != c.by || found.Matches[0].Job.ID != c.id || found.Matches[0].Job.Queue != c.queue {
			t.Fatalf("search %s: %+v", c.q, found)
		}
	}
	check("/api/search?prefix=0&q=nope", &found)
	if len(found.Matches) != 0 {
		t.Fatalf("search nope: %+v", found)
	}
	var rw struct{ Rewinds []any }
	check("/api/rewinds", &rw)
	if len(rw.Rewinds) != 0 {
		t.Fatalf("rewinds: %+v", rw)
	}
	var list struct {
		Jobs []struct{ ID string }
	}
	check("/api/jobs?state=pending", &list)
	if len(list.Jobs) != 2 || (list.Jobs[0].ID != a || list.Jobs[1].ID != b) && (list.Jobs[0].ID != b || list.Jobs[1].ID != a) {
		t.Fatalf("pending jobs: %+v", list)
	}
}

// TestKindFilteredListsBoundedOverManyQueues: a list of one state filtered
// by kind, and its selection for a bulk action, cost a fixed number of
// round trips over 1 000 queues (a few more per queue holding jobs in that
// state), not one or more per queue, and list the same jobs.
func TestKindFilteredListsBoundedOverManyQueues(t *testing.T) {
	f := newFixture(t).seed()
	const queues = 1000
	manyQueues(t, f, queues)
	a := f.enqueue(echoArgs{N: 1}, jobs.Queue("q3"))
	b := f.enqueue(echoArgs{N: 2}, jobs.Queue("q500"), jobs.Delay(time.Hour))
	f.enqueue(chargeArgs{Account: "acct-9"}, jobs.Queue("q9"))
	h := f.handler(dashboard.Options{})
	var rt redistest.RoundTrips
	f.rdb.AddHook(&rt)
	for _, c := range []struct {
		path string
		want []string
	}{
		{"/api/jobs?state=pending&kind=echo&select=1", []string{a, f.pending, b}},
		{"/api/jobs?state=pending&kind=charge", nil},
		{"/api/jobs?state=succeeded&kind=echo&sort=desc&select=1", []string{f.echo}},
		{"/api/jobs?state=dead&kind=broken", []string{f.dead}},
		{"/api/jobs?state=running&kind=echo", []string{f.stuck, f.healthy}},
		{"/api/jobs?state=cancelled&kind=echo&select=1", []string{f.cancelled}},
		{"/api/jobs?state=review&kind=echo", []string{}},
	} {
		rt.Reset()
		var list struct {
			Total     int64
			Jobs      []struct{ ID string }
			Selection []struct{ ID string }
		}
		getJSON(t, h, c.path, &list)
		if rt.N() > 32 {
			t.Errorf("%s: %d round trips over %d queues", c.path, rt.N(), queues)
		}
		var ids []string
		for _, j := range list.Jobs {
			ids = append(ids, j.ID)
		}
		if c.want == nil { // the charge in q9
			if len(ids) != 1 || list.Total != 1 {
				t.Fatalf("%s: %+v", c.path, list)
			}
			continue
		}
		if len(ids) != len(c.want) || list.Total != int64(len(c.want)) || len(ids) > 0 && !reflect.DeepEqual(ids, c.want) {
			t.Fatalf("%s: %+v, want %v", c.path, list, c.want)
		}
		if strings.Contains(c.path, "select=1") && len(list.Selection) != len(c.want) {
			t.Fatalf("%s: selection %+v, want %v", c.path, list.Selection, c.want)
		}
	}
}
