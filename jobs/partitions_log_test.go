package jobs_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// syncBuffer is a log destination safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// TestPartitionRegistryFailureIsLoggedOnce: while the partition registry
// cannot be read, enqueues route by the counts read before and the failure
// is logged once, not once per enqueue; a read that succeeds again says so,
// and the next failure is logged again.
func TestPartitionRegistryFailureIsLoggedOnce(t *testing.T) {
	rdb, ns := redistest.New(t)
	hook := &failRegistry{key: ns + ":partitions", cmd: "hmget"}
	rdb.AddHook(hook)
	var logs syncBuffer
	client := jobs.NewClient(rdb, jobs.Config{Namespace: ns, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	ctx := context.Background()
	enqueue := func() {
		t.Helper()
		jobs.AgePartitionCountsForTest(client, jobs.PartitionRefresh+1)
		if _, err := client.Enqueue(ctx, countArgs{N: 1}); err != nil {
			t.Fatal(err)
		}
	}
	enqueue() // the count is read
	hook.on.Store(true)
	for range 5 {
		enqueue()
	}
	warn := "reading the partition registry failed"
	if n := strings.Count(logs.String(), warn); n != 1 {
		t.Fatalf("5 enqueues during a registry failure logged it %d times, want once:\n%s", n, logs.String())
	}
	hook.on.Store(false)
	enqueue()
	if !strings.Contains(logs.String(), "the partition registry is readable again") {
		t.Fatalf("no line says the registry is readable again:\n%s", logs.String())
	}
	hook.on.Store(true)
	enqueue()
	if n := strings.Count(logs.String(), warn); n != 2 {
		t.Fatalf("a second failure logged %d lines in all, want 2:\n%s", n, logs.String())
	}
}
