package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

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
	if code, _, _ := runCLI(t, append([]string{"partitions", "--queue", "orders#1"}, conn...)...); code != 2 {
		t.Fatalf("a partition's name accepted as --queue: exit %d", code)
	}
	code, out, errOut := runCLI(t, append([]string{"partitions", "--queue", "orders", "--set", "3"}, conn...)...)
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
	if code != 0 || len(lines) != 6 || !strings.HasPrefix(lines[1], "orders ") || !strings.Contains(lines[1], " 9 ") ||
		!strings.HasSuffix(out, "1 queue(s)\n") {
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
