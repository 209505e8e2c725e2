package jobs_test

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestLimitWaitsCountParksAtEnqueue: jobs parked by their enqueue (the
// limit's permits held or promised) count as limit waits, as jobs a claim
// parks do: in the queue's limit_waits stat and in
// fencedq_limit_waits_total, labelled by the limit's name, never its key.
// Grouped jobs park as they would lead their group (a parked job leaves
// its group without a head, so the next one leads).
func TestLimitWaitsCountParksAtEnqueue(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns, Registerer: reg})
	lim := jobs.Limit("export:cust-42", 1)
	for i := range 3 { // the first is promised the permit, the next two park
		if _, err := c.Enqueue(ctx, rangeArgs{N: i}, lim); err != nil {
			t.Fatal(err)
		}
	}
	// grouped: each of acme's jobs leads its group, and parks
	for i := range 2 {
		if _, err := c.Enqueue(ctx, rangeArgs{N: 10 + i}, lim, jobs.Group("acme")); err != nil {
			t.Fatal(err)
		}
	}
	st, err := c.Inspector().Limits(ctx, jobs.DefaultQueue)
	if err != nil || len(st.Limits) != 1 || st.Limits[0].Waiting != 4 {
		t.Fatalf("limits %+v (%v), want 4 jobs parked on export:cust-42", st, err)
	}
	stats, err := c.Inspector().Stats(ctx, jobs.DefaultQueue)
	if err != nil {
		t.Fatal(err)
	}
	if stats["limit_waits"] != 4 {
		t.Errorf("limit_waits stat %d, want 4 (the jobs parked at their enqueue)", stats["limit_waits"])
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	total := 0.0
	for _, f := range fams {
		if f.GetName() != "fencedq_limit_waits_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			got = append(got, strings.Join(ls, ","))
			total += m.GetCounter().GetValue()
		}
	}
	if total != 4 || len(got) != 1 || got[0] != "limit=export,queue="+jobs.DefaultQueue {
		t.Errorf("fencedq_limit_waits_total %v over %v, want 4 over limit=export,queue=%s", total, got, jobs.DefaultQueue)
	}
}

// TestLimitWaitsOfUnnamedKeyLabelNoKey: a job its enqueue parks on a key
// without a name before a ':' counts under the label "unnamed", never the
// key (as a whole it may be user data).
func TestLimitWaitsOfUnnamedKeyLabelNoKey(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns, Registerer: reg})
	for i := range 2 { // the first is promised the permit, the second parks
		if _, err := c.Enqueue(ctx, rangeArgs{N: i}, jobs.Limit("alice@example.com", 1)); err != nil {
			t.Fatal(err)
		}
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != "fencedq_limit_waits_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "limit" {
					got[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	if len(got) != 1 || got["unnamed"] != 1 {
		t.Errorf("fencedq_limit_waits_total by limit %v, want 1 under unnamed", got)
	}
}
