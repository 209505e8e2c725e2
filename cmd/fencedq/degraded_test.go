package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/internal/epoch"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestPartitionsWithAMasterDown: with the Cluster master holding some of
// queue orders' partitions killed (the others keep serving their slots),
// `partitions` and `queues` still print every partition, the lost ones'
// counts as ?, and exit 1 naming them, instead of failing whole.
func TestPartitionsWithAMasterDown(t *testing.T) {
	cl := redistest.StartCluster(t)
	ctx := context.Background()
	for _, n := range cl.Nodes {
		if err := n.Client().ConfigSet(ctx, "cluster-require-full-coverage", "no").Err(); err != nil {
			t.Fatal(err)
		}
	}
	rdb := cl.Client()
	master := func(key string) string {
		t.Helper()
		m, err := rdb.MasterForKey(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		return m.Options().Addr
	}
	home := master("x:{orders}:pending")
	ns := ""
	for i := 0; ns == ""; i++ {
		ns = fmt.Sprintf("%s-%d", redistest.Namespace(t), i)
		for _, k := range []string{ns + ":queues", ns + ":partitions", epoch.Key(ns), ns + ":pools"} {
			if master(k) != home {
				ns = ""
				break
			}
		}
	}
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	if _, err := c.SetPartitions(ctx, "orders", 6, "test", ""); err != nil {
		t.Fatal(err)
	}
	for range 12 {
		if _, err := c.EnqueueRaw(ctx, "raw", []byte(`{}`), jobs.Queue("orders"), jobs.Unchecked()); err != nil {
			t.Fatal(err)
		}
	}
	lay, err := c.Inspector().Partitions(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	var victim *redistest.Server
	for _, n := range cl.Nodes {
		if n.Addr != home && slicesHasMaster(lay, n.Addr) {
			victim = n
		}
	}
	if victim == nil {
		t.Fatal("every partition is on orders' own master")
	}
	victim.Kill()
	urls := make([]string, len(cl.Addrs()))
	for i, a := range cl.Addrs() {
		urls[i] = "redis://" + a
	}
	conn := []string{"--redis", strings.Join(urls, ","), "--namespace", ns}
	for _, args := range [][]string{{"partitions", "--queue", "orders"}, {"queues"}} {
		code, out, errOut := runCLI(t, append(args, conn...)...)
		if code != 1 || !strings.Contains(errOut, "could not be read") {
			t.Fatalf("%s: exit %d %q %q, want 1 naming what could not be read", args[0], code, out, errOut)
		}
		for _, p := range lay.Partitions {
			row := ""
			for _, l := range strings.Split(out, "\n") {
				if f := strings.Fields(l); len(f) > 1 && f[1] == p.Name {
					row = l
				}
			}
			lost := p.Master == victim.Addr
			if row == "" || strings.Contains(row, "?") != lost || lost != strings.Contains(errOut, p.Name) {
				t.Fatalf("%s: partition %s (lost %v): row %q in %q, error %q", args[0], p.Name, lost, row, out, errOut)
			}
		}
	}
}

// slicesHasMaster reports whether a partition of lay is on master addr.
func slicesHasMaster(lay *jobs.QueueLayout, addr string) bool {
	for _, p := range lay.Partitions {
		if p.Master == addr {
			return true
		}
	}
	return false
}
