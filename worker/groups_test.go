package worker_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
	"github.com/fencedq/fencedq/worker"
)

// groupArgs is a job of fair group G; N numbers it. FailOnce makes its
// first attempt fail (a retry), Unknown its first attempt's outcome unknown
// (uncertain, then reconciled as not applied and run again).
type groupArgs struct {
	G        string `json:"g"`
	N        int    `json:"n"`
	FailOnce bool   `json:"fail_once,omitempty"`
	Unknown  bool   `json:"unknown,omitempty"`
}

func (groupArgs) Kind() string { return "grouped" }

func (a groupArgs) Group() string { return a.G }

// groupWorker records the order of starts, per group.
type groupWorker struct {
	mu     sync.Mutex
	starts []groupArgs
	// onStart, when set, is called with the starts so far after each one.
	onStart func([]groupArgs)
}

func (w *groupWorker) Work(_ context.Context, j *jobs.Job[groupArgs]) error {
	w.mu.Lock()
	w.starts = append(w.starts, j.Args)
	if w.onStart != nil {
		w.onStart(w.starts)
	}
	w.mu.Unlock()
	switch {
	case j.Args.FailOnce && j.Attempt == 1:
		return errors.New("first attempt fails")
	case j.Args.Unknown && j.Attempt == 1:
		return jobs.Unknown(errors.New("timed out after sending"))
	}
	return nil
}

func (w *groupWorker) Reconcile(context.Context, *jobs.Job[groupArgs]) (jobs.Verdict, error) {
	return jobs.NotApplied, nil
}

// TestGroupFairness: group A has 20 000 pending jobs when group B's 10 are
// enqueued behind them; B's jobs all start while almost all of A's are still
// pending: at most 100 of A's start before B's last (one per claim batch
// from the due index, plus equal shares of a batch's room, plus what runs in
// the pool's slots).
func TestGroupFairness(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const nA, nB, bound = 20_000, 10, 100
	enqueueBacklog(t, e.client, "a", nA)
	var bIDs []string
	for i := range nB {
		bIDs = append(bIDs, e.enqueue(groupArgs{G: "b", N: i}).JobID)
	}
	in := e.client.Inspector()
	gs, err := in.Groups(ctx, jobs.DefaultQueue)
	if err != nil {
		t.Fatal(err)
	}
	if len(gs) != 2 || gs[0].Name != "a" || gs[0].Pending != nA || gs[1].Name != "b" || gs[1].Pending != nB {
		t.Fatalf("groups %+v, want a with %d pending, b with %d", gs, nA, nB)
	}
	if cs, err := e.ledger.CountsOf(ctx, []string{jobs.DefaultQueue}); err != nil || cs[0].Groups != 2 || cs[0].Jobs[jobs.Pending] != nA+nB {
		t.Fatalf("counts %+v, %v; want 2 groups (the fencedq_groups gauge), %d pending", cs, err, nA+nB)
	}
	counts, err := in.Counts(ctx, jobs.DefaultQueue)
	if err != nil {
		t.Fatal(err)
	}
	if counts[jobs.Pending] != nA+nB {
		t.Fatalf("pending count %d, want %d", counts[jobs.Pending], nA+nB)
	}
	// Each of b's jobs says how many of its group are ahead of it: 0 to 9,
	// each once (jobs enqueued in the same millisecond are in id order).
	ahead := map[string]bool{}
	for _, id := range bIDs {
		rec, err := in.Get(ctx, jobs.DefaultQueue, id)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Group != "b" {
			t.Fatalf("job %s: group %q, want b", id, rec.Group)
		}
		ahead[strings.TrimSuffix(rec.WaitingFor, " (next of its group)")] = true
	}
	for n := range nB {
		if want := fmt.Sprintf("group b, %d ahead", n); !ahead[want] {
			t.Fatalf("no job of b says %q: %v", want, ahead)
		}
	}

	aBeforeLastB := make(chan int, 1)
	w := &groupWorker{onStart: func(starts []groupArgs) {
		a, b := 0, 0
		for _, s := range starts {
			if s.G == "a" {
				a++
			} else {
				b++
			}
		}
		if b == nB && starts[len(starts)-1].G == "b" {
			aBeforeLastB <- a
		}
	}}
	cfg := e.config()
	cfg.Concurrency = 16
	p := e.pool(cfg)
	if err := worker.Register(p, jobs.Worker[groupArgs](w)); err != nil {
		t.Fatal(err)
	}
	stop := e.start(p)
	var a int
	select {
	case a = <-aBeforeLastB:
	case <-time.After(60 * time.Second):
		t.Fatal("group b's jobs did not all start within 60s")
	}
	stop()
	t.Logf("%d of group a's %d jobs started before group b's last (of %d)", a, nA, nB)
	if a > bound {
		t.Fatalf("%d of group a's jobs started before group b's last, bound %d", a, bound)
	}
	for _, id := range bIDs {
		jobstest.WaitState(t, e.ledger, jobs.DefaultQueue, id, jobs.Succeeded)
	}
	counts, err = in.Counts(ctx, jobs.DefaultQueue)
	if err != nil {
		t.Fatal(err)
	}
	if counts[jobs.Pending] < nA-2*bound {
		t.Fatalf("%d of group a's jobs pending after b's drained, want most of %d", counts[jobs.Pending], nA)
	}
}

// TestGroupedJobsLikeUngrouped: grouped jobs retry, wait for their due time,
// are cancelled, made due by an operator, become uncertain and are
// reconciled and run again, each as an ungrouped job would, while the
// queue was paused and resumed; afterwards the group leaves nothing behind.
func TestGroupedJobsLikeUngrouped(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	q := jobs.DefaultQueue
	if _, err := e.client.Pause(ctx, q, "test", ""); err != nil {
		t.Fatal(err)
	}
	retried := e.enqueue(groupArgs{G: "g", N: 1, FailOnce: true})
	uncertain := e.enqueue(groupArgs{G: "g", N: 2, Unknown: true})
	cancelled := e.enqueue(groupArgs{G: "g", N: 3})
	later := e.enqueue(groupArgs{G: "g", N: 4}, jobs.Delay(time.Hour))
	soon := e.enqueue(groupArgs{G: "g", N: 5}, jobs.Delay(300*time.Millisecond))
	plain := e.enqueue(groupArgs{N: 6}) // no group
	other := e.enqueue(groupArgs{G: "h", N: 7})
	in := e.client.Inspector()
	rec, err := in.Get(ctx, q, cancelled.JobID)
	if err != nil {
		t.Fatal(err)
	}
	// behind the head and, when enqueued in a later millisecond or with a
	// higher id, the job before it
	if rec.WaitingFor != "group g, 2 ahead" && rec.WaitingFor != "group g, 1 ahead" {
		t.Fatalf("waiting for %q, want %q or %q", rec.WaitingFor, "group g, 2 ahead", "group g, 1 ahead")
	}
	if _, err := e.client.Cancel(ctx, q, cancelled.JobID, "test", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.RunNow(ctx, q, later.JobID, "test", ""); err != nil {
		t.Fatal(err)
	}
	counts, err := in.Counts(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if counts[jobs.Pending] != 6 || counts[jobs.Cancelled] != 1 {
		t.Fatalf("counts %v, want 6 pending, 1 cancelled", counts)
	}
	w := &groupWorker{}
	p := e.pool(e.config())
	if err := worker.Register(p, jobs.Worker[groupArgs](w)); err != nil {
		t.Fatal(err)
	}
	e.start(p)
	if _, err := e.client.Resume(ctx, q, "test", ""); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{retried.JobID: 2, uncertain.JobID: 2, later.JobID: 1, soon.JobID: 1, plain.JobID: 1, other.JobID: 1}
	for id, attempts := range want {
		rec := jobstest.WaitState(t, e.ledger, q, id, jobs.Succeeded)
		if rec.Attempts != attempts {
			t.Errorf("job %s: %d attempts, want %d", id, rec.Attempts, attempts)
		}
	}
	jobstest.WaitState(t, e.ledger, q, cancelled.JobID, jobs.Cancelled)
	rec, err = in.Get(ctx, q, soon.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if d := rec.Started.Sub(rec.Created); d < 300*time.Millisecond-time.Millisecond {
		t.Errorf("a job delayed 300ms started %v after its enqueue", d)
	}
	gs, err := in.Groups(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	counts, err = in.Counts(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if len(gs) != 0 || counts[jobs.Pending] != 0 {
		t.Fatalf("after the drain: groups %+v, %d pending", gs, counts[jobs.Pending])
	}
	if cs, err := e.ledger.CountsOf(ctx, []string{q}); err != nil || cs[0].Groups != 0 {
		t.Fatalf("counts after the drain %+v, %v; want 0 groups", cs, err)
	}
	// An idle group keeps no key: only the groups hash is left, with the
	// parked-jobs counter at 0 and the field that keeps it a hash table.
	keys, err := e.rdb.Keys(ctx, e.ns+":{"+q+"}:group*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) > 1 {
		t.Fatalf("keys left by idle groups: %v", keys)
	}
	if n, _ := e.rdb.HLen(ctx, e.ns+":{"+q+"}:groups").Result(); n > 2 {
		t.Fatalf("groups hash has %d fields after the drain", n)
	}
}

// TestGroupValidation: a bad group name is refused before anything is
// written, alone or in a batch.
func TestGroupValidation(t *testing.T) {
	rdb, ns := redistest.New(t)
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	ctx := context.Background()
	long := string(make([]byte, jobs.MaxGroupLen+1))
	for _, g := range []string{"has space", "ünicode", long, "a/b"} {
		if _, err := c.Enqueue(ctx, groupArgs{G: g}); !errors.Is(err, jobs.ErrInvalid) {
			t.Errorf("group %q: %v, want ErrInvalid", g, err)
		}
		if _, err := c.Enqueue(ctx, groupArgs{}, jobs.Group(g)); !errors.Is(err, jobs.ErrInvalid) {
			t.Errorf("option group %q: %v, want ErrInvalid", g, err)
		}
	}
	_, err := c.EnqueueMany(ctx, []jobs.Params{{Args: groupArgs{G: "ok"}}, {Args: groupArgs{G: "not ok"}}})
	if !errors.Is(err, jobs.ErrInvalid) {
		t.Fatalf("batch with a bad group: %v, want ErrInvalid", err)
	}
	if keys, err := rdb.Keys(ctx, ns+":*").Result(); err != nil || len(keys) != 0 {
		t.Fatalf("keys after refused enqueues: %v, %v", keys, err)
	}
	// An option overrides the args' group, and "" removes it.
	r, err := c.Enqueue(ctx, groupArgs{G: "x"}, jobs.Group(""))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := c.Inspector().Get(ctx, jobs.DefaultQueue, r.JobID)
	if err != nil || rec.Group != "" {
		t.Fatalf("group %q, %v; want none", rec.Group, err)
	}
}

// TestGroupsInPartitions: on a partitioned queue a group's jobs go to one
// partition (the group is their partition key unless one is given), where
// they rotate with the partition's other groups; a middleware can set the
// group.
func TestGroupsInPartitions(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const q, per = "parts", 30
	if _, err := e.client.SetPartitions(ctx, q, 4, "test", ""); err != nil {
		t.Fatal(err)
	}
	tenant := jobs.EnqueueMiddleware(func(next jobs.EnqueueFunc) jobs.EnqueueFunc {
		return func(ctx context.Context, reqs []*jobs.EnqueueRequest) ([]*jobs.Result, error) {
			for _, r := range reqs {
				if r.Group == "" {
					r.Group = "from-middleware"
				}
			}
			return next(ctx, reqs)
		}
	})
	mc := jobs.NewClient(e.rdb, jobs.Config{Namespace: e.ns, EnqueueMiddleware: []jobs.EnqueueMiddleware{tenant}})
	var rs []*jobs.Result
	for i := range per {
		for _, g := range []string{"acme", "zeta", ""} {
			r, err := mc.Enqueue(ctx, groupArgs{G: g, N: i}, jobs.Queue(q))
			if err != nil {
				t.Fatal(err)
			}
			rs = append(rs, r)
		}
	}
	gs, err := e.client.Inspector().Groups(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if len(gs) != 3 {
		t.Fatalf("groups %+v, want acme, zeta and from-middleware, each in one partition", gs)
	}
	for _, g := range gs {
		if g.Pending != per {
			t.Fatalf("group %s: %d pending in one partition, want %d", g.Name, g.Pending, per)
		}
	}
	cfg := e.config()
	cfg.Queues = map[string]int{q: 1}
	p := e.pool(cfg)
	if err := worker.Register(p, jobs.Worker[groupArgs](&groupWorker{})); err != nil {
		t.Fatal(err)
	}
	e.start(p)
	e.waitAll(rs, jobs.Succeeded)
	if gs, err := e.client.Inspector().Groups(ctx, q); err != nil || len(gs) != 0 {
		t.Fatalf("groups after the drain: %+v, %v", gs, err)
	}
}

// TestGroupedJobExpiresAndLimitPerGroup: a grouped job whose holder died
// (claimed and never completed) expires, is reconciled and runs again, and
// the group's other jobs are not held up meanwhile; jobs limited per group
// (a limit keyed by the group) all run, one at a time per group.
func TestGroupedJobExpiresAndLimitPerGroup(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	q := jobs.DefaultQueue
	lost := e.enqueue(groupArgs{G: "g", N: 0})
	next := e.enqueue(groupArgs{G: "g", N: 1})
	// A worker that claims the group's head and dies.
	c, err := e.ledger.Claim(ctx, q, "dead-worker", 200*time.Millisecond, 1)
	if err != nil || len(c.Jobs) != 1 || c.Jobs[0].ID != lost.JobID {
		t.Fatalf("claim: %+v, %v; want the group's head %s", c, err, lost.JobID)
	}
	var limited []*jobs.Result
	for i := range 6 {
		g := []string{"acme", "zeta"}[i%2]
		limited = append(limited, e.enqueue(groupArgs{G: g, N: 10 + i}, jobs.Limit("export:"+g, 1)))
	}
	p := e.pool(e.config())
	if err := worker.Register(p, jobs.Worker[groupArgs](&groupWorker{})); err != nil {
		t.Fatal(err)
	}
	e.start(p)
	// The group's next job runs while the lost attempt's lease runs out.
	nrec := jobstest.WaitState(t, e.ledger, q, next.JobID, jobs.Succeeded)
	rec := jobstest.WaitState(t, e.ledger, q, lost.JobID, jobs.Succeeded)
	if rec.Attempts != 2 {
		t.Fatalf("expired job: %d attempts, want 2 (the lost one, then a re-run)", rec.Attempts)
	}
	if rec.Started.Before(nrec.Started) {
		t.Fatalf("the group's next job started at %v, after the expired job's re-run at %v", nrec.Started, rec.Started)
	}
	recs := e.waitAll(limited, jobs.Succeeded)
	for _, r := range recs {
		if r.Attempts != 1 {
			t.Errorf("limited job %s: %d attempts, want 1", r.ID, r.Attempts)
		}
	}
	if gs, err := e.client.Inspector().Groups(ctx, q); err != nil || len(gs) != 0 {
		t.Fatalf("groups after the drain: %+v, %v", gs, err)
	}
}

// groupLogWorker writes each start to one Redis list,
// "<group> <n> <proc> <attempt> <token>". The token is minted by the claim
// from Redis's clock, so tokens order the claims across every process;
// the list's order is the order of the starts, which a process the
// machine keeps waiting can log long after its claim.
type groupLogWorker struct {
	rdb  redis.UniversalClient
	ns   string
	proc string
}

func (w *groupLogWorker) Work(ctx context.Context, j *jobs.Job[groupArgs]) error {
	return w.rdb.RPush(ctx, w.ns+":test:grouplog", fmt.Sprintf("%s %d %s %d %d", j.Args.G, j.Args.N, w.proc, j.Attempt, j.Token)).Err()
}

// groupStart is one line of groupLogWorker's log.
type groupStart struct {
	group, proc string
	attempt     int
	token       lease.Token
}

func parseGroupStart(t *testing.T, line string) groupStart {
	t.Helper()
	f := strings.Fields(line)
	if len(f) != 5 {
		t.Fatalf("log line %q", line)
	}
	attempt, err := strconv.Atoi(f[3])
	if err != nil {
		t.Fatalf("log line %q: %v", line, err)
	}
	tok, err := lease.ParseToken(f[4])
	if err != nil {
		t.Fatalf("log line %q: %v", line, err)
	}
	return groupStart{group: f[0], proc: f[2], attempt: attempt, token: tok}
}

// TestGroupFairnessAcrossProcesses: three pools in separate processes (2
// slots each) drain group A's 20 000 jobs; once each has started some, group
// B's 10 jobs are enqueued behind A's backlog. README's "The bound" is on
// claims: each of B's jobs waits for about one of A's (the rotation: a
// claim of two slots takes both heads) plus the claims made in the same
// millisecond, whose heads tie and sort by job id (A's first): with 6
// slots, at most about 6 claims of one slot in a millisecond, so from B's
// first claim to its last, 9 × (1 + 6) = 63 of A's first attempts; bound
// 100. A load makes fewer claims in a millisecond, never more, so the bound
// holds on a busy machine; what a load changes is the order of the starts
// (a process kept waiting starts a job it claimed after other processes
// started many), so the claims are ordered by their tokens, not by the log.
// Retries of A's jobs whose leases lapsed under load are due outside the
// rotation (README) and are not counted.
func TestGroupFairnessAcrossProcesses(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const nA, nB, bound = 20_000, 10, 100
	enqueueBacklog(t, e.client, "a", nA)
	addr := e.rdb.(*redis.Client).Options().Addr
	for i := range 3 {
		startHelper(t, fmt.Sprintf("group-%d", i), addr, e.ns)
	}
	logKey := e.ns + ":test:grouplog"
	var lines []string
	// read appends the log's new lines until done says stop.
	read := func(what string, done func() bool) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for !done() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 60s (%d starts logged)", what, len(lines))
			}
			more, err := e.rdb.LRange(ctx, logKey, int64(len(lines)), -1).Result()
			if err != nil {
				t.Fatal(err)
			}
			if len(more) == 0 {
				time.Sleep(5 * time.Millisecond) // the handlers' next starts
			}
			lines = append(lines, more...)
		}
	}
	procs := func(from int) map[string]int {
		n := map[string]int{}
		for _, l := range lines[from:] {
			n[strings.Fields(l)[2]]++
		}
		return n
	}
	read("a start in each helper", func() bool { return len(procs(0)) == 3 })
	from := len(lines)
	for i := range nB {
		e.enqueue(groupArgs{G: "b", N: i})
	}
	bs, a := 0, 0
	read("group b's starts", func() bool {
		for bs < nB && from+bs+a < len(lines) {
			if strings.HasPrefix(lines[from+bs+a], "b ") {
				bs++
			} else {
				a++
			}
		}
		return bs == nB
	})
	var first, last lease.Token
	for _, l := range lines[from:] {
		if s := parseGroupStart(t, l); s.group == "b" {
			if first == 0 || s.token < first {
				first = s.token
			}
			last = max(last, s.token)
		}
	}
	// A job of A claimed before B's last may start after it: read on until
	// each process has started two jobs claimed after B's last (its two
	// slots have moved past it).
	read("two starts claimed after b's last in each helper", func() bool {
		after := map[string]int{}
		for _, l := range lines[from:] {
			if s := parseGroupStart(t, l); s.token > last {
				after[s.proc]++
			}
		}
		return len(after) == 3 && after["group-0"] >= 2 && after["group-1"] >= 2 && after["group-2"] >= 2
	})
	claimed := 0
	for _, l := range lines {
		if s := parseGroupStart(t, l); s.group == "a" && s.attempt == 1 && s.token > first && s.token < last {
			claimed++
		}
	}
	t.Logf("%d of group a's jobs claimed between b's first and last claims (%d started from b's enqueue to b's last start); starts per process since: %v",
		claimed, a, procs(from))
	if claimed > bound {
		t.Fatalf("%d of group a's jobs claimed between group b's first and last claims, bound %d", claimed, bound)
	}
}

// enqueueBacklog enqueues group g's n jobs in calls of 1 000: one call of
// all n runs one long script, whose reply (and the next write) a loaded
// machine can keep past the client's 3 s timeouts.
func enqueueBacklog(t *testing.T, c *jobs.Client, g string, n int) {
	t.Helper()
	ps := make([]jobs.Params, 0, 1000)
	for i := range n {
		ps = append(ps, jobs.Params{Args: groupArgs{G: g, N: i}})
		if len(ps) == cap(ps) || i == n-1 {
			if _, err := c.EnqueueMany(context.Background(), ps); err != nil {
				t.Fatal(err)
			}
			ps = ps[:0]
		}
	}
}
