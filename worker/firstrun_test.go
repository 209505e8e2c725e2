package worker_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// TestRunAgainAfterAFailedStart: a pool whose Run failed to start (Redis
// not up yet, as at a deploy where the application starts first) runs
// when Run is called again, instead of answering ErrRunning for a pool
// that never ran.
func TestRunAgainAfterAFailedStart(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	rdb := srv.Client()
	e := newEnvOn(t, rdb, redistest.Namespace(t))
	p := e.pool(e.config())
	ran := make(chan string, 1)
	if err := worker.Register(p, jobs.WorkFunc[effectArgs](func(_ context.Context, j *jobs.Job[effectArgs]) error {
		ran <- j.ID
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := p.Run(ctx)
	if err == nil || errors.Is(err, worker.ErrRunning) {
		t.Fatalf("Run with Redis down: %v, want the connection error", err)
	}
	srv.Restart()
	e.start(p)
	id := e.enqueue(effectArgs{Name: "after-restart"}).JobID
	select {
	case got := <-ran:
		if got != id {
			t.Fatalf("ran %s, want %s", got, id)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the pool started again did not run the job")
	}
	jobstest.WaitState(t, e.ledger, "default", id, jobs.Succeeded)
}

// ptrArgs is a job kind registered through a pointer type, its Kind
// method on the value.
type ptrArgs struct {
	N int `json:"n"`
}

func (ptrArgs) Kind() string { return "ptr-args" }

// TestPointerArgsRegisterAndRun: a worker for a pointer to args whose Kind
// is a value method registers (it used to panic on the nil zero value) and
// runs the jobs enqueued with such pointers.
func TestPointerArgsRegisterAndRun(t *testing.T) {
	e := newEnv(t)
	p := e.pool(e.config())
	got := make(chan int, 1)
	if err := worker.Register(p, jobs.WorkFunc[*ptrArgs](func(_ context.Context, j *jobs.Job[*ptrArgs]) error {
		got <- j.Args.N
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	e.start(p)
	id := e.enqueue(&ptrArgs{N: 7}).JobID
	select {
	case n := <-got:
		if n != 7 {
			t.Fatalf("args N = %d, want 7", n)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the job did not run")
	}
	jobstest.WaitState(t, e.ledger, "default", id, jobs.Succeeded)
}

// TestRunWithoutWorkersWarns: a pool run before any worker is registered
// says so when it starts, rather than only as each claimed job is put
// back.
func TestRunWithoutWorkersWarns(t *testing.T) {
	e := newEnv(t)
	stop := e.start(e.pool(e.config()))
	for end := time.Now().Add(10 * time.Second); !strings.Contains(e.logs.String(), "pool started") && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	logs := e.logs.String()
	if !strings.Contains(logs, `"level":"WARN","msg":"no workers registered`) {
		t.Fatalf("no warning about a pool without workers:\n%s", tail(logs, 10))
	}
}

// nilWorker is a worker type whose nil pointer cannot work.
type nilWorker struct{ calls int }

func (w *nilWorker) Work(context.Context, *jobs.Job[plainArgs]) error {
	w.calls++
	return nil
}

// TestRegisterRefusesANilWorker: a nil worker (a nil interface, function
// or pointer: a worker not built yet) is refused by Register, with an
// error naming the kind and what to do, instead of panicking on every attempt of its
// jobs until they go dead.
func TestRegisterRefusesANilWorker(t *testing.T) {
	e := newEnv(t)
	p := e.pool(e.config())
	var fn jobs.WorkFunc[plainArgs]
	var ptr *nilWorker
	for name, register := range map[string]func() error{
		"interface": func() error { return worker.Register[plainArgs](p, nil) },
		"function":  func() error { return worker.Register(p, fn) },
		"pointer":   func() error { return worker.Register[plainArgs](p, ptr) },
	} {
		err := register()
		if !errors.Is(err, worker.ErrNilWorker) || !strings.Contains(err.Error(), "kind plain") ||
			!strings.Contains(err.Error(), "build the worker before Register") {
			t.Errorf("nil %s: Register = %v, want ErrNilWorker naming the kind and what to do", name, err)
		}
	}
	if err := worker.Register[plainArgs](p, &nilWorker{}); err != nil {
		t.Fatalf("the kind refused for a nil worker cannot be registered with a real one: %v", err)
	}
}

// cancelOn is a log handler that calls cancel when a line with message msg
// is logged: a test stops a pool at that point of its run.
type cancelOn struct {
	slog.Handler
	msg    string
	cancel func()
}

func (h cancelOn) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.cancel()
	}
	return h.Handler.Handle(ctx, r)
}

func (h cancelOn) WithAttrs(as []slog.Attr) slog.Handler {
	return cancelOn{h.Handler.WithAttrs(as), h.msg, h.cancel}
}

func (h cancelOn) WithGroup(name string) slog.Handler {
	return cancelOn{h.Handler.WithGroup(name), h.msg, h.cancel}
}

// TestStopAsItStartsWarnsNothing: a pool whose context ends just after it
// started stops quietly: the calls its stop cut short are not reported as
// failures (an operator alerting on warnings would be paged by every quick
// restart).
func TestStopAsItStartsWarnsNothing(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg.Logger = slog.New(cancelOn{Handler: cfg.Logger.Handler(), msg: "pool started", cancel: cancel})
	p := e.pool(cfg)
	if err := worker.Register(p, jobs.WorkFunc[plainArgs](func(context.Context, *jobs.Job[plainArgs]) error { return nil })); err != nil {
		t.Fatal(err)
	}
	if err := p.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
	for _, l := range strings.Split(e.logs.String(), "\n") {
		if strings.Contains(l, `"level":"WARN"`) || strings.Contains(l, `"level":"ERROR"`) {
			t.Errorf("logged while stopping as it started: %s", l)
		}
	}
}

// warnings is a slog handler sending each warning's message and
// attributes, as one line, to c (dropped when c is full).
type warnings struct{ c chan string }

func (w warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (w warnings) Handle(_ context.Context, r slog.Record) error {
	line := r.Message
	r.Attrs(func(a slog.Attr) bool {
		line += " " + a.String()
		return true
	})
	select {
	case w.c <- line:
	default: // the test stopped reading
	}
	return nil
}

func (w warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w warnings) WithGroup(string) slog.Handler      { return w }

// TestPeriodicJobWithoutAWorkerWarns: a pool registering a periodic job
// of a kind it has no worker for (meant for another pool, or a forgotten
// Register) says so when it starts, naming the schedule and the kind; a
// periodic job whose kind it runs is not named.
func TestPeriodicJobWithoutAWorkerWarns(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	logs := make(chan string, 100)
	cfg.Logger = slog.New(warnings{logs})
	p := e.pool(cfg)
	if err := worker.Register(p, jobs.WorkFunc[plainArgs](func(context.Context, *jobs.Job[plainArgs]) error { return nil })); err != nil {
		t.Fatal(err)
	}
	if err := p.AddPeriodic(
		worker.Periodic(worker.Every(time.Hour), plainArgs{}, worker.ScheduleID("served")),
		worker.Periodic(worker.Every(time.Hour), effectArgs{Name: "tick"}, worker.ScheduleID("elsewhere"))); err != nil {
		t.Fatal(err)
	}
	e.start(p)
	deadline := time.After(testsignal.DefaultTimeout)
	for {
		select {
		case line := <-logs:
			if strings.Contains(line, "schedule=served") {
				t.Fatalf("warned of a periodic job the pool has a worker for: %s", line)
			}
			if strings.Contains(line, "schedule=elsewhere") {
				if !strings.Contains(line, "kind=effect") || !strings.Contains(line, "no worker") {
					t.Fatalf("warning %q: want it to say the kind effect has no worker", line)
				}
				return
			}
		case <-deadline:
			t.Fatal("no warning of a periodic job whose kind has no worker in the pool")
		}
	}
}
