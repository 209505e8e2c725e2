package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// lostReplies makes every pipeline sent to one node lose its replies
// after Redis ran it: the outcome of its calls is unknown.
type lostReplies struct{}

func (lostReplies) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (lostReplies) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (lostReplies) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		_ = next(ctx, cmds)
		for _, c := range cmds {
			c.SetErr(io.ErrUnexpectedEOF)
		}
		return io.ErrUnexpectedEOF
	}
}

// TestEnqueueManyAcrossPartitionsReportsUnknownFirst: an EnqueueMany whose
// jobs span partitions on three masters, one out of memory (its call
// refused, nothing written), one whose reply is lost (its jobs may exist)
// and one that answers. The error must match ErrEnqueueUnknown, whatever
// the order of the calls: a job may have been written, and an error
// matching only ErrOutOfMemory says nothing was.
func TestEnqueueManyAcrossPartitionsReportsUnknownFirst(t *testing.T) {
	cl := redistest.StartCluster(t)
	ctx := context.Background()
	ns := redistest.Namespace(t)
	names := ledger.PartitionNames("orders", 3)
	setup := cl.Client()
	l := ledger.New(setup, ledger.Config{Namespace: ns})
	node := map[string]string{} // partition → master address
	for _, n := range names {
		addr, err := l.Master(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		node[n] = addr
	}
	// The partition registry's master answers; of the two others, the
	// first is out of memory, the second loses its replies.
	reg, err := setup.MasterForKey(ctx, ns+":partitions")
	if err != nil {
		t.Fatal(err)
	}
	var order []int // partitions: out of memory, lost, answering
	for k, n := range names {
		if node[n] != reg.Options().Addr {
			order = append(order, k)
		}
	}
	for k, n := range names {
		if node[n] == reg.Options().Addr {
			order = append(order, k)
		}
	}
	if len(order) != 3 || len(map[string]bool{node[names[0]]: true, node[names[1]]: true, node[names[2]]: true}) != 3 {
		t.Fatalf("partitions not on three masters: %v", node)
	}
	oom, lost := node[names[order[0]]], node[names[order[1]]]
	if _, err := jobs.NewClient(setup, jobs.Config{Namespace: ns}).SetPartitions(ctx, "orders", 3, "test", ""); err != nil {
		t.Fatal(err)
	}

	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs()})
	t.Cleanup(func() { _ = rdb.Close() })
	rdb.OnNewNode(func(c *redis.Client) {
		if c.Options().Addr == lost {
			c.AddHook(lostReplies{})
		}
	})
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	// The client reads the layout before the nodes fail.
	if _, err := c.Enqueue(ctx, partArgs{Account: "warm-up"}, jobs.Queue("orders"), jobs.PartitionKey(keyFor(t, order[2]))); err != nil {
		t.Fatal(err)
	}
	for _, n := range cl.Nodes {
		if n.Addr == oom {
			nc := n.Client()
			if err := nc.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
				t.Fatal(err)
			}
			if err := nc.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = nc.ConfigSet(context.Background(), "maxmemory", "0").Err() })
		}
	}
	var ps []jobs.Params
	for _, k := range order { // the out-of-memory partition's call first
		ps = append(ps, jobs.Params{Args: partArgs{Account: fmt.Sprint(k)}, Options: []jobs.Option{jobs.Queue("orders"),
			jobs.PartitionKey(keyFor(t, k)), jobs.OperationID(fmt.Sprintf("op-%d", k))}})
	}
	res, err := c.EnqueueMany(ctx, ps)
	if res[0] != nil || res[1] != nil || res[2] == nil || res[2].Partition != names[order[2]] {
		t.Fatalf("results %v (%v): want only the answering partition's job", res, err)
	}
	if !errors.Is(err, jobs.ErrEnqueueUnknown) {
		t.Fatalf("EnqueueMany with a lost reply: %v, want an error matching ErrEnqueueUnknown", err)
	}
}

// keyFor returns a partition key that routes to partition k of 3.
func keyFor(t *testing.T, k int) string {
	t.Helper()
	for i := 0; ; i++ {
		key := fmt.Sprintf("account-%d", i)
		if ledger.RoutePartition(3, key, "", 0) == k {
			return key
		}
	}
}
