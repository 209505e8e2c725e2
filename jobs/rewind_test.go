package jobs_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

type countArgs struct {
	N int `json:"n"`
}

func (countArgs) Kind() string { return "count" }

// Enqueues acknowledged by a primary whose replica was cut off are lost
// when the replica is promoted. The client's next enqueue detects the
// rewind (counted, recorded for the dashboard), and its record re-creates
// exactly the lost jobs: once, by their own ids, none of those Redis kept,
// not one whose operation was enqueued again after the failover.
func TestRewindAfterFailoverDetectedAndResubmitted(t *testing.T) {
	if testing.Short() {
		t.Skip("failover tests skipped in -short mode")
	}
	ctx := context.Background()
	f := redistest.StartFailover(t, redistest.FailoverOptions{})
	rdb := f.Client()
	ns := redistest.Namespace(t)
	reg := prometheus.NewRegistry()
	cfg := jobs.Config{Namespace: ns, Sentinel: f.ClientOptions(), Registerer: reg}
	client := jobs.NewClient(rdb, cfg)
	enqueue := func(c *jobs.Client, n int, op string) *jobs.Result {
		t.Helper()
		var opts []jobs.Option
		if op != "" {
			opts = append(opts, jobs.OperationID(op))
		}
		res, err := c.Enqueue(ctx, countArgs{N: n}, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	var kept, lost []*jobs.Result
	for i := range 5 {
		kept = append(kept, enqueue(client, i, fmt.Sprintf("kept-%d", i)))
	}
	f.Sync()
	f.CutReplication()
	for i := range 5 {
		op := ""
		if i%2 == 0 {
			op = fmt.Sprintf("lost-%d", i)
		}
		lost = append(lost, enqueue(client, 100+i, op))
	}
	f.KillPrimary()

	// Another client, after the failover, enqueues one lost operation again.
	other := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	var again *jobs.Result
	for range 5 { // its first calls may still meet the old primary's connections
		var err error
		if again, err = other.Enqueue(ctx, countArgs{N: 1}, jobs.OperationID("lost-0")); err == nil {
			break
		}
	}
	if again == nil || again.Deduplicated {
		t.Fatalf("re-enqueue of a lost operation after the failover: %+v", again)
	}
	insp := client.Inspector()
	if rs, _ := insp.Rewinds(ctx); len(rs) != 0 {
		t.Fatalf("a rewind recorded before anyone who saw the lost writes called: %+v", rs)
	}

	// The client's next enqueue finds the ledger behind what it saw.
	enqueue(client, 999, "")
	if v := sum(t, reg, "fencedq_ledger_rewinds_total"); v != 1 {
		t.Fatalf("fencedq_ledger_rewinds_total = %v, want 1", v)
	}
	rs, err := insp.Rewinds(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The other client's write after the failover hides one lost write:
	// the counts are lower bounds.
	if len(rs) != 1 || rs[0].Queue != jobs.DefaultQueue || rs[0].LostEnqueues != int64(len(lost))-1 ||
		rs[0].LostRecorded != int64(len(lost))-1 || rs[0].LostWrites() != int64(len(lost))-1 {
		t.Fatalf("recorded rewinds %+v: want one, with %d enqueues lost, all recorded", rs, len(lost)-1)
	}

	res, err := client.Resubmit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Every recorded job is checked; the lost ones but "lost-0" come back.
	want := len(lost) - 1
	if len(res) != 1 || res[0].Restored != want || res[0].Checked != len(kept)+len(lost) {
		t.Fatalf("resubmitted %+v, want %d of %d restored", res, want, len(kept)+len(lost))
	}
	if v := sum(t, reg, "fencedq_jobs_resubmitted_total"); v != float64(want) {
		t.Fatalf("fencedq_jobs_resubmitted_total = %v, want %d", v, want)
	}
	for _, r := range append(append([]*jobs.Result{}, kept...), lost[1:]...) {
		rec, err := insp.Get(ctx, r.Queue, r.JobID)
		if err != nil || rec.State != jobs.Pending {
			t.Fatalf("job %s (%s): %+v, %v", r.JobID, r.OperationID, rec, err)
		}
	}
	// The lost operation enqueued again exists once, as the other client's
	// job (its id names the operation: the same id).
	if rec, err := insp.Get(ctx, lost[0].Queue, again.JobID); err != nil || rec.State != jobs.Pending || rec.OperationID != "lost-0" {
		t.Fatalf("the other client's job of lost-0: %+v, %v", rec, err)
	}
	if again2, err := client.Resubmit(ctx); err != nil || len(again2) != 0 {
		t.Fatalf("a second re-submission: %+v, %v", again2, err)
	}
	counts, err := insp.Counts(ctx, jobs.DefaultQueue)
	if err != nil {
		t.Fatal(err)
	}
	// kept + lost (each once, "lost-0" as the other client's job) + after.
	if total := len(kept) + len(lost) + 1; counts[jobs.Pending] != int64(total) {
		t.Fatalf("%d pending jobs, want %d: a job was lost or duplicated", counts[jobs.Pending], total)
	}
	if rs, _ = insp.Rewinds(ctx); len(rs) != 1 || rs[0].Resubmitted != int64(want) {
		t.Fatalf("the rewind's record after re-submission: %+v", rs)
	}
}

// sum adds up every series of metric name in reg.
func sum(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			total += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return total
}
