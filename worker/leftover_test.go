package worker_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
	"github.com/fencedq/fencedq/workflow"
)

// mixArgs is a job of the mixed workload: Fail ends it dead, Unknown makes
// its first attempt's outcome unknown (Verdict then decides), FailOnce makes
// its first attempt fail (a retry).
type mixArgs struct {
	N        int          `json:"n"`
	Fail     bool         `json:"fail,omitempty"`
	FailOnce bool         `json:"fail_once,omitempty"`
	Unknown  bool         `json:"unknown,omitempty"`
	Verdict  jobs.Verdict `json:"verdict,omitempty"`
}

func (mixArgs) Kind() string { return "mix" }

type mixWorker struct{}

func (mixWorker) Work(_ context.Context, j *jobs.Job[mixArgs]) error {
	switch {
	case j.Args.Fail:
		return jobs.Permanent(errors.New("bad input"))
	case j.Args.FailOnce && j.Attempt == 1:
		return errors.New("first attempt fails")
	case j.Args.Unknown && j.Attempt == 1:
		return jobs.Unknown(errors.New("timed out after sending"))
	}
	return nil
}

func (mixWorker) Reconcile(_ context.Context, j *jobs.Job[mixArgs]) (jobs.Verdict, error) {
	return j.Args.Verdict, nil
}

// fixedKeys are the keys a namespace keeps after every job, workflow and
// schedule it ran is gone: per queue its counters and write sequence
// (stats), event feed (capped), per-minute series (capped, 24 h) and exact
// minute counts (expire after 25 h), the leader's high-water, the idle flag;
// per namespace the queue registry, the partition registry and its change
// log (capped), the clock and epoch record, the maintenance leader's
// status and lease (kept while held, so its tokens only rise), the
// periodic scheduler's leader high-water and removals log (capped), and the
// live pools while the pool runs.
var fixedKeys = regexp.MustCompile(`^(\{[^}]+\}:(stats|events|series|minute:\d+|reconciler|idle|groups)` +
	`|queues|partitions|partitions:\{[^}]+\}:changes:[^:]+|epoch|reconciler:status|pools|pool:[^:]+` +
	`|lease:\{` + regexp.QuoteMeta(ledger.InternalResourcePrefix) + `[^}]*\}` +
	`|\{periodic\}:(leader|removed))$`)

// TestNothingLeftBehind runs jobs of every shape with a retention of one
// second and waits until the namespace holds only its fixed keys: every
// per-job, per-key, per-group, per-limit, per-workflow and per-schedule key
// is deleted or expires, and every index is trimmed.
func TestNothingLeftBehind(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	cfg := e.config()
	cfg.Jobs.Retention = time.Second
	cfg.Queues = map[string]int{jobs.DefaultQueue: 1, "other": 1, "parts": 1}
	cfg.Maintenance.Interval = 50 * time.Millisecond
	cfg.Maintenance.PruneInterval = 50 * time.Millisecond
	cfg.Maintenance.MaxReconcileTries = 2
	cfg.Maintenance.UncommittedGrace = time.Second
	p := e.pool(cfg)
	if err := worker.Register[mixArgs](p, mixWorker{}); err != nil {
		t.Fatal(err)
	}
	if err := p.AddPeriodic(worker.Periodic(worker.Every(time.Second), mixArgs{N: -1}, worker.ScheduleID("tick"))); err != nil {
		t.Fatal(err)
	}
	c := jobs.NewClient(e.rdb, jobs.Config{Namespace: e.ns, Retention: time.Second})
	if _, err := c.SetPartitions(ctx, "parts", 3, "test", "three"); err != nil {
		t.Fatal(err)
	}
	enq := func(args mixArgs, opts ...jobs.Option) string {
		t.Helper()
		r, err := c.Enqueue(ctx, args, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return r.JobID
	}
	n := 0
	next := func() mixArgs { n++; return mixArgs{N: n} }
	for range 3 {
		enq(next())
	}
	for i := range 3 {
		for range 2 { // the second is deduplicated
			enq(mixArgs{N: 100 + i}, jobs.OperationID(fmt.Sprintf("op-%d", i)))
			enq(mixArgs{N: 200 + i}, jobs.OperationID(fmt.Sprintf("op %d/x", i)))
			enq(mixArgs{N: 300 + i}, jobs.Unique(jobs.UniqueOpts{}))
		}
	}
	for i := range 4 {
		enq(next(), jobs.Limit(fmt.Sprintf("lim-%d", i%2), 1))
		enq(next(), jobs.Rate(fmt.Sprintf("rate-%d", i%2), 1, 200*time.Millisecond))
		enq(next(), jobs.Group(fmt.Sprintf("grp-%d", i%2)))
		enq(next(), jobs.Queue("parts"), jobs.PartitionKey(fmt.Sprint(i)))
		enq(next(), jobs.Queue("parts"), jobs.PartitionKey(fmt.Sprint(i)), jobs.OperationID(fmt.Sprintf("pop-%d", i)))
	}
	enq(mixArgs{N: n + 1, Fail: true})
	enq(mixArgs{N: n + 2, FailOnce: true}, jobs.MaxRetries(3))
	enq(mixArgs{N: n + 3, Unknown: true, Verdict: jobs.NotApplied})
	enq(mixArgs{N: n + 4, Unknown: true, Verdict: jobs.Applied})
	review := enq(mixArgs{N: n + 5, Unknown: true, Verdict: jobs.CannotTell})
	cancelled := enq(mixArgs{N: n + 6}, jobs.Delay(time.Hour), jobs.Limit("lim-c", 1), jobs.Rate("rate-c", 1, time.Hour), jobs.Group("grp-c"))
	plainCancelled := enq(mixArgs{N: n + 7}, jobs.Delay(time.Hour), jobs.Unique(jobs.UniqueOpts{}), jobs.OperationID("c/op"))
	if _, err := c.Enqueue(ctx, mixArgs{}, jobs.Limit(strings.Repeat("k", 10<<10), 1)); !errors.Is(err, jobs.ErrInvalid) {
		t.Fatalf("invalid enqueue: %v", err)
	}
	for _, id := range []string{cancelled, plainCancelled} {
		if _, err := c.Cancel(ctx, jobs.DefaultQueue, id, "test", "not needed"); err != nil {
			t.Fatal(err)
		}
	}
	wf := workflow.New("wf").
		Add("a", mixArgs{N: 900}).
		Add("b", mixArgs{N: 901}, workflow.After("a"), workflow.Options(jobs.Queue("other"))).
		Add("c", mixArgs{N: 902, Fail: true}, workflow.After("b")).
		Add("d", mixArgs{N: 903}, workflow.After("c"))
	if _, err := workflow.Enqueue(ctx, c, wf, workflow.OperationID("wf-1")); err != nil {
		t.Fatal(err)
	}

	stop := e.start(p)
	in := c.Inspector()
	// The review job: resolve it once it is there.
	for {
		r, err := in.Get(ctx, jobs.DefaultQueue, review)
		if err != nil {
			t.Fatal(err)
		}
		if r.State == jobs.Review {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := c.Resolve(ctx, jobs.DefaultQueue, review, jobs.DecideSucceeded, "test", "checked by hand"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // a periodic tick or two
	stop()
	if _, err := c.RemoveSchedule(ctx, "tick", "test", "done"); err != nil {
		t.Fatal(err)
	}
	p = e.pool(cfg) // without the schedule
	if err := worker.Register[mixArgs](p, mixWorker{}); err != nil {
		t.Fatal(err)
	}
	stop = e.start(p)

	deadline := time.Now().Add(60 * time.Second)
	var left []string
	for {
		keys, err := e.rdb.Keys(ctx, e.ns+":*").Result()
		if err != nil {
			t.Fatal(err)
		}
		left = left[:0]
		for _, k := range keys {
			if !fixedKeys.MatchString(strings.TrimPrefix(k, e.ns+":")) {
				left = append(left, strings.TrimPrefix(k, e.ns+":"))
			}
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			sort.Strings(left)
			for _, k := range left {
				dump, _ := e.rdb.Do(ctx, "DUMP", e.ns+":"+k).Text()
				ttl, _ := e.rdb.PTTL(ctx, e.ns+":"+k).Result()
				t.Errorf("left behind: %s (ttl %v): %q", k, ttl, dump)
			}
			t.FailNow()
		}
		time.Sleep(200 * time.Millisecond)
	}
	stop()
}
