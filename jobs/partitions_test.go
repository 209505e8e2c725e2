package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

type partArgs struct {
	Account string `json:"account"`
}

func (partArgs) Kind() string { return "part" }

// PartitionKey keeps an account's jobs in one partition.
func (a partArgs) PartitionKey() string { return a.Account }

// TestPartitionedQueueOnACluster declares a queue with three partitions on
// a three-master cluster and checks routing (partition key, operation id,
// spread), deduplication across partitions, EnqueueMany, the reads that
// show the queue as one with its per-partition breakdown, and the
// operator actions that find a job's partition.
func TestPartitionedQueueOnACluster(t *testing.T) {
	cl := redistest.StartCluster(t)
	rdb := cl.Client()
	ns := redistest.Namespace(t)
	ctx := context.Background()
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	insp := c.Inspector()

	for _, bad := range []struct {
		q string
		p int
	}{{"orders", 0}, {"orders", jobs.MaxPartitions + 1}, {"orders#1", 3}, {"", 3}, {"a b", 2}} {
		if _, err := c.SetPartitions(ctx, bad.q, bad.p, "test", ""); !errors.Is(err, jobs.ErrInvalid) {
			t.Fatalf("SetPartitions(%q, %d) = %v, want ErrInvalid", bad.q, bad.p, err)
		}
	}
	if qs, _ := insp.Queues(ctx); len(qs) != 0 {
		t.Fatalf("a refused declaration wrote queues %v", qs)
	}
	if prev, err := c.SetPartitions(ctx, "orders", 3, "test", ""); err != nil || prev != 1 {
		t.Fatalf("SetPartitions = %d, %v", prev, err)
	}
	names := ledger.PartitionNames("orders", 3)
	// The change and its record are one script call: the record shares the
	// registry's slot (a cross-slot script would fail on a cluster).
	if chs, err := insp.PartitionChanges(ctx, "orders"); err != nil || len(chs) != 1 || chs[0].To != 3 || chs[0].Actor != "operator:test" {
		t.Fatalf("PartitionChanges on a cluster = %+v, %v", chs, err)
	}
	l := ledger.New(rdb, ledger.Config{Namespace: ns})
	if _, err := l.RegisterSchedule(ctx, 1, jobs.ScheduleSpec{ID: "s", Schedule: "@every 1h0m0s", Kind: "part", Queue: "orders"}); err != nil {
		t.Fatal(err)
	}
	if ok, err := c.RemoveSchedule(ctx, "s", "test", "on a cluster"); !ok || err != nil {
		t.Fatalf("RemoveSchedule on a cluster = %v, %v", ok, err)
	}
	if rs, err := insp.ScheduleRemovals(ctx); err != nil || len(rs) != 1 || rs[0].Note != "on a cluster" {
		t.Fatalf("ScheduleRemovals on a cluster = %+v, %v", rs, err)
	}

	// The partitions live on three masters.
	lay, err := insp.Partitions(ctx, "orders")
	if err != nil || lay.Count != 3 || len(lay.Partitions) != 3 {
		t.Fatalf("Partitions = %+v, %v", lay, err)
	}
	masters := map[string]bool{}
	for k, p := range lay.Partitions {
		if p.Index != k || p.Name != names[k] || p.Master == "" {
			t.Fatalf("partition %d: %+v", k, p)
		}
		masters[p.Master] = true
	}
	if len(masters) != 3 {
		t.Fatalf("3 partitions on %d masters: %+v", len(masters), lay.Partitions)
	}

	// A partition key (here from the args) keeps an account's jobs together.
	var first *jobs.Result
	for i := range 5 {
		res, err := c.Enqueue(ctx, partArgs{Account: "acct-7"}, jobs.Queue("orders"))
		if err != nil {
			t.Fatal(err)
		}
		if res.Queue != "orders" || ledger.Logical(res.Partition) != "orders" || !ledger.IsPartition(res.Partition) {
			t.Fatalf("result %+v", res)
		}
		if i == 0 {
			first = res
		} else if res.Partition != first.Partition {
			t.Fatalf("one key in two partitions: %s, %s", first.Partition, res.Partition)
		}
	}
	// The option wins over the args' key.
	a, _ := c.Enqueue(ctx, partArgs{Account: "x"}, jobs.Queue("orders"), jobs.PartitionKey("k1"))
	b, _ := c.Enqueue(ctx, partArgs{Account: "y"}, jobs.Queue("orders"), jobs.PartitionKey("k1"))
	if a.Partition != b.Partition {
		t.Fatalf("one partition key in two partitions: %s, %s", a.Partition, b.Partition)
	}

	// An operation id deduplicates across the partitions.
	var opFirst *jobs.Result
	for i := range 4 {
		res, err := c.EnqueueRaw(ctx, "raw", []byte(`{}`), jobs.Queue("orders"), jobs.OperationID("op-42"), jobs.Unchecked())
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			opFirst = res
			continue
		}
		if !res.Deduplicated || res.JobID != opFirst.JobID {
			t.Fatalf("enqueue %d of op-42: %+v (first %+v)", i, res, opFirst)
		}
	}

	// A unique job without a partition key or operation id goes to the
	// partition its unique key picks: duplicates meet it, in any partition
	// layout, one after another or in one batch.
	uniq := []jobs.Option{jobs.Queue("orders"), jobs.Unchecked(), jobs.Unique(jobs.UniqueOpts{ByArgs: true})}
	u1, err := c.EnqueueRaw(ctx, "raw", []byte(`{"sku":"u-1"}`), uniq...)
	if err != nil || u1.Deduplicated {
		t.Fatalf("first unique enqueue: %+v, %v", u1, err)
	}
	for i := range 6 {
		res, err := c.EnqueueRaw(ctx, "raw", []byte(`{"sku":"u-1"}`), uniq...)
		if err != nil || !res.Deduplicated || res.JobID != u1.JobID || res.Partition != u1.Partition {
			t.Fatalf("unique duplicate %d: %+v, %v (first %+v)", i, res, err, u1)
		}
	}

	// Without a key or an operation id, EnqueueMany spreads the jobs over
	// every partition and keeps the results in order.
	ps := make([]jobs.Params, 30)
	for i := range ps {
		ps[i] = jobs.Params{Args: noteArgs{}, Options: []jobs.Option{jobs.Queue("orders")}}
	}
	ps = append(ps, jobs.Params{Args: noteArgs{}, Options: []jobs.Option{jobs.Queue("plain")}})
	many, err := c.EnqueueMany(ctx, ps)
	if err != nil {
		t.Fatal(err)
	}
	per := map[string]int{}
	for i, r := range many[:30] {
		rec, err := insp.Get(ctx, "orders", r.JobID)
		if err != nil || rec.Queue != r.Partition {
			t.Fatalf("job %d: %+v in %s, %v", i, rec, r.Partition, err)
		}
		per[r.Partition]++
	}
	if len(per) != 3 || per[names[0]] != 10 || per[names[1]] != 10 || per[names[2]] != 10 {
		t.Fatalf("spread %v", per)
	}
	if r := many[30]; r.Queue != "plain" || r.Partition != "plain" {
		t.Fatalf("a plain queue's job: %+v", r)
	}

	// The queue reads as one.
	qs, _ := insp.Queues(ctx)
	if fmt.Sprint(qs) != "[orders plain]" {
		t.Fatalf("queues %v", qs)
	}
	counts, err := insp.Counts(ctx, "orders")
	if err != nil || counts[jobs.Pending] != 5+2+1+1+30 {
		t.Fatalf("counts %v, %v", counts, err)
	}
	st, _ := insp.Stats(ctx, "orders")
	if st["enqueued"] != 39 || st["deduplicated_enqueue"] != 3 || st["deduplicated_unique"] != 6 {
		t.Fatalf("stats %v", st)
	}
	list, err := insp.List(ctx, jobs.ListParams{State: jobs.Pending, Queue: "orders", Limit: 100})
	if err != nil || list.Total != 39 || len(list.Jobs) != 39 {
		t.Fatalf("list: %d of %d, %v", len(list.Jobs), list.Total, err)
	}
	one, _ := insp.Counts(ctx, first.Partition)
	if one[jobs.Pending] < 5 || one[jobs.Pending] >= 39 {
		t.Fatalf("one partition's counts %v", one)
	}

	// Pause reaches every partition; operator actions find the job's.
	if changed, err := c.Pause(ctx, "orders", "ops", "maintenance"); err != nil || !changed {
		t.Fatalf("pause: %v, %v", changed, err)
	}
	lay, _ = insp.Partitions(ctx, "orders")
	for _, p := range lay.Partitions {
		if p.Paused == nil {
			t.Fatalf("partition %s not paused", p.Name)
		}
	}
	if p, _ := insp.Paused(ctx, "orders"); p == nil || p.Actor != "operator:ops" {
		t.Fatalf("paused %+v", p)
	}
	rec, err := c.Cancel(ctx, "orders", first.JobID, "ops", "")
	if err != nil || rec.State != jobs.Cancelled || rec.Queue != first.Partition {
		t.Fatalf("cancel: %+v, %v", rec, err)
	}
	if _, err := c.Cancel(ctx, "orders", "no-such-job", "ops", ""); !errors.Is(err, jobs.ErrNotFound) {
		t.Fatalf("cancel of an unknown job: %v", err)
	}
	if changed, err := c.Resume(ctx, "orders", "ops", ""); err != nil || !changed {
		t.Fatalf("resume: %v, %v", changed, err)
	}
	if p, _ := insp.Paused(ctx, "orders"); p != nil {
		t.Fatalf("still paused: %+v", p)
	}
	if _, err := insp.Partitions(ctx, names[0]); !errors.Is(err, jobs.ErrInvalid) {
		t.Fatalf("Partitions of a partition: %v", err)
	}
}

// TestPartitionedOperationIDsNameOneJobEach: an operation id can be in two
// partitions of a queue (enqueued again after a layout change, or given
// with two partition keys); each job keeps an id of its own, so an
// operator action given the queue's name and a job's id acts on that job,
// while a repeat of an enqueue still finds its job.
func TestPartitionedOperationIDsNameOneJobEach(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	before := enqueued(t, c, syncArgs{Customer: "a"}, jobs.Queue("orders"), jobs.OperationID("x"), jobs.Delay(time.Hour))
	if _, err := c.SetPartitions(ctx, "orders", 3, "test", ""); err != nil {
		t.Fatal(err)
	}
	after := enqueued(t, c, syncArgs{Customer: "b"}, jobs.Queue("orders"), jobs.OperationID("x"), jobs.Delay(time.Hour))
	// Two partition keys (found so that they pick two partitions).
	var keyed []*jobs.Result
	for i := 0; len(keyed) < 2; i++ {
		r := enqueued(t, c, syncArgs{Customer: "c"}, jobs.Queue("orders"), jobs.OperationID("y"), jobs.PartitionKey(fmt.Sprint("k", i)), jobs.Delay(time.Hour))
		if len(keyed) == 0 || r.Partition != keyed[0].Partition {
			keyed = append(keyed, r)
		}
	}
	for _, pair := range [][2]*jobs.Result{{before, after}, {keyed[0], keyed[1]}} {
		a, b := pair[0], pair[1]
		if a.Deduplicated || b.Deduplicated || a.Partition == b.Partition {
			t.Fatalf("want two jobs in two partitions: %+v, %+v", a, b)
		}
		if a.JobID == b.JobID {
			t.Fatalf("jobs in %s and %s share the id %s", a.Partition, b.Partition, a.JobID)
		}
		if _, err := c.Cancel(ctx, "orders", b.JobID, "alice", ""); err != nil {
			t.Fatal(err)
		}
		ra, err := c.Inspector().Get(ctx, a.Partition, a.JobID)
		if err != nil {
			t.Fatal(err)
		}
		rb, err := c.Inspector().Get(ctx, b.Partition, b.JobID)
		if err != nil {
			t.Fatal(err)
		}
		if ra.State != jobs.Pending || rb.State != jobs.Cancelled || rb.OperationID != b.OperationID {
			t.Fatalf("cancelling %s of queue orders: the job in %s is %s, the one in %s %s", b.JobID, a.Partition, ra.State, b.Partition, rb.State)
		}
	}
	// A repeat (the same operation id and key) is still deduplicated.
	again := enqueued(t, c, syncArgs{Customer: "b"}, jobs.Queue("orders"), jobs.OperationID("x"))
	if !again.Deduplicated || again.JobID != after.JobID {
		t.Fatalf("repeat: %+v, want the job %s", again, after.JobID)
	}
	rec, err := c.Inspector().FindByOperation(ctx, "y")
	if err != nil || rec.OperationID != "y" {
		t.Fatalf("FindByOperation: %+v, %v", rec, err)
	}
}

// TestNewPartitionsStartPausedOnlyWhenEveryPartitionIs: changing a queue's
// partitions starts the new ones paused when every partition it had was
// paused (with that pause), and running when only some were; a partition
// that stays in the new layout keeps its own state either way.
func TestNewPartitionsStartPausedOnlyWhenEveryPartitionIs(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	insp := c.Inspector()
	paused := func(name string) *jobs.Pause {
		t.Helper()
		p, err := insp.Paused(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}

	// some paused: the new ones run, the kept ones keep their state
	if _, err := c.SetPartitions(ctx, "some", 2, "test", ""); err != nil {
		t.Fatal(err)
	}
	old := ledger.PartitionNames("some", 2)
	if _, err := c.Pause(ctx, old[0], "ops", "one partition"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetPartitions(ctx, "some", 6, "test", ""); err != nil {
		t.Fatal(err)
	}
	for _, n := range ledger.PartitionNames("some", 6) {
		want := n == old[0]
		if got := paused(n) != nil; got != want {
			t.Errorf("only %s was paused: partition %s paused %v, want %v", old[0], n, got, want)
		}
	}

	// all paused (a plain queue, then partitions): the new ones too, by the
	// same pause
	if _, err := c.Pause(ctx, "all", "ops", "every partition"); err != nil {
		t.Fatal(err)
	}
	want := paused("all")
	if want == nil {
		t.Fatal("the queue is not paused")
	}
	for _, p := range []int{3, 6} {
		if _, err := c.SetPartitions(ctx, "all", p, "test", ""); err != nil {
			t.Fatal(err)
		}
		for _, n := range ledger.PartitionNames("all", p) {
			if got := paused(n); got == nil || got.ID != want.ID || got.Actor != want.Actor {
				t.Errorf("every partition was paused: %s (of %d) has pause %+v, want %+v", n, p, got, want)
			}
		}
	}
}
