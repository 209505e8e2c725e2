package main

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestLedgerJobsScrapeFailsWithoutRedis: fencedq dashboard's /metrics
// exports the ledger's counts read at scrape time; a scrape that cannot
// read them fails with the error, instead of answering with no series (an
// empty ledger to Prometheus, which would end every alert on the counts).
func TestLedgerJobsScrapeFailsWithoutRedis(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	defer rdb.Close()
	client := jobs.NewClient(rdb, jobs.Config{Namespace: redistest.Namespace(t)})
	defer client.Close()
	if _, err := client.EnqueueRaw(context.Background(), "work", []byte(`{}`), jobs.Unchecked()); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(newLedgerCollector(client.Inspector()))
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	pending := 0.0
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "state" && l.GetValue() == string(jobs.Pending) {
					pending += m.GetGauge().GetValue()
				}
			}
		}
	}
	if pending != 1 {
		t.Fatalf("fencedq_ledger_jobs{state=\"pending\"} = %v, want 1", pending)
	}
	srv.Kill()
	if _, err := reg.Gather(); err == nil || !strings.Contains(err.Error(), "fencedq_ledger_jobs") {
		t.Fatalf("a scrape with Redis unreachable gave %v, want an error", err)
	}
}
