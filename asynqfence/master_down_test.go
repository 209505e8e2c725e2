package asynqfence_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/hibiken/asynq"

	"github.com/fencedq/fencedq/asynqfence"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestBridgedJobFoundWithAPartitionsMasterDown: a task whose job is
// recorded in a partition on a master still up is delivered again after
// the master of another partition (one sorting before it) went down: the
// bridge finds the job where it is and runs the task, rather than
// refusing every delivery of the queue until the lost master is back.
func TestBridgedJobFoundWithAPartitionsMasterDown(t *testing.T) {
	cl := redistest.StartCluster(t)
	ctx := context.Background()
	rdb, master := cl.Degradable()
	var ns, home string
	for i := 0; ns == ""; i++ {
		ns = fmt.Sprintf("%s-%d", redistest.Namespace(t), i)
		home = master(ns + ":queues")
		if master(ns+":partitions") != home {
			ns = ""
		}
	}
	names := ledger.PartitionNames("default", 6)
	at := make([]string, len(names))
	for k, n := range names {
		at[k] = master(ns + ":{" + n + "}:pending")
	}
	victim, job := "", -1
	for k := range names {
		switch {
		case victim == "" && at[k] != home:
			victim = at[k]
		case victim != "" && at[k] != victim && job < 0:
			job = k
		}
	}
	if victim == "" || job < 0 {
		t.Fatalf("partitions on %v, registry on %s: no layout to test", at, home)
	}
	op := ""
	for i := 0; op == ""; i++ {
		if o := fmt.Sprintf("order-%d", i); ledger.RoutePartition(6, "", o, 0) == job {
			op = o
		}
	}
	client := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	if _, err := client.SetPartitions(ctx, "default", 6, "test", "bridge"); err != nil {
		t.Fatal(err)
	}
	b, err := asynqfence.New(rdb, jobs.Config{Namespace: ns}, asynqfence.Options{WorkerID: "master-down"})
	if err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int32
	mux, returned := bridgedMux(t, b)
	mux.HandleFunc("order", func(context.Context, *asynq.Task) error {
		if runs.Add(1) == 1 {
			for _, n := range cl.Nodes {
				if n.Addr == victim {
					n.Kill()
				}
			}
			return errors.New("try again")
		}
		return nil
	})
	addr := redistest.Start(t, redistest.Options{}).Client().Options().Addr
	srv := asynq.NewServer(asynq.RedisClientOpt{Addr: addr}, testServerConfig())
	if err := srv.Start(mux); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	ac := asynq.NewClient(asynq.RedisClientOpt{Addr: addr})
	t.Cleanup(func() { _ = ac.Close() })
	task := asynq.NewTaskWithHeaders("order", []byte(`{"n":1}`), map[string]string{asynqfence.OperationHeader: op})
	if _, err := ac.Enqueue(task, asynq.TaskID(op), asynq.MaxRetry(50)); err != nil {
		t.Fatal(err)
	}
	if err := returned.WaitOrTimeout(); err == nil {
		t.Fatal("the first delivery succeeded; its handler failed")
	}
	if err := returned.WaitOrTimeout(); err != nil {
		t.Fatalf("the delivery after the master went down returned %v; its job is on a master still up", err)
	}
	rec, err := client.Inspector().FindByOperationIn(ctx, "default", op)
	if err != nil || rec.State != jobs.Succeeded || rec.Queue != names[job] || runs.Load() != 2 {
		t.Fatalf("job %+v, %v after %d runs; want it succeeded in %s after 2", rec, err, runs.Load(), names[job])
	}
}
