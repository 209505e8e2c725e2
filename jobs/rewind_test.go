package jobs_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/testsignal"
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

// holdResubmit holds every re-submission (an enqueue call in resubmit
// mode) until release is closed, after telling held.
type holdResubmit struct {
	held, release chan struct{}
}

func isResubmit(cmd redis.Cmder) bool {
	return slices.ContainsFunc(cmd.Args(), func(a any) bool { s, _ := a.(string); return s == "resubmit" })
}

func (h *holdResubmit) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *holdResubmit) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if isResubmit(cmd) {
			h.wait()
		}
		return next(ctx, cmd)
	}
}

func (h *holdResubmit) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if slices.ContainsFunc(cmds, isResubmit) {
			h.wait()
		}
		return next(ctx, cmds)
	}
}

func (h *holdResubmit) wait() {
	select {
	case h.held <- struct{}{}:
	default:
	}
	<-h.release
}

// With ResubmitOnRewind, a rewind detected while the background
// re-submission of an earlier one runs is re-submitted once that one is
// done: the jobs either rewind lost come back.
func TestRewindDuringABackgroundResubmitIsResubmittedToo(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Options{})
	rdb := srv.Client()
	hold := &holdResubmit{held: make(chan struct{}, 1), release: make(chan struct{})}
	rdb.AddHook(hold)
	client := jobs.NewClient(rdb, jobs.Config{Namespace: redistest.Namespace(t), ResubmitOnRewind: true})
	enqueue := func(n int) *jobs.Result {
		t.Helper()
		res, err := client.Enqueue(ctx, countArgs{N: n})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	all := []*jobs.Result{enqueue(0)}
	if err := rdb.Save(ctx).Err(); err != nil { // the snapshot both restarts load
		t.Fatal(err)
	}
	all = append(all, enqueue(1))
	srv.Restart()
	all = append(all, enqueue(2)) // finds the first rewind: a background re-submission starts
	select {
	case <-hold.held:
	case <-time.After(testsignal.Timeout()):
		t.Fatal("no background re-submission after the first rewind")
	}
	all = append(all, enqueue(3))
	srv.Restart()
	all = append(all, enqueue(4)) // finds the second rewind while the first re-submission runs
	close(hold.release)

	insp := client.Inspector()
	deadline := time.Now().Add(testsignal.Timeout())
	for {
		var missing []int
		for i, r := range all {
			if _, err := insp.Get(ctx, r.Queue, r.JobID); err != nil {
				missing = append(missing, i)
			}
		}
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("jobs %v lost for good after two rewinds with ResubmitOnRewind", missing)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A re-submitted job is due when it was due, whatever its queue (a
// partition of a partitioned queue) and schedule (at once, Delay, RunAt),
// sent in one EnqueueMany.
func TestResubmittedJobsAreDueWhenTheyWereDue(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Options{})
	rdb := srv.Client()
	client := jobs.NewClient(rdb, jobs.Config{Namespace: redistest.Namespace(t)})
	if _, err := client.SetPartitions(ctx, "orders", 3, "test", ""); err != nil {
		t.Fatal(err)
	}
	var ps []jobs.Params
	for i := range 6 {
		ps = append(ps, jobs.Params{Args: partArgs{Account: fmt.Sprint(i)}, Options: []jobs.Option{jobs.Queue("orders")}})
	}
	ps = append(ps, jobs.Params{Args: countArgs{N: 1}, Options: []jobs.Option{jobs.Delay(time.Hour)}},
		jobs.Params{Args: countArgs{N: 2}, Options: []jobs.Option{jobs.OperationID("op-2"), jobs.Queue("other")}},
		jobs.Params{Args: countArgs{N: 3}, Options: []jobs.Option{jobs.RunAt(time.Now().Add(30 * time.Minute))}})
	res, err := client.EnqueueMany(ctx, ps)
	if err != nil {
		t.Fatal(err)
	}
	insp := client.Inspector()
	due := map[string]time.Time{}
	for _, r := range res {
		rec, err := insp.Get(ctx, r.Partition, r.JobID)
		if err != nil {
			t.Fatal(err)
		}
		due[r.JobID] = rec.RunAt
	}
	srv.Restart() // every job is lost
	time.Sleep(time.Second)
	if _, err := client.Resubmit(ctx); err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		rec, err := insp.Get(ctx, r.Partition, r.JobID)
		if err != nil {
			t.Fatalf("job %s of %s not restored: %v", r.JobID, r.Partition, err)
		}
		if d := rec.RunAt.Sub(due[r.JobID]); d > 200*time.Millisecond || d < -200*time.Millisecond {
			t.Errorf("restored job %s of %s due %v, was due %v", r.JobID, r.Partition, rec.RunAt, due[r.JobID])
		}
	}
}

// EnqueueRaw keeps its own copy of the args: a caller that reuses its
// buffer once the call returned does not change the job a re-submission
// restores.
func TestResubmitRestoresRawArgsAsEnqueued(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Options{})
	client := jobs.NewClient(srv.Client(), jobs.Config{Namespace: redistest.Namespace(t)})
	buf := []byte(`{"n":1}`)
	res, err := client.EnqueueRaw(ctx, "count", buf, jobs.Unchecked())
	if err != nil {
		t.Fatal(err)
	}
	copy(buf, `{"n":7}`) // the caller's next message
	srv.Restart()
	if _, err := client.Resubmit(ctx); err != nil {
		t.Fatal(err)
	}
	rec, err := client.Inspector().Get(ctx, res.Queue, res.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if string(rec.Payload) != `{"n":1}` || string(rec.Args) != `{"n":1}` {
		t.Fatalf("restored job's args %s (payload %s), want the enqueued {\"n\":1}", rec.Args, rec.Payload)
	}
}

// A Redis that lost a queue's whole record (restarted without persistence,
// or flushed) starts its write sequence again; other clients' enqueues
// since can take it past what a client saw before the loss. That client's
// next enqueue still finds the loss (the sequence's history changed),
// counts it, and re-submits the job it lost.
func TestLostRecordFoundDespiteLaterWrites(t *testing.T) {
	for _, tc := range []struct {
		name string
		lose func(*redistest.Server, *redis.Client)
	}{
		{"restart without persistence", func(srv *redistest.Server, _ *redis.Client) { srv.Restart() }},
		{"flushed database", func(_ *redistest.Server, rdb *redis.Client) {
			if err := rdb.FlushDB(context.Background()).Err(); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			srv := redistest.Start(t, redistest.Options{})
			rdb := srv.Client()
			ns := redistest.Namespace(t)
			reg := prometheus.NewRegistry()
			a := jobs.NewClient(rdb, jobs.Config{Namespace: ns, Registerer: reg})
			b := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
			lost, err := a.Enqueue(ctx, countArgs{N: 1})
			if err != nil {
				t.Fatal(err)
			}
			tc.lose(srv, rdb)
			for n := range 3 { // more writes than a saw
				if _, err := b.Enqueue(ctx, countArgs{N: 10 + n}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := a.Enqueue(ctx, countArgs{N: 2}); err != nil {
				t.Fatal(err)
			}
			if v := sum(t, reg, "fencedq_ledger_rewinds_total"); v != 1 {
				t.Fatalf("fencedq_ledger_rewinds_total = %v, want 1", v)
			}
			rs, err := a.Inspector().Rewinds(ctx)
			if err != nil || len(rs) != 1 || rs[0].Found != 0 || rs[0].LostRecorded != 1 {
				t.Fatalf("recorded rewinds: %+v, %v; want one, found at write 0, 1 recorded enqueue lost", rs, err)
			}
			if _, err := a.Resubmit(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := a.Inspector().Get(ctx, lost.Queue, lost.JobID); err != nil {
				t.Fatalf("the lost job was not re-submitted: %v", err)
			}
			if st, err := a.Inspector().Stats(ctx, lost.Queue); err != nil || st["hist"] != 0 {
				t.Fatalf("stats %v, %v: the sequence's history is no counter", st, err)
			}
		})
	}
}
