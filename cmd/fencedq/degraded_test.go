package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/epoch"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestPartitionsWithAMasterDown: with the Cluster master holding some of
// queue orders' partitions killed (the others keep serving their slots),
// `partitions` and `queues` still print every partition, the lost ones'
// counts as ?, and exit 1 naming them, instead of failing whole.
func TestPartitionsWithAMasterDown(t *testing.T) {
	d := startDegraded(t)
	lay, victim := d.lay, d.victim
	victim.Kill()
	conn := d.conn()
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

// degraded is a three-master cluster (a master down leaving the others
// serving their slots) with queue orders in six partitions holding 12
// jobs, some partitions on master victim, and the namespace's keys and
// orders' own on another.
type degraded struct {
	cl *redistest.Cluster
	// rdb gives up on the dead master at once ([redistest.Cluster.Degradable]);
	// master(key) is the address of the master holding key.
	rdb    *redis.ClusterClient
	master func(key string) string
	ns     string
	client *jobs.Client
	lay    *jobs.QueueLayout
	victim *redistest.Server
}

// conn is the CLI's connection flags for d.
func (d *degraded) conn() []string {
	urls := make([]string, len(d.cl.Addrs()))
	for i, a := range d.cl.Addrs() {
		urls[i] = "redis://" + a
	}
	return []string{"--redis", strings.Join(urls, ","), "--namespace", d.ns}
}

// lost reports whether partition name is on the victim.
func (d *degraded) lost(name string) bool {
	for _, p := range d.lay.Partitions {
		if p.Name == name {
			return p.Master == d.victim.Addr
		}
	}
	return false
}

func startDegraded(t *testing.T) *degraded {
	t.Helper()
	cl := redistest.StartCluster(t)
	ctx := context.Background()
	rdb, master := cl.Degradable()
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
	return &degraded{cl: cl, rdb: rdb, master: master, ns: ns, client: c, lay: lay, victim: victim}
}

// TestLedgerScrapeWithAMasterDown: with the master holding some of
// queue orders' partitions killed, a scrape still exports the queues it
// read whole and fencedq_ledger_unreachable{queue} counting the names it
// could not read, instead of failing whole; orders' counts, short of the
// lost partitions, are left out rather than exported too low.
func TestLedgerScrapeWithAMasterDown(t *testing.T) {
	d := startDegraded(t)
	ctx := context.Background()
	for range 3 {
		if _, err := d.client.EnqueueRaw(ctx, "raw", []byte(`{}`), jobs.Queue("plain"), jobs.Unchecked()); err != nil {
			t.Fatal(err)
		}
	}
	d.victim.Kill()
	// Dialing the dead master once per read keeps the scrape in its time.
	reg := prometheus.NewRegistry()
	reg.MustRegister(newLedgerCollector(jobs.NewInspector(d.rdb, jobs.Config{Namespace: d.ns})))
	fams, err := reg.Gather()
	if err != nil {
		t.Fatalf("a scrape with one master down: %v", err)
	}
	got := map[string]float64{} // metric{queue,state}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			key := f.GetName()
			for _, l := range m.GetLabel() {
				key += "," + l.GetValue()
			}
			got[key] = m.GetGauge().GetValue()
		}
	}
	lost := 0
	for _, p := range d.lay.Partitions {
		if d.lost(p.Name) {
			lost++
		}
	}
	if got["fencedq_ledger_jobs,plain,pending"] != 3 || got["fencedq_ledger_unreachable,plain"] != 0 ||
		got["fencedq_ledger_unreachable,orders"] != float64(lost) {
		t.Fatalf("scrape %v: want plain's 3 pending, orders' %d names unreachable", got, lost)
	}
	if _, ok := got["fencedq_ledger_jobs,orders,pending"]; ok {
		t.Fatalf("scrape %v: orders' counts exported short of the lost partitions", got)
	}
}

// TestListingsWithAMasterDown: with the master holding some of queue
// orders' partitions killed, inspect's listings (every queue's, and
// orders') and queues --queue print what the other masters hold and exit
// 1 naming exactly the lost partitions, instead of refusing to connect;
// a job on a master that answers is still shown and cancelled, found
// without --queue.
func TestListingsWithAMasterDown(t *testing.T) {
	d := startDegraded(t)
	ctx := context.Background()
	id := ""
	for id == "" { // a job of orders on a partition that stays up
		res, err := d.client.EnqueueRaw(ctx, "raw", []byte(`{}`), jobs.Queue("orders"), jobs.Unchecked())
		if err != nil {
			t.Fatal(err)
		}
		if !d.lost(res.Queue) {
			id = res.JobID
		}
	}
	d.victim.Kill()
	conn := d.conn()
	for _, args := range [][]string{
		{"inspect", "--state", "pending", "--limit", "100"},
		{"inspect", "--state", "pending", "--queue", "orders", "--limit", "100"},
		{"queues", "--queue", "orders"},
	} {
		code, out, errOut := runCLI(t, append(args, conn...)...)
		if code != 1 || !strings.Contains(errOut, "could not be read") || !strings.Contains(out, "orders") {
			t.Fatalf("%v: exit %d %q %q, want the reachable rows and 1 naming what could not be read", args, code, out, errOut)
		}
		for _, p := range d.lay.Partitions {
			if d.lost(p.Name) && !strings.Contains(errOut, p.Name) {
				t.Fatalf("%v: %q does not name lost partition %s", args, errOut, p.Name)
			}
			if !d.lost(p.Name) && strings.Contains(errOut, p.Name) {
				t.Fatalf("%v: %q names partition %s, which answers", args, errOut, p.Name)
			}
		}
		if args[0] == "inspect" && !strings.Contains(out, id) {
			t.Fatalf("%v: %q does not list job %s, on a master that answers", args, out, id)
		}
	}
	for _, args := range [][]string{{"inspect", "--job", id}, {"cancel", "--job", id, "--actor", "test", "--note", "degraded"}} {
		if code, out, errOut := runCLI(t, append(args, conn...)...); code != 0 {
			t.Fatalf("%v: exit %d %q %q, want the job, its master answering", args, code, out, errOut)
		}
	}
}

// TestDashboardStartsWithAMasterDown: fencedq dashboard, started while a
// Cluster master is down, serves what the other masters hold (the overview
// flagged partial) instead of refusing to start.
func TestDashboardStartsWithAMasterDown(t *testing.T) {
	d := startDegraded(t)
	d.victim.Kill()
	ctx, cancel := context.WithCancel(context.Background())
	out := &urlWriter{url: make(chan string, 1)}
	var errOut syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"dashboard", "--addr", "127.0.0.1:0", "--log-level", "error"}, d.conn()...), out, &errOut)
	}()
	t.Cleanup(func() { cancel(); <-done })
	var u string
	select {
	case u = <-out.url:
	case code := <-done:
		t.Fatalf("dashboard exited %d: %s", code, errOut.String())
	}
	res, err := http.Get(strings.TrimSuffix(u, "/") + "/api/overview")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var ov struct {
		Partial bool `json:"partial"`
	}
	if err := json.NewDecoder(res.Body).Decode(&ov); err != nil || res.StatusCode != http.StatusOK || !ov.Partial {
		t.Fatalf("overview: %d %+v %v, want 200 flagged partial", res.StatusCode, ov, err)
	}
}
