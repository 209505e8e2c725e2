package worker_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// TestMetricsAfterRealRunsCarryNoUserData runs jobs full of user data and
// checks the metric values and that every label value comes from a
// bounded set.
func TestMetricsAfterRealRunsCarryNoUserData(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.UnknownKindDefers = -1 // an unknown kind is dead at once
	p := e.pool(cfg)
	hooks := worker.InitHooks(p, t)
	_ = worker.Register(p, jobs.WorkFunc[echoArgs](func(ctx context.Context, j *jobs.Job[echoArgs]) error {
		switch j.Args.N {
		case 1:
			return nil
		case 2:
			return jobs.Permanent(errors.New("USERDATA-error card 4111"))
		default:
			return jobs.Unknown(errors.New("USERDATA-unknown"))
		}
	}))
	e.start(p)
	ok := e.enqueue(echoArgs{N: 1, Secret: "USERDATA-secret"}, jobs.OperationID("USERDATA-op-1"))
	bad := e.enqueue(echoArgs{N: 2}, jobs.OperationID("USERDATA-op-2"))
	unk := e.enqueue(echoArgs{N: 3}, jobs.OperationID("USERDATA-op-3"))
	e.enqueue(echoArgs{N: 1}, jobs.OperationID("USERDATA-op-1")) // duplicate submission
	// A kind no pool registered must not become a label value.
	stray, err := e.client.EnqueueRaw(context.Background(), "USERDATA-kind", []byte(`{}`), jobs.Unchecked())
	if err != nil {
		t.Fatal(err)
	}
	jobstest.WaitState(t, e.ledger, "default", stray.JobID, jobs.Dead)
	jobstest.WaitState(t, e.ledger, "default", ok.JobID, jobs.Succeeded)
	jobstest.WaitState(t, e.ledger, "default", bad.JobID, jobs.Dead)
	jobstest.WaitState(t, e.ledger, "default", unk.JobID, jobs.Review)
	waitReported(hooks, 4) // the stray's, ok's and bad's ends and unk's uncertain

	if v := testutil.ToFloat64(e.metric("fencedq_jobs_attempted_total")); v != 4 {
		t.Errorf("attempted = %v, want 4", v)
	}
	// The review decision is counted after it is written.
	hooks.Decided.WaitFor("the review decision", func(d worker.Decision) bool { return d.JobID == unk.JobID })
	want := map[string]float64{}
	fams, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string]map[string]bool{
		"queue":   {"default": true},
		"kind":    {"echo": true, "unknown": true},
		"outcome": {"succeeded": true, "dead": true, "uncertain": true, "pending": true, "cancelled": true},
		"stage":   {"enqueue": true, "execute": true, "commit": true, "renew": true, "storage": true},
		"reason":  {"invalid": true, "unknown_kind": true, "malformed": true, "unknown_job": true},
		"state":   {"waiting": true, "pending": true, "running": true, "uncertain": true, "review": true, "succeeded": true, "dead": true, "cancelled": true},
		"result":  {"applied": true, "not_applied": true, "cannot_tell": true, "review": true, "refused": true, "not_sent": true, "unknown": true, "unacknowledged": true},
		"service": {"expirer": true, "resolver": true, "pruner": true, "status": true, "periodic": true, "outbox_relay": true, "handover": true},
	}
	for _, f := range fams {
		if !strings.HasPrefix(f.GetName(), "fencedq_") {
			t.Errorf("metric %s lacks the fencedq_ prefix", f.GetName())
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if strings.Contains(l.GetValue(), "USERDATA") || !allowed[l.GetName()][l.GetValue()] {
					t.Errorf("%s{%s=%q}: label value outside its bounded set", f.GetName(), l.GetName(), l.GetValue())
				}
			}
			if f.GetName() == "fencedq_jobs_completed_total" {
				for _, l := range m.GetLabel() {
					if l.GetName() == "outcome" {
						want[l.GetValue()] += m.GetCounter().GetValue()
					}
				}
			}
		}
	}
	if want["succeeded"] != 1 || want["dead"] != 2 || want["uncertain"] != 1 {
		t.Errorf("completed by outcome: %v", want)
	}
	// The status service sets the gauges, then publishes its status.
	redistest.Await(t, e.rdb, e.ns, "the job gauge of state review", func() bool {
		fams, _ := e.reg.Gather()
		for _, f := range fams {
			if f.GetName() != "fencedq_jobs" {
				continue
			}
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "state" && l.GetValue() == "review" && m.GetGauge().GetValue() == 1 {
						return true
					}
				}
			}
		}
		return false
	})
	if _, err := e.client.Enqueue(context.Background(), echoArgs{N: -1, Secret: "USERDATA-invalid"}); !errors.Is(err, jobs.ErrInvalid) {
		t.Fatal(err)
	}
	for name, want := range map[string]float64{
		"fencedq_jobs_enqueued_total":     4,
		"fencedq_jobs_deduplicated_total": 1, // stage enqueue
		"fencedq_jobs_rejected_total":     2, // reasons invalid and unknown_kind
	} {
		if v := testutil.ToFloat64(e.metric(name)); v != want {
			t.Errorf("%s = %v, want %v", name, v, want)
		}
	}
	logs := e.logs.String()
	for _, want := range []string{`"job_id":"` + bad.JobID, `"operation_id":"USERDATA-op-2"`, `"kind":"echo"`, `"queue":"default"`, `"attempt":1`, `"token":"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("job log lines lack %s", want)
		}
	}
	if strings.Contains(logs, "USERDATA-secret") {
		t.Error("a sensitive arg reached the logs")
	}
}

// TestFlowNameLabelsAreBounded defers jobs of 60 rate keys of 60 names
// (names chosen per customer) and checks that the deferrals metric labels
// at most 50 names, counts the rest as "other", and warns once.
func TestFlowNameLabelsAreBounded(t *testing.T) {
	e := newEnv(t)
	p := e.pool(e.config())
	hooks := worker.InitHooks(p, t)
	if err := worker.Register(p, jobs.WorkFunc[limitArgs](func(context.Context, *jobs.Job[limitArgs]) error { return nil })); err != nil {
		t.Fatal(err)
	}
	const keys = 60
	for k := range keys {
		for range 2 { // the second start of the hour is deferred
			e.enqueue(limitArgs{RateKey: fmt.Sprintf("cust-%d:api", k), RateMax: 1, RatePerMS: 3_600_000})
		}
	}
	e.start(p)
	deferred := 0
	hooks.Claimed.WaitFor("every key's second job deferred", func(ev worker.ClaimEvent) bool {
		for _, d := range ev.Result.Dropped {
			if strings.HasPrefix(d.State, "rate:") {
				deferred++
			}
		}
		return deferred == keys
	})
	fams, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	labels, total := map[string]float64{}, 0.0
	for _, f := range fams {
		if f.GetName() != "fencedq_rate_deferrals_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "rate" {
					labels[l.GetValue()] += m.GetCounter().GetValue()
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	if total != keys || len(labels) != 51 || labels["other"] != keys-50 {
		t.Fatalf("deferrals %v over %d label values (want %d over 51, %d as other): %v", total, len(labels), keys, keys-50, labels)
	}
	if n := strings.Count(e.logs.String(), "more distinct limit and rate names than metric labels allow"); n != 1 {
		t.Fatalf("the cap was logged %d times, want once", n)
	}
}

// TestDroppedEntryMetricsLabelTheQueueNotThePartition: the counts of due
// entries a claim drops (a record gone: rejected{reason="unknown_job"}; a
// finished job's stray entry: deduplicated{stage="execute"}) are labelled
// by the queue, as every other pool metric is, never by the partition the
// claim read.
func TestDroppedEntryMetricsLabelTheQueueNotThePartition(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.client.SetPartitions(ctx, jobs.DefaultQueue, 2, "test", ""); err != nil {
		t.Fatal(err)
	}
	p := e.pool(e.config())
	hooks := worker.InitHooks(p, t)
	_ = worker.Register(p, jobs.WorkFunc[plainArgs](func(context.Context, *jobs.Job[plainArgs]) error { return nil }))
	res := e.enqueue(plainArgs{N: 1})
	if res.Partition == jobs.DefaultQueue {
		t.Fatalf("the job went to %s, want a partition", res.Partition)
	}
	e.rdb.ZAdd(ctx, e.ledger.StateKey(res.Partition, jobs.Pending), redis.Z{Score: 1, Member: "gone"})
	e.start(p)
	hooks.Claimed.WaitFor("the missing job's entry dropped", func(ev worker.ClaimEvent) bool { return len(ev.Result.Dropped) > 0 })
	jobstest.WaitState(t, e.ledger, res.Partition, res.JobID, jobs.Succeeded)
	// A stray due entry of the finished job: a duplicate delivery.
	e.rdb.ZAdd(ctx, e.ledger.StateKey(res.Partition, jobs.Pending), redis.Z{Score: 1, Member: res.JobID})
	e.rdb.Publish(ctx, e.ledger.NotifyChannel(res.Partition), "1")
	hooks.Claimed.WaitFor("the finished job's entry dropped", func(ev worker.ClaimEvent) bool {
		for _, d := range ev.Result.Dropped {
			if d.ID == res.JobID {
				return true
			}
		}
		return false
	})
	fams, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "queue" && l.GetValue() != jobs.DefaultQueue {
					t.Errorf("%s{queue=%q}: want the queue %q", f.GetName(), l.GetValue(), jobs.DefaultQueue)
				}
			}
		}
		seen[f.GetName()] = true
	}
	for _, name := range []string{"fencedq_jobs_rejected_total", "fencedq_jobs_deduplicated_total"} {
		if !seen[name] {
			t.Errorf("%s not counted", name)
		}
	}
}

// TestLeaderGaugeSharedByPools: pools sharing a Registerer share the
// leader gauge, so one that stops (or loses the leadership) while another
// leads must not zero it.
func TestLeaderGaugeSharedByPools(t *testing.T) {
	e := newEnv(t)
	leader := e.pool(e.config())
	e.start(leader)
	ctx := context.Background()
	redistest.Await(t, e.rdb, e.ns, "a maintenance leader's status", func() bool {
		st, _ := e.ledger.LeaderStatus(ctx)
		return st != nil && st.Leader == leader.ID()
	})
	other := e.pool(e.config())
	stop := e.start(other)
	time.Sleep(300 * time.Millisecond) // the other pool tries for the leadership, and fails
	stop()
	if st, _ := e.ledger.LeaderStatus(ctx); st == nil || st.Leader != leader.ID() {
		t.Fatalf("leader status %+v, want the first pool leading", st)
	}
	if v := testutil.ToFloat64(e.metric("fencedq_maintenance_leader")); v != 1 {
		t.Fatalf("leader gauge = %v after a pool that never led stopped, want 1 (the other pool leads)", v)
	}
}

// TestUnnamedFlowKeysAreNotLabels: a limit or rate key without a name
// before a ':' ("cust-42", possibly user data as a whole) is never a metric
// label nor logged: the limit waits its claim parks and the deferrals of
// its rate count under "unnamed", and an empty name (":x") does too.
func TestUnnamedFlowKeysAreNotLabels(t *testing.T) {
	e := newEnv(t)
	p := e.pool(e.config())
	hooks := worker.InitHooks(p, t)
	held := make(chan struct{})
	if err := worker.Register(p, jobs.WorkFunc[limitArgs](func(ctx context.Context, j *jobs.Job[limitArgs]) error {
		if j.Args.Key != "" { // the limit's holder keeps its permit until the park
			select {
			case <-held:
			case <-ctx.Done():
			}
		}
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	// scheduled, so neither is parked by its enqueue: a claim parks the
	// second behind the first's permit
	for range 2 {
		e.enqueue(limitArgs{Key: "USERDATA-limit-42", Max: 1}, jobs.Delay(time.Millisecond))
		e.enqueue(limitArgs{RateKey: "USERDATA-rate-42", RateMax: 1, RatePerMS: 3_600_000})
		e.enqueue(limitArgs{RateKey: ":USERDATA-rate-43", RateMax: 1, RatePerMS: 3_600_000})
	}
	e.start(p)
	var parked, deferred int
	hooks.Claimed.WaitFor("a park and two deferrals", func(ev worker.ClaimEvent) bool {
		for _, d := range ev.Result.Dropped {
			switch {
			case strings.HasPrefix(d.State, "limit:"):
				parked++
			case strings.HasPrefix(d.State, "rate:"):
				deferred++
			}
		}
		return parked >= 1 && deferred >= 2
	})
	close(held)
	fams, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != "fencedq_limit_waits_total" && f.GetName() != "fencedq_rate_deferrals_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "limit" || l.GetName() == "rate" {
					got[f.GetName()+"/"+l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	want := map[string]float64{"fencedq_limit_waits_total/unnamed": 1, "fencedq_rate_deferrals_total/unnamed": 2}
	if !maps.Equal(got, want) {
		t.Errorf("flow metrics by label %v, want %v", got, want)
	}
	if strings.Contains(e.logs.String(), "USERDATA") {
		t.Errorf("a flow key reached the pool's logs:\n%s", e.logs.String())
	}
}
