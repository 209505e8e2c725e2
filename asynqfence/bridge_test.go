package asynqfence_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/asynqfence"
	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
)

// inProcess is an asynq server in the test process, with the bridge and a
// middleware reporting what the bridge returned for each delivery.
type inProcess struct {
	t        *testing.T
	rdb      *redis.Client
	ledger   *ledger.Ledger
	bridge   *asynqfence.Bridge
	client   *asynq.Client
	returned testsignal.Signal[error] // what the bridge returned to asynq, per delivery
}

func startInProcess(t *testing.T, register func(mux *asynq.ServeMux)) *inProcess {
	return startInProcessWith(t, asynqfence.Options{WorkerID: "in-process"}, register)
}

func startInProcessWith(t *testing.T, opts asynqfence.Options, register func(mux *asynq.ServeMux)) *inProcess {
	return startInProcessServer(t, opts, testServerConfig(), register)
}

// startInProcessServer is startInProcessWith with the asynq server's
// configuration given.
func startInProcessServer(t *testing.T, opts asynqfence.Options, cfg asynq.Config, register func(mux *asynq.ServeMux)) *inProcess {
	rdb := redistest.Start(t, redistest.Options{}).Client()
	addr := rdb.Options().Addr
	ns := redistest.Namespace(t)
	lg := ledger.New(rdb, ledger.Config{Namespace: ns})
	b, err := asynqfence.New(rdb, jobs.Config{Namespace: ns}, opts)
	if err != nil {
		t.Fatal(err)
	}
	p := &inProcess{t: t, rdb: rdb, ledger: lg, bridge: b, client: asynq.NewClient(asynq.RedisClientOpt{Addr: addr})}
	p.returned.Init(t, "delivery returned to asynq")
	t.Cleanup(func() { _ = p.client.Close() })
	mux := asynq.NewServeMux()
	mux.Use(func(next asynq.Handler) asynq.Handler {
		return asynq.HandlerFunc(func(ctx context.Context, task *asynq.Task) error {
			err := next.ProcessTask(ctx, task)
			p.returned.Signal(err)
			return err
		})
	}, b.Middleware())
	register(mux)
	srv := asynq.NewServer(asynq.RedisClientOpt{Addr: addr}, cfg)
	if err := srv.Start(mux); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	return p
}

// next waits for the next delivery and returns what the bridge returned.
func (p *inProcess) next() error {
	p.t.Helper()
	return p.returned.WaitOrTimeout()
}

// awaitTask waits until asynq holds task id of queue "default" in state s.
func (p *inProcess) awaitTask(insp *asynq.Inspector, id string, s asynq.TaskState) {
	p.t.Helper()
	redistest.Await(p.t, p.rdb, "asynq:{default}:", "asynq task "+id+" "+s.String(), func() bool {
		info, err := insp.GetTaskInfo("default", id)
		return err == nil && info.State == s
	})
}

func (p *inProcess) record(id string) *jobs.Record {
	p.t.Helper()
	rec, err := p.ledger.Get(context.Background(), "default", id)
	if err != nil {
		p.t.Fatal(err)
	}
	return rec
}

func TestDuplicateDeliveryIsAcknowledgedWithoutRunning(t *testing.T) {
	var runs atomic.Int32
	var tokens [2]fence.Fence
	p := startInProcess(t, func(mux *asynq.ServeMux) {
		mux.HandleFunc("note", func(ctx context.Context, _ *asynq.Task) error {
			f, ok := fence.FromContext(ctx)
			if !ok {
				return errors.New("no fence in the handler's context")
			}
			tokens[runs.Add(1)-1] = f
			return nil
		})
	})
	// asynq's record of the task: a finished task is deleted, so its id can
	// be enqueued again.
	task := "asynq:{default}:t:n1"
	for range 2 {
		// asynq deletes the task just after the handler returned: until
		// then, the id is taken.
		redistest.Await(t, p.rdb, task, "asynq to delete finished task n1", func() bool {
			return p.rdb.Exists(context.Background(), task).Val() == 0
		})
		if _, err := p.client.Enqueue(asynq.NewTask("note", []byte(`{}`)), asynq.TaskID("n1")); err != nil {
			t.Fatal(err)
		}
		if err := p.next(); err != nil {
			t.Fatal(err)
		}
	}
	if runs.Load() != 1 {
		t.Fatalf("handler ran %d times, want once", runs.Load())
	}
	rec := p.record("n1")
	if rec.State != jobs.Succeeded || rec.Bridge != asynqfence.BridgeName || rec.Token != tokens[0].Token || tokens[0].OperationID != "n1" {
		t.Fatalf("record %+v, fence %+v", rec, tokens[0])
	}
	stats, _ := p.ledger.Stats(context.Background(), "default")
	if stats["deduplicated_execute"] != 1 {
		t.Fatalf("stats %v", stats)
	}
}

func TestRetryRunsUnderAHigherTokenAndNativePoolsNeverClaim(t *testing.T) {
	var runs atomic.Int32
	var first, second atomic.Uint64
	p := startInProcess(t, func(mux *asynq.ServeMux) {
		mux.HandleFunc("flaky", func(ctx context.Context, _ *asynq.Task) error {
			f, _ := fence.FromContext(ctx)
			if runs.Add(1) == 1 {
				first.Store(uint64(f.Token))
				return errors.New("dependency refused")
			}
			second.Store(uint64(f.Token))
			return nil
		})
	})
	if _, err := p.client.Enqueue(asynq.NewTask("flaky", []byte(`{}`)), asynq.TaskID("f1"), asynq.MaxRetry(3)); err != nil {
		t.Fatal(err)
	}
	if err := p.next(); err == nil {
		t.Fatal("a failed attempt returned nil to asynq")
	}
	// Between the attempts the job is pending in the ledger, outside the due index.
	res, err := p.ledger.Claim(context.Background(), "default", "native-pool", time.Minute, 10)
	if err != nil || len(res.Jobs) != 0 {
		t.Fatalf("a native claim took %+v (%v)", res, err)
	}
	if err := p.next(); err != nil {
		t.Fatal(err)
	}
	rec := p.record("f1")
	if rec.State != jobs.Succeeded || rec.Attempts != 2 || second.Load() <= first.Load() {
		t.Fatalf("record %+v, tokens %d then %d", rec, first.Load(), second.Load())
	}
}

type transferArgs struct {
	Cents int `json:"cents"`
}

func (transferArgs) Kind() string { return "transfer" }

type transferWorker struct{ runs atomic.Int32 }

func (w *transferWorker) Work(_ context.Context, j *jobs.Job[transferArgs]) error {
	if j.Token == 0 || j.Args.Cents != 250 || j.OperationID != "op-7" {
		return jobs.Permanent(errors.New("job without a token or args"))
	}
	w.runs.Add(1)
	return nil
}

func TestTypedWorkerOneEffectPerOperationID(t *testing.T) {
	w := &transferWorker{}
	p := startInProcess(t, func(mux *asynq.ServeMux) { asynqfence.Handle(mux, jobs.Worker[transferArgs](w)) })
	for _, taskID := range []string{"task-a", "task-b"} { // two asynq tasks, one operation
		task, err := asynqfence.NewTask(transferArgs{Cents: 250}, "op-7")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.client.Enqueue(task, asynq.TaskID(taskID)); err != nil {
			t.Fatal(err)
		}
		if err := p.next(); err != nil {
			t.Fatal(err)
		}
	}
	if w.runs.Load() != 1 {
		t.Fatalf("worker ran %d times for one operation id", w.runs.Load())
	}
	if rec := p.record("op-7"); rec.State != jobs.Succeeded || rec.Kind != "transfer" {
		t.Fatalf("record %+v", rec)
	}
}

func TestHandlerWithoutMiddleware(t *testing.T) {
	h := asynqfence.Handler(jobs.Worker[transferArgs](&transferWorker{}))
	if err := h.ProcessTask(context.Background(), asynq.NewTask("transfer", []byte(`{"cents":1}`))); !errors.Is(err, asynqfence.ErrNoAttempt) {
		t.Fatalf("got %v, want ErrNoAttempt", err)
	}
}

// TestUnreachableLedgerCancelsAtTheLocalDeadline: the ledger's Redis (not
// asynq's) is paused mid-task, so no renewal is confirmed and none says the
// lease is lost, yet the handler's context is cancelled, with a cause
// matching lease.ErrLost, at the attempt's local deadline (claim +
// LeaseTTL - SafetyMargin).
func TestUnreachableLedgerCancelsAtTheLocalDeadline(t *testing.T) {
	queue := redistest.Start(t, redistest.Options{}).Client().Options().Addr
	ledgerSrv := redistest.Start(t, redistest.Options{})
	b, err := asynqfence.New(ledgerSrv.Client(), jobs.Config{Namespace: redistest.Namespace(t)}, asynqfence.Options{WorkerID: "in-process", LeaseTTL: 300 * time.Millisecond, SafetyMargin: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{}, 1)
	causes := make(chan error, 1)
	mux := asynq.NewServeMux()
	mux.Use(b.Middleware())
	mux.HandleFunc("outlives-redis", func(ctx context.Context, _ *asynq.Task) error {
		started <- struct{}{}
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return context.Cause(ctx)
	})
	srv := asynq.NewServer(asynq.RedisClientOpt{Addr: queue}, testServerConfig())
	if err := srv.Start(mux); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	client := asynq.NewClient(asynq.RedisClientOpt{Addr: queue})
	t.Cleanup(func() { _ = client.Close() })
	if _, err := client.Enqueue(asynq.NewTask("outlives-redis", []byte(`{}`)), asynq.TaskID("o1")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(testsignal.Timeout()):
		t.Fatal("the handler did not run")
	}
	ledgerSrv.Pause()
	defer ledgerSrv.Resume() // before the server shuts down
	select {
	case cause := <-causes:
		if !errors.Is(cause, lease.ErrLost) || !strings.Contains(cause.Error(), "local deadline") {
			t.Fatalf("handler's context cancelled with %v, want the local deadline's lease.ErrLost", cause)
		}
	case <-time.After(testsignal.Timeout()):
		t.Fatal("the handler's context outlived its lease while the ledger was unreachable")
	}
}

// TestSafetyMarginAboveHalfTheTTLIsRefused: New refuses a SafetyMargin
// above half the LeaseTTL with ErrOptions instead of capping it.
func TestSafetyMarginAboveHalfTheTTLIsRefused(t *testing.T) {
	rdb, ns := redistest.New(t)
	b, err := asynqfence.New(rdb, jobs.Config{Namespace: ns}, asynqfence.Options{LeaseTTL: time.Second, SafetyMargin: 2 * time.Second})
	if b != nil || !errors.Is(err, asynqfence.ErrOptions) || !strings.Contains(err.Error(), "safety margin") {
		t.Fatalf("New: %v, %v; want an error matching ErrOptions naming the safety margin", b, err)
	}
	if _, err := asynqfence.New(rdb, jobs.Config{Namespace: ns}, asynqfence.Options{LeaseTTL: time.Second, SafetyMargin: 500 * time.Millisecond}); err != nil {
		t.Fatalf("half the TTL: %v", err)
	}
}
