package workflow_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/workflow"
)

// queuesOnEachMaster returns three queue names whose slots are held by
// three different masters of the cluster.
func queuesOnEachMaster(t *testing.T, rdb *redis.ClusterClient, ns string) []string {
	ctx := context.Background()
	owner := map[string]string{}
	var out []string
	for i := 0; len(out) < 3 && i < 1000; i++ {
		q := fmt.Sprintf("wfq%d", i)
		var addr string
		slot, err := rdb.ClusterKeySlot(ctx, ns+":{"+q+"}:pending").Result()
		if err != nil {
			t.Fatal(err)
		}
		shards, err := rdb.ClusterShards(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		for i, sh := range shards {
			for _, r := range sh.Slots {
				if r.Start <= slot && slot <= r.End {
					addr = fmt.Sprint(i)
				}
			}
		}
		if addr != "" && owner[addr] == "" {
			owner[addr] = q
			out = append(out, q)
		}
	}
	if len(out) != 3 {
		t.Fatalf("found queues on %d masters, want 3", len(out))
	}
	return out
}

// TestStepsInThreeQueuesOnACluster: a diamond whose steps live on three
// masters, its hand-overs crossing slots, each step once, outputs passed
// along.
func TestStepsInThreeQueuesOnACluster(t *testing.T) {
	cl := redistest.StartCluster(t).Client()
	ns := redistest.Namespace(t)
	e := newEnvOn(t, cl, ns)
	qs := queuesOnEachMaster(t, cl, ns)
	ctx := context.Background()
	w := workflow.New("order").
		Add("charge", step("charge"), workflow.Options(jobs.Queue(qs[0]))).
		Add("reserve", step("reserve", "charge"), workflow.After("charge"), workflow.Options(jobs.Queue(qs[1]))).
		Add("invoice", step("invoice", "charge"), workflow.After("charge"), workflow.Options(jobs.Queue(qs[2]))).
		Add("ship", step("ship", "reserve", "invoice"), workflow.After("reserve", "invoice"), workflow.Options(jobs.Queue(qs[1]))).
		Add("audit", step("audit"), workflow.Options(jobs.Queue(qs[2]))) // a root outside the home queue
	res, err := workflow.Enqueue(ctx, e.client, w, workflow.OperationID("cluster-order"))
	if err != nil {
		t.Fatal(err)
	}
	again, err := workflow.Enqueue(ctx, e.client, w, workflow.OperationID("cluster-order"))
	if err != nil || !again.Deduplicated || again.ID != res.ID {
		t.Fatalf("second enqueue: %+v, %v", again, err)
	}
	e.start(qs...)
	e.wait(res, "ship", jobs.Succeeded)
	e.wait(res, "audit", jobs.Succeeded)
	for _, s := range []string{"charge", "reserve", "invoice", "ship", "audit"} {
		if n := e.runs.count(s); n != 1 {
			t.Errorf("step %s ran %d times", s, n)
		}
	}
	var out StepOut
	if err := e.client.Output(ctx, qs[1], res.Steps["ship"].JobID, &out); err != nil {
		t.Fatal(err)
	}
	if out.Seen["reserve"] != 2 || out.Seen["invoice"] != 2 {
		t.Fatalf("ship's output %+v", out)
	}
	if st := e.status(res.ID); st.State != workflow.Succeeded || st.Done != 5 {
		t.Fatalf("status %s %d/%d", st.State, st.Done, st.Total)
	}
}
