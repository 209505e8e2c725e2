package jobs_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// An enqueue that a Redis out of memory refuses (maxmemory reached under
// noeviction) fails with ErrOutOfMemory, not ErrEnqueueUnknown: Redis
// refuses a script before its first write, so nothing was written and the
// caller, with or without an operation id, may enqueue it again once Redis
// has memory. EnqueueMany reports the same and writes nothing either. So on
// a Redis without functions, whose plain scripts Redis refuses at their
// first write.
func TestEnqueueRefusedForLackOfMemoryWritesNothing(t *testing.T) {
	for _, noFunctions := range []bool{false, true} {
		t.Run(fmt.Sprintf("noFunctions=%v", noFunctions), func(t *testing.T) {
			enqueueOutOfMemory(t, redistest.Options{NoFunctions: noFunctions})
		})
	}
}

func enqueueOutOfMemory(t *testing.T, opts redistest.Options) {
	srv := redistest.Start(t, opts)
	rdb := srv.Client()
	ctx := t.Context()
	c := jobs.NewClient(rdb, jobs.Config{Namespace: "fq"})
	if _, err := c.Enqueue(ctx, rangeArgs{N: 1}); err != nil {
		t.Fatal(err)
	}
	filler := strings.Repeat("x", 64<<10)
	for i := range 64 {
		if err := rdb.Set(ctx, fmt.Sprintf("filler:%d", i), filler, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	keys, err := rdb.DBSize(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ConfigSet(ctx, "maxmemory", "1mb").Err(); err != nil {
		t.Fatal(err)
	}

	_, err = c.Enqueue(ctx, rangeArgs{N: 2})
	if !errors.Is(err, jobs.ErrOutOfMemory) || errors.Is(err, jobs.ErrEnqueueUnknown) {
		t.Fatalf("enqueue on a Redis out of memory: %v; want ErrOutOfMemory, not ErrEnqueueUnknown", err)
	}
	if !strings.Contains(err.Error(), "nothing was written") {
		t.Fatalf("the error does not say nothing was written: %v", err)
	}
	res, err := c.EnqueueMany(ctx, []jobs.Params{{Args: rangeArgs{N: 3}}, {Args: rangeArgs{N: 4}, Options: []jobs.Option{jobs.OperationID("op-4")}}})
	if !errors.Is(err, jobs.ErrOutOfMemory) || res[0] != nil || res[1] != nil {
		t.Fatalf("EnqueueMany on a Redis out of memory: %v, %v", res, err)
	}
	if n, err := rdb.DBSize(ctx).Result(); err != nil || n != keys {
		t.Fatalf("%d keys after the refused enqueues, want %d (%v)", n, keys, err)
	}

	if err := rdb.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Enqueue(ctx, rangeArgs{N: 2}); err != nil {
		t.Fatalf("enqueue once Redis has memory: %v", err)
	}
}
