package jobs_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// failRegistry fails every command cmd (SADD when "") on one key while on:
// the queue or partition registry on a Cluster node that cannot be reached.
type failRegistry struct {
	key, cmd string
	on       atomic.Bool
}

func (f *failRegistry) DialHook(next redis.DialHook) redis.DialHook { return next }

func (f *failRegistry) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		name := f.cmd
		if name == "" {
			name = "sadd"
		}
		if f.on.Load() && cmd.Name() == name && len(cmd.Args()) > 1 && cmd.Args()[1] == f.key {
			cmd.SetErr(errors.New("dial tcp: connection refused"))
			return cmd.Err()
		}
		return next(ctx, cmd)
	}
}

func (f *failRegistry) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestEnqueueSucceedsWhenOnlyTheRegistryWriteFails: the job was written
// (it exists, it can be claimed), so Enqueue reports it, not an error that
// would invite a duplicate; the registry is completed by the next enqueue.
func TestEnqueueSucceedsWhenOnlyTheRegistryWriteFails(t *testing.T) {
	rdb, ns := redistest.New(t)
	hook := &failRegistry{key: ns + ":queues"}
	rdb.AddHook(hook)
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	in := c.Inspector()
	ctx := context.Background()

	hook.on.Store(true)
	res, err := c.Enqueue(ctx, noteArgs{}, jobs.Queue("fresh"))
	if err != nil || res == nil || res.Deduplicated {
		t.Fatalf("enqueue while the registry fails: %+v, %v", res, err)
	}
	many, err := c.EnqueueMany(ctx, []jobs.Params{{Args: noteArgs{}, Options: []jobs.Option{jobs.Queue("fresh-2")}}})
	if err != nil || len(many) != 1 || many[0] == nil {
		t.Fatalf("enqueue many while the registry fails: %+v, %v", many, err)
	}
	if qs, _ := in.Queues(ctx); len(qs) != 0 {
		t.Fatalf("registry %v, want the write to have failed", qs)
	}
	l := ledger.New(rdb, ledger.Config{Namespace: ns})
	cl, err := l.Claim(ctx, "fresh", "pool", time.Minute, 10)
	if err != nil || len(cl.Jobs) != 1 || cl.Jobs[0].ID != res.JobID {
		t.Fatalf("the job is not there to run: %+v %v", cl, err)
	}

	hook.on.Store(false)
	if _, err := c.Enqueue(ctx, noteArgs{}, jobs.Queue("later")); err != nil {
		t.Fatal(err)
	}
	qs, err := in.Queues(ctx)
	if err != nil || !slices.Equal(qs, []string{"fresh", "fresh-2", "later"}) {
		t.Fatalf("registry after the next enqueue: %v, %v", qs, err)
	}
}
