package worker_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
	"github.com/fencedq/fencedq/worker"
)

// strandArgs is the kind the shutdown-stranding tests run.
type strandArgs struct{ N int }

func (strandArgs) Kind() string { return "strand" }

// runLog is what the handlers write: every start (job id and token) and
// every effect (a handler that returned nil). A job's effect is applied
// when it is there: the kind's Reconcile reads it.
type runLog struct {
	mu      sync.Mutex
	starts  map[string][]lease.Token
	effects map[string][]lease.Token
	changed chan struct{}
}

func newRunLog() *runLog {
	return &runLog{starts: map[string][]lease.Token{}, effects: map[string][]lease.Token{}, changed: make(chan struct{}, 1)}
}

func (l *runLog) note(m map[string][]lease.Token, id string, tok lease.Token) {
	l.mu.Lock()
	m[id] = append(m[id], tok)
	l.mu.Unlock()
	select {
	case l.changed <- struct{}{}:
	default:
	}
}

func (l *runLog) started(id string, tok lease.Token) { l.note(l.starts, id, tok) }
func (l *runLog) applied(id string, tok lease.Token) { l.note(l.effects, id, tok) }

// count returns how many starts and effects job id has.
func (l *runLog) count(id string) (starts, effects int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.starts[id]), len(l.effects[id])
}

// startedN returns the number of jobs with a start.
func (l *runLog) startedN() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.starts)
}

// waitFor waits until cond holds, each time the log changes.
func (l *runLog) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(testsignal.Timeout())
	for !cond() {
		select {
		case <-l.changed:
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// strandWorker runs strandArgs: it logs the start, then runs body; a nil
// from body is the job's effect, logged. Reconcile answers from the log.
type strandWorker struct {
	log  *runLog
	body func(ctx context.Context, job *jobs.Job[strandArgs]) error
}

func (w strandWorker) Work(ctx context.Context, job *jobs.Job[strandArgs]) error {
	w.log.started(job.ID, job.Token)
	if err := w.body(ctx, job); err != nil {
		return err
	}
	w.log.applied(job.ID, job.Token)
	return nil
}

func (w strandWorker) Reconcile(_ context.Context, job *jobs.Job[strandArgs]) (jobs.Verdict, error) {
	if _, effects := w.log.count(job.ID); effects > 0 {
		return jobs.Applied, nil
	}
	return jobs.NotApplied, nil
}

func quick(context.Context, *jobs.Job[strandArgs]) error { return nil }

// runPool starts p under a cancellable context and returns its cancel
// and Run's result.
func runPool(p *worker.Pool) (cancel context.CancelFunc, done <-chan error) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan error, 1)
	go func() { ch <- p.Run(ctx) }()
	return cancel, ch
}

func waitRun(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(testsignal.Scale(30 * time.Second)):
		t.Fatal("the pool did not stop")
		return nil
	}
}

// awaitAllSucceeded waits until every job of ids succeeded, then checks
// each had exactly one effect.
func awaitAllSucceeded(t *testing.T, e *env, q string, ids []string, l *runLog) {
	t.Helper()
	in := e.client.Inspector()
	redistest.AwaitWithin(t, e.rdb, e.ns, "every job succeeded", 30*time.Second, func() bool {
		for _, id := range ids {
			rec, err := in.Get(context.Background(), q, id)
			if err != nil || rec.State != jobs.Succeeded {
				return false
			}
		}
		return true
	})
	for _, id := range ids {
		if _, effects := l.count(id); effects != 1 {
			l.mu.Lock()
			t.Errorf("job %s: effects %v (starts %v), want exactly one", id, l.effects[id], l.starts[id])
			l.mu.Unlock()
		}
	}
}

// TestShutdownClaimReplyArrivingAfterStop: a claim in flight when the
// pool's context ends, whose reply arrives after that, starts none of its
// jobs: they are put back, and another pool runs each once.
func TestShutdownClaimReplyArrivingAfterStop(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	px := redistest.StartProxy(t, srv.Addr)
	ns := redistest.Namespace(t)
	e := newEnvOn(t, srv.Client(), ns)
	l := newRunLog()

	cfg := e.config()
	cfg.Queues = map[string]int{"late": 1}
	cfg.Maintenance.Disabled = true
	a, err := worker.NewPool(px.Client(nil), cfg)
	if err != nil {
		t.Fatal(err)
	}
	hooks := worker.InitHooks(a, t)
	if err := worker.Register(a, jobs.Worker[strandArgs](strandWorker{log: l, body: func(context.Context, *jobs.Job[strandArgs]) error {
		t.Error("a job claimed by a stopping pool started")
		return nil
	}})); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(free)
	held := px.DelayReply(release, "_claim\r\n", "late")
	var ids []string
	for i := range 3 {
		ids = append(ids, e.enqueue(strandArgs{N: i}, jobs.Queue("late")).JobID)
	}
	cancel, done := runPool(a)
	select {
	case <-held:
	case <-time.After(testsignal.Timeout()):
		cancel()
		t.Fatal("the claim was not sent")
	}
	cancel()
	free()
	if err := waitRun(t, done); err != nil {
		t.Fatalf("Run: %v", err)
	}
	ev := hooks.PutBack.WaitOrTimeout()
	if len(ev.Jobs) != 3 {
		t.Fatalf("put back %d jobs, want 3", len(ev.Jobs))
	}

	cfg.WorkerID = "c"
	cfg.Registerer = nil
	c := e.pool(cfg)
	if err := worker.Register(c, jobs.Worker[strandArgs](strandWorker{log: l, body: quick})); err != nil {
		t.Fatal(err)
	}
	e.start(c)
	awaitAllSucceeded(t, e, "late", ids, l)
	for _, id := range ids {
		if starts, _ := l.count(id); starts != 1 {
			t.Errorf("job %s started %d times, want once", id, starts)
		}
	}
}

// TestShutdownWhileRedisPausedPastTimeout: a pool stopped while Redis is
// paused for longer than its ShutdownTimeout returns within its bound;
// once Redis resumes, another pool runs every job exactly once, and none
// stays running. Paused with handlers waiting for their contexts (their
// outcomes' commits sent to the paused Redis), and paused amid quick
// handlers (claims and commits in flight, run by Redis when it resumes,
// after the pool returned).
func TestShutdownWhileRedisPausedPastTimeout(t *testing.T) {
	waiting := func(ctx context.Context, _ *jobs.Job[strandArgs]) error {
		<-ctx.Done()
		return ctx.Err()
	}
	t.Run("handlers waiting", func(t *testing.T) {
		shutdownWhilePaused(t, 8, 4, waiting, func(l *runLog) bool { return l.startedN() == 4 })
	})
	t.Run("claims and commits in flight", func(t *testing.T) {
		shutdownWhilePaused(t, 60, 4, quick, func(l *runLog) bool { return l.startedN() >= 10 })
	})
}

func shutdownWhilePaused(t *testing.T, n, concurrency int, body func(context.Context, *jobs.Job[strandArgs]) error, ready func(*runLog) bool) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	e := newEnvOn(t, srv.Client(), ns)
	l := newRunLog()

	var ids []string
	for i := range n {
		ids = append(ids, e.enqueue(strandArgs{N: i}, jobs.Queue("paused")).JobID)
	}
	cfg := e.config()
	cfg.Queues = map[string]int{"paused": 1}
	cfg.Concurrency = concurrency
	cfg.FetchBatch = 2
	cfg.Maintenance.Disabled = true
	cfg.ShutdownTimeout = 300 * time.Millisecond
	cfg.WorkerID = "a"
	cfg.Registerer = nil
	rdbA := redis.NewClient(&redis.Options{Addr: srv.Addr, ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond})
	t.Cleanup(func() { _ = rdbA.Close() })
	a, err := worker.NewPool(rdbA, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := worker.Register(a, jobs.Worker[strandArgs](strandWorker{log: l, body: body})); err != nil {
		t.Fatal(err)
	}
	cancel, done := runPool(a)
	l.waitFor(t, "handlers running", func() bool { return ready(l) })
	srv.Pause()
	paused := true
	defer func() {
		if paused {
			srv.Resume()
		}
	}()
	cancel()
	err = waitRun(t, done)
	t.Logf("Run: %v", err)
	srv.Resume()
	paused = false

	cfg.WorkerID = "c"
	cfg.Maintenance.Disabled = false
	cfg.ShutdownTimeout = 5 * time.Second
	c := e.pool(cfg)
	if err := worker.Register(c, jobs.Worker[strandArgs](strandWorker{log: l, body: quick})); err != nil {
		t.Fatal(err)
	}
	e.start(c)
	awaitAllSucceeded(t, e, "paused", ids, l)
}

// TestShutdownAbandonedHandlersAndWaitingJobs: a pool stopped with handlers
// that ignore their context and claimed jobs not started (waiting for a
// resource another holds) names exactly the abandoned jobs in its
// ShutdownError, puts the waiting ones back, refuses a second Run, and
// another pool runs every job once.
func TestShutdownAbandonedHandlersAndWaitingJobs(t *testing.T) {
	e := newEnv(t)
	l := newRunLog()
	m := lease.NewManager(e.rdb, lease.Config{Namespace: e.ns})
	held, err := m.Acquire(context.Background(), "busy", "someone-else", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var ids, deaf, waiting []string
	for i := range 2 {
		id := e.enqueue(strandArgs{N: i}, jobs.Queue("deaf")).JobID
		ids, deaf = append(ids, id), append(deaf, id)
	}
	for i := range 2 {
		id := e.enqueue(strandArgs{N: 10 + i}, jobs.Queue("deaf"), jobs.Resource("busy")).JobID
		ids, waiting = append(ids, id), append(waiting, id)
	}
	cfg := e.config()
	cfg.Queues = map[string]int{"deaf": 1}
	cfg.Maintenance.Disabled = true
	cfg.ShutdownTimeout = 200 * time.Millisecond
	cfg.LeaseWait = time.Minute
	cfg.WorkerID = "a"
	a := e.pool(cfg)
	hooks := worker.InitHooks(a, t)
	unblock := make(chan struct{})
	var unblockOnce sync.Once
	t.Cleanup(func() { unblockOnce.Do(func() { close(unblock) }) })
	if err := worker.Register(a, jobs.Worker[strandArgs](strandWorker{log: l, body: func(context.Context, *jobs.Job[strandArgs]) error {
		<-unblock // ignores its context
		return errors.New("abandoned handler returning")
	}})); err != nil {
		t.Fatal(err)
	}
	cancel, done := runPool(a)
	l.waitFor(t, "two handlers running", func() bool { return l.startedN() == 2 })
	// The resource jobs are claimed (the pool claims up to its free slots).
	claimed := 0
	for claimed < 4 {
		claimed += len(hooks.Claimed.WaitOrTimeout().Result.Jobs)
	}
	cancel()
	err = waitRun(t, done)
	var se *worker.ShutdownError
	if !errors.As(err, &se) {
		t.Fatalf("Run: %v, want a ShutdownError", err)
	}
	var named []string
	for _, u := range se.Jobs {
		if u.Reason != worker.UnsettledAbandoned || u.Queue != "deaf" || u.Token == 0 {
			t.Errorf("unsettled %+v, want abandoned in queue deaf with a token", u)
		}
		named = append(named, u.ID)
	}
	slices.Sort(named)
	slices.Sort(deaf)
	if !slices.Equal(named, deaf) {
		t.Errorf("ShutdownError names %v, want the abandoned %v", named, deaf)
	}
	if err := a.Run(context.Background()); !errors.Is(err, worker.ErrRunning) {
		t.Errorf("second Run: %v, want ErrRunning", err)
	}
	in := e.client.Inspector()
	for _, id := range waiting {
		rec, err := in.Get(context.Background(), "deaf", id)
		if err != nil {
			t.Fatal(err)
		}
		if rec.State != jobs.Pending {
			t.Errorf("waiting job %s is %s, want pending (put back)", id, rec.State)
		}
		if starts, _ := l.count(id); starts != 0 {
			t.Errorf("waiting job %s started", id)
		}
	}
	if err := m.Release(context.Background(), held); err != nil {
		t.Fatal(err)
	}
	unblockOnce.Do(func() { close(unblock) })

	cfg.WorkerID = "c"
	cfg.Maintenance.Disabled = false
	cfg.ShutdownTimeout = 5 * time.Second
	cfg.Registerer = nil
	c := e.pool(cfg)
	if err := worker.Register(c, jobs.Worker[strandArgs](strandWorker{log: l, body: quick})); err != nil {
		t.Fatal(err)
	}
	e.start(c)
	awaitAllSucceeded(t, e, "deaf", ids, l)
}

// TestShutdownTwoPoolsAtOnceThirdRuns: two pools stopping at once, their
// handlers mid-call, while a third keeps running: the third runs every
// job of theirs exactly once.
func TestShutdownTwoPoolsAtOnceThirdRuns(t *testing.T) {
	e := newEnv(t)
	l := newRunLog()
	const n = 12
	var ids []string
	for i := range n {
		ids = append(ids, e.enqueue(strandArgs{N: i}, jobs.Queue("trio")).JobID)
	}
	cfg := e.config()
	cfg.Queues = map[string]int{"trio": 1}
	cfg.Maintenance.Disabled = true
	cfg.ShutdownTimeout = 200 * time.Millisecond
	cfg.Registerer = nil
	var stops []context.CancelFunc
	var dones []<-chan error
	for _, id := range []string{"a", "b"} {
		cfg.WorkerID = id
		p := e.pool(cfg)
		if err := worker.Register(p, jobs.Worker[strandArgs](strandWorker{log: l, body: func(ctx context.Context, _ *jobs.Job[strandArgs]) error {
			<-ctx.Done()
			return ctx.Err()
		}})); err != nil {
			t.Fatal(err)
		}
		cancel, done := runPool(p)
		stops, dones = append(stops, cancel), append(dones, done)
	}
	l.waitFor(t, "eight handlers running", func() bool { return l.startedN() == 8 })
	cfg.WorkerID = "c"
	cfg.Maintenance.Disabled = false
	cfg.ShutdownTimeout = 5 * time.Second
	c := e.pool(cfg)
	if err := worker.Register(c, jobs.Worker[strandArgs](strandWorker{log: l, body: quick})); err != nil {
		t.Fatal(err)
	}
	e.start(c)
	l.waitFor(t, "the third pool running the rest", func() bool { return l.startedN() == n })
	var wg sync.WaitGroup
	for _, s := range stops {
		wg.Go(s)
	}
	wg.Wait()
	for i, d := range dones {
		if err := waitRun(t, d); err != nil {
			t.Errorf("pool %d: Run: %v", i, err)
		}
	}
	awaitAllSucceeded(t, e, "trio", ids, l)
}

// TestShutdownAbandonedWhoseUncertainCommitFailed: a handler that ignores
// its context is abandoned while Redis does not answer, so the commit of
// its attempt as uncertain fails too: Run's ShutdownError says so (commit
// failed), as UnsettledAbandoned's doc promises, instead of "handler still
// running", which tells the operator the attempt was recorded uncertain.
// Once Redis resumes, another pool runs the job once.
func TestShutdownAbandonedWhoseUncertainCommitFailed(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	e := newEnvOn(t, srv.Client(), ns)
	l := newRunLog()
	id := e.enqueue(strandArgs{N: 1}, jobs.Queue("deafpause")).JobID

	cfg := e.config()
	cfg.Queues = map[string]int{"deafpause": 1}
	cfg.Maintenance.Disabled = true
	cfg.ShutdownTimeout = 100 * time.Millisecond
	cfg.WorkerID = "a"
	cfg.Registerer = nil
	rdbA := redis.NewClient(&redis.Options{Addr: srv.Addr, ReadTimeout: 300 * time.Millisecond, WriteTimeout: 300 * time.Millisecond})
	t.Cleanup(func() { _ = rdbA.Close() })
	a, err := worker.NewPool(rdbA, cfg)
	if err != nil {
		t.Fatal(err)
	}
	unblock := make(chan struct{})
	var unblockOnce sync.Once
	t.Cleanup(func() { unblockOnce.Do(func() { close(unblock) }) })
	if err := worker.Register(a, jobs.Worker[strandArgs](strandWorker{log: l, body: func(context.Context, *jobs.Job[strandArgs]) error {
		<-unblock // ignores its context
		return errors.New("abandoned handler returning")
	}})); err != nil {
		t.Fatal(err)
	}
	cancel, done := runPool(a)
	l.waitFor(t, "the handler running", func() bool { return l.startedN() == 1 })
	srv.Pause()
	paused := true
	defer func() {
		if paused {
			srv.Resume()
		}
	}()
	cancel()
	err = waitRun(t, done)
	var se *worker.ShutdownError
	if !errors.As(err, &se) || len(se.Jobs) != 1 || se.Jobs[0].ID != id {
		t.Fatalf("Run: %v, want a ShutdownError naming job %s", err, id)
	}
	if got := se.Jobs[0].Reason; got != worker.UnsettledCommitFailed {
		t.Errorf("ShutdownError's reason %q, want %q: the attempt's uncertain record was never acknowledged", got, worker.UnsettledCommitFailed)
	}
	srv.Resume()
	paused = false
	unblockOnce.Do(func() { close(unblock) })

	cfg.WorkerID = "c"
	cfg.Maintenance.Disabled = false
	cfg.ShutdownTimeout = 5 * time.Second
	c := e.pool(cfg)
	if err := worker.Register(c, jobs.Worker[strandArgs](strandWorker{log: l, body: quick})); err != nil {
		t.Fatal(err)
	}
	e.start(c)
	awaitAllSucceeded(t, e, "deafpause", []string{id}, l)
}
