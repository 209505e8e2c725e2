package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/examples/bank"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestLookupsBoundedOverManyQueues: fencedq list's pauses, its lists
// filtered by kind, and looking a job up by id or by operation id without
// --queue, cost a fixed number of round trips over 1 000 queues, not one
// or more per queue, and find the same jobs (a partitioned queue's included; two queues holding one are
// named, as before).
func TestLookupsBoundedOverManyQueues(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	const queues = 1000
	registerQueues(t, rdb, ns, queues)
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	if _, err := c.SetPartitions(ctx, "q3", 4, "alice", "split"); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"q7", "q500"} {
		if _, err := c.Pause(ctx, q, "alice", "hold "+q); err != nil {
			t.Fatal(err)
		}
	}
	enqueue := func(q string, opts ...jobs.Option) *jobs.Result {
		t.Helper()
		res, err := c.Enqueue(ctx, bank.Transfer{From: "acct-000", To: "acct-001", Cents: 5}, append(opts, jobs.Queue(q))...)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	named := enqueue("q3", jobs.OperationID("pay-3"))         // in one of q3's partitions
	indexed := enqueue("q9", jobs.OperationID("pay 9 / eur")) // a random id and the operation index
	own := enqueue("q11")                                     // its own id as operation id
	enqueue("q12", jobs.OperationID("twice"))                 // id derived from the operation id
	enqueue("q13", jobs.OperationID("twice"))
	in := c.Inspector()

	var rt redistest.RoundTrips
	rdb.AddHook(&rt)
	count := func(what string, f func()) {
		t.Helper()
		rt.Reset()
		f()
		bound := int64(10)
		if strings.HasPrefix(what, "list --state pending") {
			bound = 40 // a few per queue holding pending jobs (five here)
		}
		if rt.N() > bound {
			t.Errorf("%s: %d round trips over %d queues", what, rt.N(), queues)
		}
	}

	count("list", func() {
		var out bytes.Buffer
		if err := listJobs(ctx, &out, in, jobs.ListParams{State: jobs.Dead, Limit: 20}, false); err != nil {
			t.Fatal(err)
		}
		s := out.String()
		if !strings.Contains(s, "paused queue q500 (by operator:alice since") || !strings.Contains(s, ": hold q7)\n") || strings.Count(s, "paused queue") != 2 ||
			strings.Index(s, "paused queue q500") > strings.Index(s, "paused queue q7") {
			t.Fatalf("list: %s", s)
		}
	})
	count("list --state pending", func() {
		var out bytes.Buffer
		if err := listJobs(ctx, &out, in, jobs.ListParams{State: jobs.Pending, Limit: 20}, false); err != nil {
			t.Fatal(err)
		}
		s := out.String()
		for _, r := range []*jobs.Result{named, indexed, own} {
			if !strings.Contains(s, r.JobID) {
				t.Fatalf("list --state pending lacks %s: %s", r.JobID, s)
			}
		}
		if !strings.Contains(s, "5 pending job(s)") || strings.Count(s, "paused queue") != 2 {
			t.Fatalf("list --state pending: %s", s)
		}
	})
	count("list --state pending --limit 1", func() {
		var out bytes.Buffer
		if err := listJobs(ctx, &out, in, jobs.ListParams{State: jobs.Pending, Limit: 1, Offset: 1}, false); err != nil {
			t.Fatal(err)
		}
		if s := out.String(); !strings.Contains(s, "jobs 2-2 of 5 pending job(s) shown (--offset 1 --limit 1); next page: --offset 2") {
			t.Fatalf("list --state pending --offset 1 --limit 1: %s", s)
		}
	})
	count("list --state pending --kind transfer", func() {
		var out bytes.Buffer
		if err := listJobs(ctx, &out, in, jobs.ListParams{State: jobs.Pending, Kind: "transfer", Limit: 20}, false); err != nil {
			t.Fatal(err)
		}
		if s := out.String(); !strings.Contains(s, "5 pending job(s)") || !strings.Contains(s, named.JobID) {
			t.Fatalf("list --state pending --kind transfer: %s", s)
		}
	})
	for _, s := range []jobs.State{jobs.Pending, jobs.Dead, jobs.Succeeded} {
		count("list --state "+string(s)+" --kind other", func() {
			var out bytes.Buffer
			if err := listJobs(ctx, &out, in, jobs.ListParams{State: s, Kind: "other", Limit: 20}, false); err != nil {
				t.Fatal(err)
			}
			if s := out.String(); strings.Contains(s, named.JobID) {
				t.Fatalf("list --kind other: %s", s)
			}
		})
	}
	for _, want := range []*jobs.Result{named, indexed, own} {
		count("find --job "+want.JobID, func() {
			if q, err := findQueue(ctx, in, "", want.JobID, "inspect"); err != nil || q != want.Queue {
				t.Fatalf("findQueue %s: %q %v, want %s", want.JobID, q, err, want.Queue)
			}
		})
		count("find --op "+want.OperationID, func() {
			if r, err := findByOperation(ctx, in, want.OperationID); err != nil || r.ID != want.JobID || ledger.Logical(r.Queue) != want.Queue {
				t.Fatalf("findByOperation %s: %+v %v, want %s in %s", want.OperationID, r, err, want.JobID, want.Queue)
			}
		})
	}
	count("find --op twice", func() {
		if _, err := findByOperation(ctx, in, "twice"); !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "q12, q13") {
			t.Fatalf("findByOperation twice: %v, want a usage error naming q12, q13", err)
		}
	})
	count("find --op nope", func() {
		if _, err := findByOperation(ctx, in, "nope"); !errors.Is(err, jobs.ErrNotFound) {
			t.Fatalf("findByOperation nope: %v", err)
		}
	})
	count("find --job nope", func() {
		if _, err := findQueue(ctx, in, "", "nope", "cancel"); !errors.Is(err, jobs.ErrNotFound) {
			t.Fatalf("findQueue nope: %v", err)
		}
	})
}
