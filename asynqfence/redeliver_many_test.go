package asynqfence_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/fencedq/fencedq/asynqfence"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestRedeliverReachesEveryJob: more bridged jobs wait for a delivery than
// one look at a state takes (here 250 retries, their tasks live in asynq),
// and the task of the last one, by id, is gone. Redeliver still finds it
// and gives it a new task: no number of jobs whose tasks asynq holds keeps
// a job whose task is gone from being delivered again.
func TestRedeliverReachesEveryJob(t *testing.T) {
	rdb := redistest.Start(t, redistest.Options{}).Client()
	ns := redistest.Namespace(t)
	ctx := context.Background()
	lg := ledger.New(rdb, ledger.Config{Namespace: ns})
	b, err := asynqfence.New(rdb, jobs.Config{Namespace: ns}, asynqfence.Options{WorkerID: "redeliverer"})
	if err != nil {
		t.Fatal(err)
	}
	if err := lg.RegisterQueues(ctx, "default"); err != nil { // as the bridge's deliveries do
		t.Fatal(err)
	}
	client := asynq.NewClientFromRedisClient(rdb)
	const live = 250
	lost := fmt.Sprintf("j%04d", live) // sorts after every live one
	for i := range live + 1 {
		id := fmt.Sprintf("j%04d", i)
		dc, err := lg.ClaimDelivery(ctx, "default", ledger.Delivery{
			ID: id, Kind: "charge", Payload: []byte(`{}`), MaxRetries: 3,
			Owner: "asynq-1", TTL: time.Minute, Bridge: asynqfence.BridgeName, TaskQueue: "default", TaskID: id,
		})
		if err != nil || dc.Status != ledger.DeliveryClaimed {
			t.Fatalf("claim %s: %+v, %v", id, dc, err)
		}
		out, err := lg.Complete(ctx, "default", []ledger.Completion{{ID: id, Token: dc.Claimed.Token,
			Outcome: ledger.Outcome{To: jobs.Pending, Error: "try later"}}})
		if err != nil || !out[0].Applied {
			t.Fatalf("retry %s: %+v, %v", id, out, err)
		}
		if id == lost {
			continue // its task is gone
		}
		if _, err := client.Enqueue(asynq.NewTask("charge", []byte(`{}`)), asynq.TaskID(id), asynq.ProcessIn(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	n, err := b.Redeliver(ctx)
	if err != nil || n != 1 {
		t.Fatalf("Redeliver: %d, %v; want the job whose task is gone delivered again", n, err)
	}
	insp := asynq.NewInspectorFromRedisClient(rdb)
	if info, err := insp.GetTaskInfo("default", lost+"~1"); err != nil || info.Headers[asynqfence.JobHeader] != lost {
		t.Fatalf("new task for %s: %+v, %v", lost, info, err)
	}
}
