package worker_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

type tenantKey struct{}

// seenAttempt is what a test middleware saw of one attempt.
type seenAttempt struct {
	id, kind, queue, op, resource, owner, tenant string
	attempt, maxRetries                          int
	token                                        uint64
	fenceToken                                   uint64
	deadlineSet                                  bool
	err                                          error
	outcome                                      string
}

// recorder is a middleware that records every attempt it wraps and puts
// the job's tenant header into the handler's context.
type recorder struct {
	mu    sync.Mutex
	order map[string][]string // per attempt (job id#attempt): attempts run concurrently
	seen  []seenAttempt
}

func (r *recorder) tag(name string) worker.Middleware {
	return func(next worker.Handler) worker.Handler {
		return func(ctx context.Context, job worker.JobView) error {
			r.mu.Lock()
			if r.order == nil {
				r.order = map[string][]string{}
			}
			k := fmt.Sprintf("%s#%d", job.ID(), job.Attempt())
			r.order[k] = append(r.order[k], name)
			r.mu.Unlock()
			return next(ctx, job)
		}
	}
}

func (r *recorder) middleware(next worker.Handler) worker.Handler {
	return func(ctx context.Context, job worker.JobView) error {
		f, _ := fence.FromContext(ctx)
		d, hasDeadline := ctx.Deadline()
		ctx = context.WithValue(ctx, tenantKey{}, job.Header("tenant"))
		err := next(ctx, job)
		r.mu.Lock()
		r.seen = append(r.seen, seenAttempt{
			id: job.ID(), kind: job.Kind(), queue: job.Queue(), op: job.OperationID(), resource: job.Resource(),
			owner: job.Owner(), tenant: job.Headers()["tenant"], attempt: job.Attempt(), maxRetries: job.MaxRetries(),
			token: uint64(job.Token()), fenceToken: uint64(f.Token), deadlineSet: hasDeadline && job.Deadline().Equal(d),
			err: err, outcome: job.Outcome(err),
		})
		r.mu.Unlock()
		return err
	}
}

func (r *recorder) attempts() []seenAttempt {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.seen)
}

type wrappedArgs struct {
	FailTimes int  `json:"fail_times"`
	Unknown   bool `json:"unknown"`
}

func (wrappedArgs) Kind() string { return "wrapped" }

// TestMiddlewareWrapsEveryAttempt: middleware runs in order around every
// attempt, retries included, with the handler's context (fence, deadline)
// and a read-only view of the job; a context value it adds reaches the
// handler, and JobView.Outcome names what the attempt commits.
func TestMiddlewareWrapsEveryAttempt(t *testing.T) {
	e := newEnv(t)
	rec := &recorder{}
	cfg := e.config()
	cfg.Middleware = []worker.Middleware{rec.tag("outer"), rec.middleware, rec.tag("inner")}
	cfg.Maintenance.Disabled = true // the uncertain job stays uncertain
	p := e.pool(cfg)
	var mu sync.Mutex
	tenants := map[string]string{}
	calls := map[string]int{}
	if err := worker.Register(p, jobs.WorkFunc[wrappedArgs](func(ctx context.Context, j *jobs.Job[wrappedArgs]) error {
		mu.Lock()
		defer mu.Unlock()
		tenants[j.ID], _ = ctx.Value(tenantKey{}).(string)
		calls[j.ID]++
		switch {
		case j.Args.Unknown:
			return jobs.Unknown(errors.New("the bank did not answer"))
		case calls[j.ID] <= j.Args.FailTimes:
			return fmt.Errorf("failure %d", calls[j.ID])
		}
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	e.start(p)
	retried := e.enqueue(wrappedArgs{FailTimes: 1}, jobs.Header("tenant", "acme"), jobs.OperationID("op-retried"))
	exhausted := e.enqueue(wrappedArgs{FailTimes: 5}, jobs.MaxRetries(0))
	unknown := e.enqueue(wrappedArgs{Unknown: true})
	jobstest.WaitState(t, e.ledger, "default", retried.JobID, jobs.Succeeded)
	jobstest.WaitState(t, e.ledger, "default", exhausted.JobID, jobs.Dead)
	jobstest.WaitState(t, e.ledger, "default", unknown.JobID, jobs.Uncertain)

	var got []string
	for _, a := range rec.attempts() {
		if !a.deadlineSet || a.token == 0 || a.fenceToken != a.token || a.kind != "wrapped" || a.queue != "default" ||
			a.resource != "job:"+a.id || a.owner != p.ID()+"/"+a.id {
			t.Errorf("middleware saw %+v", a)
		}
		got = append(got, fmt.Sprintf("%s#%d:%s", a.id, a.attempt, a.outcome))
		if a.id == retried.JobID && (a.tenant != "acme" || a.op != "op-retried" || a.maxRetries != jobs.DefaultMaxRetries) {
			t.Errorf("retried job seen as %+v", a)
		}
	}
	slices.Sort(got)
	want := []string{
		retried.JobID + "#1:" + worker.OutcomeRetry, retried.JobID + "#2:" + worker.OutcomeSucceeded,
		exhausted.JobID + "#1:" + worker.OutcomeDead, unknown.JobID + "#1:" + worker.OutcomeUncertain,
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("middleware saw attempts %v, want %v", got, want)
	}
	mu.Lock()
	if tenants[retried.JobID] != "acme" {
		t.Errorf("the handler saw tenant %q from the middleware's context, want acme", tenants[retried.JobID])
	}
	mu.Unlock()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.order) != len(want) {
		t.Fatalf("middleware ran around %d attempts, want %d: %v", len(rec.order), len(want), rec.order)
	}
	for k, o := range rec.order {
		if !slices.Equal(o, []string{"outer", "inner"}) {
			t.Fatalf("middleware order of attempt %s: %v, want outer then inner", k, o)
		}
	}
}

// TestMiddlewareErrorSteersTheOutcome: the error middleware returns is the
// attempt's, and a panic in middleware is recovered like a handler's.
func TestMiddlewareErrorSteersTheOutcome(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.Middleware = []worker.Middleware{func(next worker.Handler) worker.Handler {
		return func(ctx context.Context, job worker.JobView) error {
			if job.Header("policy") == "panic" {
				panic("middleware panicked")
			}
			if err := next(ctx, job); err != nil {
				return jobs.Permanent(err) // this application never retries
			}
			return nil
		}
	}}
	p := e.pool(cfg)
	if err := worker.Register(p, jobs.WorkFunc[wrappedArgs](func(ctx context.Context, j *jobs.Job[wrappedArgs]) error {
		return errors.New("refused")
	})); err != nil {
		t.Fatal(err)
	}
	e.start(p)
	permanent := e.enqueue(wrappedArgs{})
	rec := jobstest.WaitState(t, e.ledger, "default", permanent.JobID, jobs.Dead)
	if rec.Attempts != 1 || rec.Reason != "permanent error" {
		t.Fatalf("record %+v: want dead after one attempt, by the middleware's permanent error", rec)
	}
	panicked := e.enqueue(wrappedArgs{}, jobs.Header("policy", "panic"), jobs.MaxRetries(1))
	rec = jobstest.WaitState(t, e.ledger, "default", panicked.JobID, jobs.Dead)
	if rec.Attempts != 2 || rec.Error != "handler panicked: middleware panicked" {
		t.Fatalf("record %+v: want two attempts, each a recovered panic", rec)
	}
}

// TestLeaderEnqueuesThroughMiddleware: the jobs the maintenance leader
// enqueues (periodic ticks here) go through the pool's
// Jobs.EnqueueMiddleware, and their headers reach the handler.
func TestLeaderEnqueuesThroughMiddleware(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.Queues = map[string]int{"ticks": 1}
	cfg.Jobs.EnqueueMiddleware = []jobs.EnqueueMiddleware{func(next jobs.EnqueueFunc) jobs.EnqueueFunc {
		return func(ctx context.Context, reqs []*jobs.EnqueueRequest) ([]*jobs.Result, error) {
			for _, r := range reqs {
				r.SetHeader("via", "leader")
			}
			return next(ctx, reqs)
		}
	}}
	p := e.pool(cfg)
	var mu sync.Mutex
	var seen []string
	if err := worker.Register(p, jobs.WorkFunc[tickArgs](func(ctx context.Context, j *jobs.Job[tickArgs]) error {
		mu.Lock()
		seen = append(seen, j.Headers["via"])
		mu.Unlock()
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	if err := p.AddPeriodic(worker.Periodic(worker.Every(time.Second), tickArgs{Report: "r"}, worker.ScheduleID("mw"),
		worker.EnqueueOptions(jobs.Queue("ticks")))); err != nil {
		t.Fatal(err)
	}
	e.start(p)
	var tick *jobs.Record
	redistest.Await(t, e.rdb, e.ns, "a tick succeeded", func() bool {
		done, err := e.ledger.List(context.Background(), "ticks", jobs.Succeeded, 0, 1)
		if err != nil || len(done) == 0 {
			return false
		}
		tick = done[0]
		return true
	})
	if tick.Headers["via"] != "leader" {
		t.Fatalf("tick %s has headers %v: want the pool's enqueue middleware's", tick.ID, tick.Headers)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) == 0 || seen[0] != "leader" {
		t.Fatalf("the handler saw headers %v", seen)
	}
}

// TestMiddlewareReturningNilIsRefused: a middleware that returns a nil
// Handler is a configuration mistake Register reports (ErrConfig), rather
// than every attempt of the kind panicking and being retried.
func TestMiddlewareReturningNilIsRefused(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.Middleware = []worker.Middleware{
		func(next worker.Handler) worker.Handler { return next },
		func(worker.Handler) worker.Handler { return nil },
	}
	p := e.pool(cfg)
	err := worker.Register(p, jobs.WorkFunc[wrappedArgs](func(context.Context, *jobs.Job[wrappedArgs]) error { return nil }))
	if !errors.Is(err, worker.ErrConfig) || !strings.Contains(err.Error(), "middleware 1") {
		t.Fatalf("Register: %v; want ErrConfig naming middleware 1", err)
	}
}

// TestMiddlewareSkippingTheHandlerIsLogged: a middleware that returns no
// error without calling next ends the attempt as succeeded without the
// handler having run (a skip policy, or a forgotten next): the pool says
// so in a warning naming the job.
func TestMiddlewareSkippingTheHandlerIsLogged(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.Middleware = []worker.Middleware{func(worker.Handler) worker.Handler {
		return func(context.Context, worker.JobView) error { return nil }
	}}
	p := e.pool(cfg)
	ran := make(chan struct{}, 1)
	if err := worker.Register(p, jobs.WorkFunc[wrappedArgs](func(context.Context, *jobs.Job[wrappedArgs]) error {
		ran <- struct{}{}
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	stop := e.start(p)
	res := e.enqueue(wrappedArgs{})
	jobstest.WaitState(t, e.ledger, "default", res.JobID, jobs.Succeeded)
	stop()
	select {
	case <-ran:
		t.Fatal("the handler ran")
	default:
	}
	for line := range strings.Lines(e.logs.String()) {
		if strings.Contains(line, `"level":"WARN"`) && strings.Contains(line, "without running the handler") && strings.Contains(line, res.JobID) {
			return
		}
	}
	t.Fatalf("no warning naming job %s:\n%s", res.JobID, e.logs.String())
}
