package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestBadNamespaceExitsTwoBeforeConnecting: every command that reads or
// writes the ledger refuses an invalid --namespace as bad usage (exit 2,
// naming the flag) before it connects, as it refuses an invalid --queue:
// the dashboard does not start serving, and a workflow listing does not
// print an empty table. An empty --namespace (an unset shell variable) is
// refused too, rather than taken for the default fq.
func TestBadNamespaceExitsTwoBeforeConnecting(t *testing.T) {
	e := newOperatorEnv(t)
	for _, ns := range []string{"bad ns{x}", ""} {
		bad := []string{"--namespace", ns, "--redis", e.url}
		for _, args := range [][]string{
			{"dashboard", "--addr", "127.0.0.1:0"},
			{"enqueue", "--kind", "k", "--args", "{}", "--unchecked"},
			{"inspect", "--state", "pending"},
			{"inspect", "--job", "x"},
			{"resolve", "--job", "x", "--decision", "rerun", "--actor", "a", "--note", "n"},
			{"cancel", "--job", "x", "--actor", "a", "--note", "n"},
			{"run-now", "--job", "x", "--actor", "a", "--note", "n"},
			{"pause", "--queue", "q", "--actor", "a", "--note", "n"},
			{"resume", "--queue", "q", "--actor", "a", "--note", "n"},
			{"queues"},
			{"partitions", "--queue", "q"},
			{"pools"},
			{"schedules"},
			{"workflow", "inspect"},
			{"workflow", "cancel", "--id", "x", "--actor", "a", "--note", "n"},
		} {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			var out, errb bytes.Buffer
			code := run(ctx, append(args, bad...), &out, &errb)
			cancel()
			if code != 2 || !strings.Contains(errb.String(), "--namespace") {
				t.Errorf("%v: code %d, stdout %q, stderr %q (want 2, naming --namespace)", args, code, out.String(), errb.String())
			}
		}
	}
}

// TestPartitionsOfAnUnusedQueueSaysSo: partitions --queue names a queue no
// job or pool has used (a typo shows one partition otherwise, as a real
// queue would), as queues and inspect do; a used queue gets no note.
func TestPartitionsOfAnUnusedQueueSaysSo(t *testing.T) {
	e := newOperatorEnv(t)
	e.enqueue()
	code, out, errOut := e.cli("partitions", "--queue", "defualt")
	if code != 0 || !strings.Contains(out, "no job or pool has used queue defualt") {
		t.Errorf("partitions of an unused queue: code %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, errOut = e.cli("partitions", "--queue", "default")
	if code != 0 || strings.Contains(out, "no job or pool has used") {
		t.Errorf("partitions of a used queue: code %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// TestReadOnlyCommandsWriteNothing: the read-only commands write nothing,
// neither in a namespace never used (a mistyped --namespace leaves no key
// behind, not even the clock record <ns>:epoch) nor in a used one (whose
// clock record they do not move): Redis's count of writes does not change.
func TestReadOnlyCommandsWriteNothing(t *testing.T) {
	e := newOperatorEnv(t)
	id := e.enqueue()
	rdb := redis.NewClient(&redis.Options{Addr: strings.TrimPrefix(e.url, "redis://")})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	writes := func() string { return redisWrites(t, rdb) }
	reads := [][]string{
		{"queues"}, {"inspect", "--job", id}, {"partitions", "--queue", "default"}, {"pools"}, {"schedules"},
		{"workflow", "inspect"}, {"workflow", "inspect", "--id", "wf-1"},
	}
	for _, s := range []string{"waiting", "pending", "running", "uncertain", "review", "succeeded", "dead", "cancelled"} {
		reads = append(reads, []string{"inspect", "--state", s})
	}
	for _, ns := range []string{e.ns, e.ns + "-typo"} {
		keys := rdb.DBSize(ctx).Val()
		before := writes()
		for _, args := range reads {
			runCLI(t, append(args, "--redis", e.url, "--namespace", ns)...)
			if after := writes(); after != before {
				t.Fatalf("namespace %s: %v wrote to Redis (%s writes before, %s after)", ns, args, before, after)
			}
		}
		if n := rdb.DBSize(ctx).Val(); n != keys {
			t.Errorf("namespace %s: %d keys after the reads, %d before", ns, n, keys)
		}
	}
}

// redisWrites returns Redis's count of writes since its last save.
func redisWrites(t *testing.T, rdb *redis.Client) string {
	t.Helper()
	info, err := rdb.Info(context.Background(), "persistence").Result()
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`rdb_changes_since_last_save:(\d+)`).FindStringSubmatch(info)
	if m == nil {
		t.Fatalf("no write count in %q", info)
	}
	return m[1]
}

// TestFailedOperatorCommandsWriteNothing: an operator command that finds
// nothing to act on (a schedule, job or workflow not found) exits 1,
// names an empty namespace as such, and writes nothing: a mistyped
// --namespace leaves no key behind, not even the clock record.
func TestFailedOperatorCommandsWriteNothing(t *testing.T) {
	e := newOperatorEnv(t)
	e.enqueue()
	rdb := redis.NewClient(&redis.Options{Addr: strings.TrimPrefix(e.url, "redis://")})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	failing := [][]string{
		{"schedules", "--id", "nosuch", "--remove", "--actor", "ops", "--note", "retired"},
		{"cancel", "--job", "nosuch", "--actor", "ops", "--note", "n"},
		{"resolve", "--job", "nosuch", "--actor", "ops", "--decision", "rerun"},
		{"run-now", "--job", "nosuch", "--actor", "ops"},
		{"workflow", "cancel", "--id", "nosuch", "--actor", "ops", "--note", "n"},
	}
	for _, ns := range []string{e.ns, e.ns + "-typo"} {
		for _, args := range failing {
			keys, before := rdb.DBSize(ctx).Val(), redisWrites(t, rdb)
			code, out, errOut := runCLI(t, append(args, "--redis", e.url, "--namespace", ns)...)
			if code != 1 || out != "" || !strings.Contains(errOut, "not found") {
				t.Errorf("namespace %s: %v: code %d, stdout %q, stderr %q; want 1 and not found", ns, args, code, out, errOut)
			}
			if ns != e.ns && !strings.Contains(errOut, "has no queues") {
				t.Errorf("namespace %s: %v: stderr %q does not say the namespace has no queues", ns, args, errOut)
			}
			if after := redisWrites(t, rdb); after != before {
				t.Errorf("namespace %s: %v wrote to Redis (%s writes before, %s after)", ns, args, before, after)
			}
			if n := rdb.DBSize(ctx).Val(); n != keys {
				t.Errorf("namespace %s: %v: %d keys after, %d before", ns, args, n, keys)
			}
		}
	}
}
