package worker_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// errInjected is a call's failure made up by a test hook.
var errInjected = errors.New("injected: connection reset")

// stopAtClaim ends a pool's Run context once the pool's claim (a script
// call naming its WorkerID) was answered, and fails the next fail script
// calls carrying text (a put-back's reason) without sending them.
type stopAtClaim struct {
	owner  string
	stop   context.CancelFunc
	text   string
	fail   atomic.Int32
	failed atomic.Int32
}

func isScriptCall(cmd redis.Cmder) bool {
	switch cmd.Name() {
	case "evalsha", "eval", "fcall":
		return true
	}
	return false
}

func (h *stopAtClaim) around(cmds []redis.Cmder, next func() error) error {
	for _, cmd := range cmds {
		if isScriptCall(cmd) && slices.Contains(cmd.Args(), any(h.text)) && h.fail.Add(-1) >= 0 {
			h.failed.Add(1)
			for _, c := range cmds {
				c.SetErr(errInjected)
			}
			return errInjected
		}
	}
	err := next()
	for _, cmd := range cmds {
		if isScriptCall(cmd) && slices.Contains(cmd.Args(), any(h.owner)) {
			h.stop()
		}
	}
	return err
}

func (h *stopAtClaim) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *stopAtClaim) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		return h.around([]redis.Cmder{cmd}, func() error { return next(ctx, cmd) })
	}
}

func (h *stopAtClaim) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		return h.around(cmds, func() error { return next(ctx, cmds) })
	}
}

// Jobs a pool claimed as it stopped are put back at once, pending and due
// with their attempts not consumed, even when the put-back call fails once
// (a dropped connection): it is sent again instead of leaving the jobs
// running until their leases expire.
func TestStoppingPoolPutsBackItsLastClaimWhenThePutBackFailsOnce(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	e := newEnvOn(t, srv.Client(), redistest.Namespace(t))
	cfg := e.config()
	cfg.WorkerID = "stops-at-claim"
	cfg.Maintenance.Disabled = true // its leader lease names the WorkerID too
	res := e.enqueue(plainArgs{N: 1})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hook := &stopAtClaim{owner: cfg.WorkerID, stop: cancel, text: "the pool stopped before the attempt started"}
	hook.fail.Store(1)
	rdb := srv.Client()
	rdb.AddHook(hook)
	p, err := worker.NewPool(rdb, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan struct{}, 1)
	if err := worker.Register(p, jobs.WorkFunc[plainArgs](func(context.Context, *jobs.Job[plainArgs]) error {
		ran <- struct{}{}
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	if err := p.Run(ctx); err != nil {
		t.Fatalf("Run = %v", err)
	}
	if hook.failed.Load() != 1 {
		t.Fatalf("put-back calls failed: %d, want 1 (the pool never claimed the job as it stopped)", hook.failed.Load())
	}
	select {
	case <-ran:
		t.Fatal("a job claimed by a stopping pool ran")
	default:
	}
	r, err := e.client.Inspector().Get(context.Background(), jobs.DefaultQueue, res.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if r.State != jobs.Pending || r.Attempts != 0 {
		t.Fatalf("job after its put-back failed once: %s, %d attempts; want pending, 0", r.State, r.Attempts)
	}
}

// A stopping pool whose put-back of its last claim keeps failing (Redis
// unreachable) leaves those jobs running until their leases lapse: Run
// names them in its *ShutdownError (matching ErrUnsettled), as it names
// outcomes whose commit failed, instead of returning nil as if the pool
// had settled everything it claimed.
func TestStoppingPoolNamesTheClaimItCouldNotPutBack(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	e := newEnvOn(t, srv.Client(), redistest.Namespace(t))
	cfg := e.config()
	cfg.WorkerID = "stops-at-claim"
	cfg.Maintenance.Disabled = true // its leader lease names the WorkerID too
	res := e.enqueue(plainArgs{N: 1})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hook := &stopAtClaim{owner: cfg.WorkerID, stop: cancel, text: "the pool stopped before the attempt started"}
	hook.fail.Store(1 << 20) // every put-back fails
	rdb := srv.Client()
	rdb.AddHook(hook)
	p, err := worker.NewPool(rdb, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := worker.Register(p, jobs.WorkFunc[plainArgs](func(context.Context, *jobs.Job[plainArgs]) error {
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	err = p.Run(ctx)
	var se *worker.ShutdownError
	if !errors.Is(err, worker.ErrUnsettled) || !errors.As(err, &se) {
		t.Fatalf("Run = %v, want a *ShutdownError naming the job it could not put back", err)
	}
	if len(se.Jobs) != 1 || se.Jobs[0].ID != res.JobID || se.Jobs[0].Reason != worker.UnsettledCommitFailed || se.Jobs[0].Token == 0 {
		t.Fatalf("ShutdownError jobs %+v, want job %s (%s) with its token", se.Jobs, res.JobID, worker.UnsettledCommitFailed)
	}
	if hook.failed.Load() == 0 {
		t.Fatal("no put-back was attempted")
	}
	if n := failedCommits(t, e.reg, res.Queue, "unknown"); n != 1 {
		t.Errorf("fencedq_commits_failed_total{result=\"unknown\"} = %v, want 1", n)
	}
}
