package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestPartitionsCommandOnACluster declares a partitioned queue with the
// CLI on a three-master cluster and checks that `queues` shows it as one
// line with its partitions and their masters beneath, and that bad
// counts are usage errors that write nothing.
func TestPartitionsCommandOnACluster(t *testing.T) {
	cl := redistest.StartCluster(t)
	ns := redistest.Namespace(t)
	urls := make([]string, len(cl.Addrs()))
	for i, a := range cl.Addrs() {
		urls[i] = "redis://" + a
	}
	conn := []string{"--redis", strings.Join(urls, ","), "--namespace", ns}
	for _, bad := range []string{"-1", "0", "65"} {
		if code, _, errOut := runCLI(t, append([]string{"partitions", "--queue", "orders", "--set", bad}, conn...)...); code != 2 {
			t.Fatalf("--set %s: exit %d %q", bad, code, errOut)
		}
	}
	if code, _, errOut := runCLI(t, append([]string{"partitions", "--queue", "orders", "--note", "month end"}, conn...)...); code != 2 ||
		!strings.Contains(errOut, "give it with --set") {
		t.Fatalf("--note without --set: exit %d %q (a note nothing records)", code, errOut)
	}
	if code, _, _ := runCLI(t, append([]string{"partitions", "--queue", "orders#1"}, conn...)...); code != 2 {
		t.Fatalf("a partition's name accepted as --queue: exit %d", code)
	}
	code, out, errOut := runCLI(t, append([]string{"partitions", "--queue", "orders", "--set", "3", "--actor", "ops"}, conn...)...)
	if code != 0 || !strings.Contains(out, "3 partition(s), was 1") || strings.Count(out, "\n  #") != 3 {
		t.Fatalf("partitions --set 3: %d %q %q", code, out, errOut)
	}
	c := jobs.NewClient(cl.Client(), jobs.Config{Namespace: ns})
	for range 9 {
		if _, err := c.EnqueueRaw(context.Background(), "raw", []byte(`{}`), jobs.Queue("orders"), jobs.Unchecked()); err != nil {
			t.Fatal(err)
		}
	}
	code, out, _ = runCLI(t, append([]string{"queues"}, conn...)...)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	// No pool runs here: the queue's pending jobs are named as served by none.
	if code != 0 || len(lines) != 7 || !strings.HasPrefix(lines[1], "orders ") || !strings.Contains(lines[1], " 9 ") ||
		!strings.Contains(out, "1 queue(s)\nqueue orders has 9 pending job(s) and no live pool serves it") {
		t.Fatalf("queues: %d %q", code, out)
	}
	masters := map[string]bool{}
	for _, l := range lines[2:5] {
		f := strings.Fields(l)
		if !strings.HasPrefix(f[1], "orders#") {
			t.Fatalf("partition row %q", l)
		}
		masters[f[len(f)-1]] = true
	}
	if len(masters) != 3 {
		t.Fatalf("partitions on %d masters: %q", len(masters), out)
	}
	code, out, _ = runCLI(t, append([]string{"queues", "--json"}, conn...)...)
	var infos []queueInfo
	if err := json.Unmarshal([]byte(out), &infos); code != 0 || err != nil || len(infos) != 1 || infos[0].Partitions == nil ||
		len(infos[0].Partitions.Partitions) != 3 || infos[0].Counts[jobs.Pending] != 9 {
		t.Fatalf("queues --json: %d %v %q", code, err, out)
	}
}

// TestCommandsTakeAJobsPartitionAndItsQueue: a job of a partitioned queue
// is shown in its partition ("orders#1"); inspect, resolve and the other
// job commands take that name, as printed, and the queue's own name, with
// --job and with --op, and a partition that does not hold the job is not
// found (exit 1).
func TestCommandsTakeAJobsPartitionAndItsQueue(t *testing.T) {
	e := newOperatorEnv(t)
	ctx := context.Background()
	if _, err := e.client.SetPartitions(ctx, "orders", 3, "test", ""); err != nil {
		t.Fatal(err)
	}
	res, err := e.client.EnqueueRaw(ctx, "raw", []byte(`{}`), jobs.Queue("orders"), jobs.OperationID("op-1"),
		jobs.Delay(time.Hour), jobs.Unchecked())
	if err != nil {
		t.Fatal(err)
	}
	rec, err := e.client.Inspector().Get(ctx, "orders", res.JobID)
	if err != nil {
		t.Fatal(err)
	}
	part := rec.Queue
	other := ledger.PartitionNames("orders", 3)[0]
	if part == other {
		other = ledger.PartitionNames("orders", 3)[1]
	}
	if !strings.HasPrefix(part, "orders#") {
		t.Fatalf("the job's queue is %q, want a partition of orders", part)
	}
	for _, q := range []string{"orders", part} {
		if code, out, errOut := e.cli("inspect", "--job", res.JobID, "--queue", q); code != 0 || !strings.Contains(out, "queue "+part) {
			t.Errorf("inspect --job --queue %s: %d %q %q", q, code, out, errOut)
		}
		if code, out, errOut := e.cli("inspect", "--state", "pending", "--queue", q); code != 0 || !strings.Contains(out, res.JobID) {
			t.Errorf("inspect --state pending --queue %s: %d %q %q", q, code, out, errOut)
		}
	}
	if code, _, errOut := e.cli("inspect", "--job", res.JobID, "--queue", other); code != 1 || !strings.Contains(errOut, "not found") {
		t.Errorf("inspect in a partition without the job: %d %q", code, errOut)
	}
	if _, err := e.client.Cancel(ctx, "orders", res.JobID, "alice", "x"); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"orders", part} {
		code, out, errOut := e.cli("resolve", "--op", "op-1", "--queue", q, "--decision", "rerun", "--actor", "bob", "--json")
		if code != 0 || !json.Valid([]byte(out)) {
			t.Fatalf("resolve --op --queue %s: %d %q %q", q, code, out, errOut)
		}
		if _, err := e.client.Cancel(ctx, "orders", res.JobID, "alice", "x"); err != nil {
			t.Fatal(err)
		}
	}
	if code, _, errOut := e.cli("resolve", "--op", "op-1", "--queue", other, "--decision", "rerun", "--actor", "bob"); code != 1 || !strings.Contains(errOut, "not found") {
		t.Errorf("resolve --op in a partition without the job: %d %q", code, errOut)
	}
	// a partition the queue does not have is refused, not searched
	if code, _, errOut := e.cli("resolve", "--op", "op-1", "--queue", "orders#9", "--decision", "rerun", "--actor", "bob"); code != 2 || !strings.Contains(errOut, "has no partition") {
		t.Errorf("resolve --op in a partition orders does not have: %d %q", code, errOut)
	}
}
