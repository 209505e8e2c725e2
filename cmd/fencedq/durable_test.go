package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestDurableCancelUnacknowledgedSaysSo: with --replicas (the workers'
// jobs.Config.Durability.Replicas) an operator action waits for the
// replicas as the workers' writes do; with replication cut it exits 1
// saying the action applied on the primary and may be lost in a failover,
// never 0. --replicas refuses a negative count as bad usage.
func TestDurableCancelUnacknowledgedSaysSo(t *testing.T) {
	if testing.Short() {
		t.Skip("failover tests skipped in -short mode")
	}
	ctx := context.Background()
	f := redistest.StartFailover(t, redistest.FailoverOptions{})
	ns := redistest.Namespace(t)
	client := jobs.NewClient(f.Client(), jobs.Config{Namespace: ns, Sentinel: f.ClientOptions(),
		Durability: jobs.Durability{Replicas: 1, Timeout: time.Second}})
	var ids []string
	for range 2 {
		r, err := client.Enqueue(ctx, vaultArgs{}, jobs.Delay(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.JobID)
	}
	conn := []string{"--redis", "redis-sentinel://" + f.Sentinel.Addr + "/" + redistest.MasterName, "--namespace", ns}
	if code, _, errOut := runCLI(t, append([]string{"cancel", "--replicas", "-1", "--job", ids[0], "--actor", "alice", "--note", "x"}, conn...)...); code != 2 {
		t.Fatalf("--replicas -1: code %d, stderr %q; want bad usage", code, errOut)
	}

	f.CutReplication()
	code, out, errOut := runCLI(t, append([]string{"cancel", "--replicas", "1", "--job", ids[0], "--actor", "alice", "--note", "cut"}, conn...)...)
	if code != 1 || !strings.Contains(errOut, "applied on the primary") {
		t.Fatalf("cancel with replication cut: code %d, stdout %q, stderr %q; want 1, saying it applied on the primary", code, out, errOut)
	}
	if rec, err := client.Inspector().Get(ctx, jobs.DefaultQueue, ids[0]); err != nil || rec.State != jobs.Cancelled {
		t.Fatalf("on the primary: %+v, %v", rec, err)
	}
}
