package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary stand in for fencedq-bench when the
// recovery section re-runs its own executable as "worker".
func TestMain(m *testing.M) {
	if os.Getenv(roleEnv) == "worker" && len(os.Args) > 1 && os.Args[1] == "worker" {
		os.Exit(workerMain(os.Args[2:]))
	}
	os.Exit(m.Run())
}

// TestSmoke runs every section with tiny counts so the benchmark cannot
// rot. It asserts that the JSON report is complete and its figures are
// positive, never how fast anything is.
func TestSmoke(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(installHint)
		}
		t.Skip("SKIPPING the benchmark smoke test: " + installHint)
	}
	args := []string{"--json", "--quiet", "--jobs", "200", "--memory-jobs", "500", "--pg-jobs", "100",
		"--repeat", "1", "--kills", "1", "--lease-ops", "400", "--cluster-queues", "3", "--partition-counts", "1,3",
		"--recovery-modes", "fencedq-1s", "--recovery-timeout", "30s",
		"--concurrency", "10,50", "--enqueue-jobs", "200", "--latency-rate", "200", "--latency-duration", "500ms",
		"--outbox-rate", "200", "--outbox-duration", "500ms", "--workflow-runs", "3", "--groups-backlog", "2000"}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	start := time.Now()
	if err := run(ctx, args, &stdout, &stderr); err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, stderr.String())
	}
	t.Logf("smoke run took %v\n%s", time.Since(start).Round(time.Millisecond), stderr.String())

	var rep map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, stdout.String())
	}
	for _, s := range allSections {
		if _, ok := rep[s].(map[string]any); !ok {
			t.Errorf("section %q missing or null", s)
		}
	}
	positive := func(path string) {
		t.Helper()
		v := any(rep)
		for _, k := range strings.Split(path, ".") {
			m, ok := v.(map[string]any)
			if !ok {
				t.Errorf("%s: %q is not an object", path, k)
				return
			}
			v = m[k]
		}
		if f, ok := v.(float64); !ok || !(f > 0) {
			t.Errorf("%s = %v, want a positive number", path, v)
		}
	}
	for _, p := range []string{
		"noop.at.10.asynq.jobs_per_s", "noop.at.10.fencedq.jobs_per_s", "noop.at.10.ratio", "noop.at.50.ratio",
		"noop.at.10.asynq.per_job.round_trips", "noop.at.10.fencedq.per_job.round_trips",
		"noop.at.10.asynq.per_job.server_commands", "noop.at.10.fencedq.per_job.server_commands",
		"noop.at.10.fencedq.enqueue_jobs_per_s",
		"enqueue.asynq.jobs_per_s", "enqueue.fencedq.jobs_per_s", "enqueue.fencedq_many.jobs_per_s",
		"enqueue.ratio", "enqueue.ratio_many", "enqueue.fencedq.per_job.round_trips",
		"latency.asynq.p50_ms", "latency.asynq.max_ms", "latency.fencedq.p50_ms", "latency.fencedq.p99_ms", "latency.fencedq.max_ms",
		"cluster.single.asynq.jobs_per_s", "cluster.single.fencedq.jobs_per_s",
		"cluster.cluster.asynq.jobs_per_s", "cluster.cluster.fencedq.jobs_per_s", "cluster.ratio",
		"lease.libraries.fencedq.ops_per_s", "lease.libraries.redislock.ops_per_s", "lease.libraries.redsync.ops_per_s",
		"lease.ratio.redislock", "lease.ratio.redsync", "lease.libraries.fencedq.per_op.server_commands",
		"memory.fencedq.gross_bytes_per_job", "memory.asynq_retained.gross_bytes_per_job", "memory.ratio",
		"memory.fencedq.memory_usage_by_key.job_hash", "memory.fencedq_operation_id.memory_usage_by_key.job_hash",
		"bridge.asynq.jobs_per_s", "bridge.bridge.jobs_per_s", "bridge.ratio", "bridge.bridge.per_job.round_trips",
		"machine.cpus", "groups.fairness.last_b_ms", "queues.at.10.ratio", "queues.at.50.ratio",
	} {
		positive(p)
	}
	// Group B's 10 jobs start long before group A's 2000-job backlog drains.
	if g, _ := rep["groups"].(map[string]any); g != nil {
		f, _ := g["fairness"].(map[string]any)
		if n, ok := f["a_started_before_last_b"].(float64); !ok || n >= 1000 {
			t.Errorf("groups.fairness = %v: want far fewer than 1000 of A's jobs before B's last", f)
		}
	}
	if wf, _ := rep["workflows"].(map[string]any); wf != nil {
		shapes, _ := wf["shapes"].([]any)
		if len(shapes) != 2 {
			t.Errorf("workflows.shapes = %v, want the chain and the fan-out", wf["shapes"])
		}
		for _, sh := range shapes {
			m, _ := sh.(map[string]any)
			for _, k := range []string{"end_to_end_ms", "steps_per_s", "independent_ms"} {
				if f, ok := m[k].(float64); !ok || !(f > 0) {
					t.Errorf("workflows %v: %s = %v, want a positive number", m["name"], k, m[k])
				}
			}
		}
	}
	if pg, _ := rep["postgres"].(map[string]any); pg != nil {
		if pg["skipped"] == true {
			t.Logf("postgres section skipped: %v", pg["note"])
		} else {
			positive("postgres.ratio")
			positive("postgres.fencedq_pgfence.jobs_per_s")
		}
	}
	if b, _ := rep["bridge"].(map[string]any); b != nil {
		if pg, _ := b["postgres"].(map[string]any); pg == nil {
			t.Error("bridge.postgres missing")
		} else if pg["skipped"] == true {
			t.Logf("bridge postgres variant skipped: %v", pg["note"])
		} else {
			positive("bridge.postgres.ratio")
			positive("bridge.postgres.bridge_pgfence.jobs_per_s")
		}
	}
	if ob, _ := rep["outbox"].(map[string]any); ob != nil {
		if ob["skipped"] == true {
			t.Logf("outbox section skipped: %v", ob["note"])
		} else {
			for _, p := range []string{
				"outbox.plain_enqueue.jobs_per_s", "outbox.outbox_enqueue.jobs_per_s", "outbox.outbox_enqueue_many.jobs_per_s",
				"outbox.ratio", "outbox.statements_per_job", "outbox.relay_drain_jobs_per_s",
				"outbox.outbox_latency.p50_ms", "outbox.outbox_latency.p99_ms", "outbox.plain_latency.p50_ms",
			} {
				positive(p)
			}
		}
	}
	if v, _ := rep["recovery"].(map[string]any); v != nil {
		variants, _ := v["variants"].(map[string]any)
		f, _ := variants["fencedq-1s"].(map[string]any)
		if f == nil || f["kills"] != 1.0 {
			t.Errorf("recovery.variants[fencedq-1s] = %v, want one kill", f)
		} else if f["recovered"] == 1.0 {
			positive("recovery.variants.fencedq-1s.median_s")
		} else {
			t.Logf("recovery: the killed job did not run again: %v", f["note"])
		}
	}
}

// TestKeySlot checks the benchmark's hash-slot function against values
// from CLUSTER KEYSLOT (Redis 7.0).
func TestKeySlot(t *testing.T) {
	for key, want := range map[string]int{
		"foo": 12182, "bar": 5061, "hello": 866, "{user1000}.following": 3443,
		"fqb-1/q3": 279, "x{}y": 16116, "{}{a}": 13650,
	} {
		if got := keySlot(key); got != want {
			t.Errorf("keySlot(%q) = %d, want %d", key, got, want)
		}
	}
}

// TestMedian covers the statistics helpers.
func TestMedian(t *testing.T) {
	if m := median([]float64{3, 1, 2}); m != 2 {
		t.Errorf("median odd = %v", m)
	}
	if m := median([]float64{4, 1, 3, 2}); m != 2.5 {
		t.Errorf("median even = %v", m)
	}
	if i := medianIndex([]float64{10, 30, 20}); i != 2 {
		t.Errorf("medianIndex = %d", i)
	}
}
