package main

import (
	"context"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestRedisSentinelURL: --redis redis-sentinel://host:port/master reaches
// the primary the Sentinel names: a job enqueued there is on the primary,
// and the read commands list it.
func TestRedisSentinelURL(t *testing.T) {
	if testing.Short() {
		t.Skip("failover tests skipped in -short mode")
	}
	f := redistest.StartFailover(t, redistest.FailoverOptions{})
	ns := redistest.Namespace(t)
	addr := "redis-sentinel://" + f.Sentinel.Addr + "/" + redistest.MasterName
	code, out, errOut := runCLI(t, "enqueue", "--redis", addr, "--namespace", ns, "--kind", "report",
		"--args", `{"customer":"acme"}`, "--op", "report-acme-1", "--unchecked")
	if code != 0 {
		t.Fatalf("enqueue through the Sentinel: %d %q %q", code, out, errOut)
	}
	onPrimary := jobs.NewInspector(f.Primary.Client(), jobs.Config{Namespace: ns})
	rec, err := onPrimary.FindByOperation(context.Background(), "report-acme-1")
	if err != nil || rec.Kind != "report" || !strings.Contains(out, rec.ID) {
		t.Fatalf("the job enqueued through the Sentinel is not on the primary: %+v, %v (output %q)", rec, err, out)
	}
	code, out, errOut = runCLI(t, "queues", "--redis", addr, "--namespace", ns)
	if code != 0 || !strings.Contains(out, "1 queue(s)\n") {
		t.Fatalf("queues through the Sentinel: %d %q %q", code, out, errOut)
	}
	code, _, errOut = runCLI(t, "queues", "--redis", "redis-sentinel://"+f.Sentinel.Addr, "--namespace", ns)
	if code != 2 || !strings.Contains(errOut, "--redis") || !strings.Contains(errOut, "master name") {
		t.Fatalf("a Sentinel URL without a master name: %d %q", code, errOut)
	}
}
