package ledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
)

// TestResubmittedJobKeepsItsFlowAndGroup: a job lost in a rewind comes back
// under its concurrency limit, its rate and its fair group, as enqueued.
func TestResubmittedJobKeepsItsFlowAndGroup(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Options{})
	rdb := srv.Client()
	ns := redistest.Namespace(t)
	const q = "default"
	client := ledger.New(rdb, ledger.Config{Namespace: ns, Recent: 10})
	j := newJob(q, "op-flow")
	j.Flow = &ledger.Flow{LimitKey: "export:cust-42", LimitMax: 2, RateKey: "provider", RateMax: 100, RatePer: time.Second}
	j.Group = "acme"
	if _, err := client.Insert(ctx, []*ledger.NewJob{j}); err != nil {
		t.Fatal(err)
	}
	srv.Restart() // no persistence: the job is lost
	if _, err := client.Insert(ctx, []*ledger.NewJob{newJob(q, "")}); err != nil {
		t.Fatal(err)
	}
	res, err := client.Resubmit(ctx)
	if err != nil || len(res) != 1 || res[0].Restored != 1 {
		t.Fatalf("resubmitted %+v, %v; want the lost job restored", res, err)
	}
	rec, err := client.Get(ctx, q, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.LimitKey != "export:cust-42" || rec.LimitMax != 2 || rec.RateKey != "provider" || rec.RateMax != 100 ||
		rec.RatePer != time.Second || rec.Group != "acme" {
		t.Fatalf("the re-created job: limit %q/%d, rate %q %d per %v, group %q; want them as enqueued",
			rec.LimitKey, rec.LimitMax, rec.RateKey, rec.RateMax, rec.RatePer, rec.Group)
	}
}
