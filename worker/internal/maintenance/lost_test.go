package maintenance

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fencedq/fencedq/internal/metrics"
	"github.com/fencedq/fencedq/jobs"
)

// A running job whose record vanished (evicted by a Redis that may evict,
// or deleted by hand) is reported as lost when the expirer drops its index
// entry: logged at error level with its id and counted as
// rejected{reason="unknown_job"}, as a claim counts a due entry without a
// record. A stale entry of a job in another state is not counted.
func TestExpirerReportsARunningJobWhoseRecordIsGone(t *testing.T) {
	f := newFixture(t)
	l := f.leader(f.config())
	leader := f.lead("pool-a")
	q := jobs.DefaultQueue
	f.enqueue("work")
	gone := f.claim(q, 0)
	if err := f.rdb.Del(f.ctx, f.ledger.JobKey(q, gone)).Err(); err != nil {
		t.Fatal(err)
	}

	if err := l.expirer.runOnce(f.ctx, leader); err != nil {
		t.Fatal(err)
	}
	if !f.logged(`"level":"ERROR"`, "job record gone", gone, `"job_state":"running"`) {
		t.Errorf("the lost running job %s is not logged at error level:\n%s", gone, f.logs.String())
	}
	if v := testutil.ToFloat64(f.metrics.Rejected.WithLabelValues(q, metrics.ReasonUnknownJob)); v != 1 {
		t.Errorf("rejected{unknown_job} = %v, want 1", v)
	}
}

// An uncertain job whose record vanished is reported by the resolver, which
// drops its index entry: logged at error level with its id and counted,
// never dropped without a word.
func TestResolverReportsAnUncertainJobWhoseRecordIsGone(t *testing.T) {
	f := newFixture(t)
	l := f.leader(f.config())
	leader := f.lead("pool-a")
	q := jobs.DefaultQueue
	gone := f.uncertain("opaque", leader)
	kept := f.uncertain("opaque", leader)
	if err := f.rdb.Del(f.ctx, f.ledger.JobKey(q, gone)).Err(); err != nil {
		t.Fatal(err)
	}

	if err := l.resolver.runOnce(f.ctx, leader); err != nil {
		t.Fatal(err)
	}
	if !f.logged(`"level":"ERROR"`, "job record gone", gone, `"job_state":"uncertain"`) {
		t.Errorf("the lost uncertain job %s is not logged at error level:\n%s", gone, f.logs.String())
	}
	if f.logged("job record gone", kept) {
		t.Errorf("the job %s whose record exists is reported lost", kept)
	}
	if v := testutil.ToFloat64(f.metrics.Rejected.WithLabelValues(q, metrics.ReasonUnknownJob)); v != 1 {
		t.Errorf("rejected{unknown_job} = %v, want 1", v)
	}
	if rec := f.get(kept); rec.State != jobs.Review {
		t.Errorf("the other uncertain job is %s, want review", rec.State)
	}
}

// Listing running and uncertain jobs (the dashboard, fencedq inspect) leaves
// out one whose record is gone but does not remove its index entry: the
// expirer and the resolver still report it, and it is not hidden by a read.
func TestListingDoesNotHideALostJobFromMaintenance(t *testing.T) {
	f := newFixture(t)
	l := f.leader(f.config())
	leader := f.lead("pool-a")
	q := jobs.DefaultQueue
	uncertain := f.uncertain("opaque", leader)
	f.enqueue("work")
	running := f.claim(q, 0)
	for _, id := range []string{uncertain, running} {
		if err := f.rdb.Del(f.ctx, f.ledger.JobKey(q, id)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []jobs.State{jobs.Running, jobs.Uncertain} {
		list, err := f.client.Inspector().List(f.ctx, jobs.ListParams{State: s, Queue: q})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Jobs) != 0 {
			t.Fatalf("%s jobs listed: %+v, want none (their records are gone)", s, list.Jobs)
		}
	}

	if err := l.expirer.runOnce(f.ctx, leader); err != nil {
		t.Fatal(err)
	}
	if err := l.resolver.runOnce(f.ctx, leader); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{uncertain, running} {
		if !f.logged(`"level":"ERROR"`, "job record gone", id) {
			t.Errorf("the lost job %s was hidden by the listing: not reported", id)
		}
	}
	if v := testutil.ToFloat64(f.metrics.Rejected.WithLabelValues(q, metrics.ReasonUnknownJob)); v != 2 {
		t.Errorf("rejected{unknown_job} = %v, want 2", v)
	}
}
