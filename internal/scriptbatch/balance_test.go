package scriptbatch_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/scriptbatch"
	"github.com/fencedq/fencedq/internal/testsignal"
)

// gate holds every script call or pipeline of them the client sends until
// the test releases that one (a new connection's set-up commands pass).
type gate struct{ arrived chan held }

// held is one call or pipeline waiting at the gate.
type held struct {
	n       int
	release chan struct{}
}

func newGate() *gate { return &gate{arrived: make(chan held, 64)} }

func (g *gate) hold(n int) {
	h := held{n: n, release: make(chan struct{})}
	g.arrived <- h
	<-h.release
}

func (g *gate) DialHook(next redis.DialHook) redis.DialHook { return next }
func (g *gate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if isScript(cmd) {
			g.hold(1)
		}
		return next(ctx, cmd)
	}
}
func (g *gate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) > 0 && isScript(cmds[0]) {
			g.hold(len(cmds))
		}
		return next(ctx, cmds)
	}
}

func isScript(cmd redis.Cmder) bool { return cmd.Name() == "evalsha" || cmd.Name() == "eval" }

// next waits for the next call or pipeline to reach the gate and returns
// it, still held, with its size.
func (g *gate) next(t *testing.T) held {
	t.Helper()
	select {
	case h := <-g.arrived:
		return h
	case <-timeout(t):
	}
	t.Fatal("no command reached the server")
	return held{}
}

// pass lets h through.
func (h held) pass() { close(h.release) }

// result waits for a call's outcome, failing the test if none comes.
func result(t *testing.T, c <-chan error) error {
	t.Helper()
	select {
	case err := <-c:
		return err
	case <-timeout(t):
	}
	t.Fatal("a call did not return")
	return nil
}

func timeout(t *testing.T) <-chan struct{} {
	ctx, cancel := context.WithTimeout(context.Background(), testsignal.Timeout())
	t.Cleanup(cancel)
	return ctx.Done()
}

func TestBalancedWaitsForAQueueAsLargeAsThePipelineInFlight(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Options{})
	rdb := client(t, srv)
	if err := incr.Load(ctx, rdb).Err(); err != nil {
		t.Fatal(err)
	}
	g := newGate()
	rdb.AddHook(g)
	b := scriptbatch.New(rdb, scriptbatch.Options{InFlight: 2, Balance: true})
	direct, queued := scriptbatch.InitHooks(b, t)

	results := make(chan error, 16)
	call := func(i int) <-chan error {
		done := make(chan error, 1)
		go func() {
			v, err := b.Run(ctx, incr, []string{"n"}, fmt.Sprint(i)).Text()
			if err == nil && v != fmt.Sprint(i) {
				err = fmt.Errorf("call %d got %q", i, v)
			}
			done <- err
			results <- err
		}()
		return done
	}
	// A goes out at once; B, queued behind it with a free slot, is as
	// large as A: it goes out on the second slot.
	call(0)
	direct.WaitOrTimeout()
	a := g.next(t)
	if a.n != 1 {
		t.Fatalf("first call went out in %d commands", a.n)
	}
	b1 := call(1)
	queued.WaitOrTimeout()
	bh := g.next(t)
	if bh.n != 1 {
		t.Fatalf("second call went out in %d commands", bh.n)
	}
	// The budget is used up: C, D, E queue, and go together when A is back.
	for i := 2; i < 5; i++ {
		call(i)
	}
	queued.WaitOrTimeoutN(3)
	a.pass()
	ce := g.next(t)
	if ce.n != 3 {
		t.Fatalf("the three queued calls went out in a pipeline of %d", ce.n)
	}
	bh.pass() // B's slot is free again, C-E still in flight
	if err := result(t, b1); err != nil {
		t.Fatal(err)
	}
	// A slot is free and a pipeline of 3 is in flight: F and G wait, H
	// makes the queue as large, and the three go together.
	call(5)
	call(6)
	queued.WaitOrTimeoutN(2)
	call(7)
	queued.WaitOrTimeout()
	fh := g.next(t)
	if fh.n != 3 {
		t.Fatalf("F, G, H went out in a pipeline of %d, want 3 (a free slot sent calls before the queue was as large as the pipeline in flight)", fh.n)
	}
	ce.pass()
	fh.pass()
	for range 8 {
		if err := result(t, results); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := rdb.Get(ctx, "n").Int(); err != nil || n != 8 {
		t.Fatalf("counter %d, %v; want 8", n, err)
	}
}

func TestBalancedLastSlotSendsWhatIsQueued(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Options{})
	rdb := client(t, srv)
	if err := incr.Load(ctx, rdb).Err(); err != nil {
		t.Fatal(err)
	}
	g := newGate()
	rdb.AddHook(g)
	b := scriptbatch.New(rdb, scriptbatch.Options{InFlight: 2, Balance: true})
	direct, queued := scriptbatch.InitHooks(b, t)
	run := func(i int) <-chan error {
		done := make(chan error, 1)
		go func() { done <- b.Run(ctx, incr, []string{"n"}, fmt.Sprint(i)).Err() }()
		return done
	}
	// A pipeline of 1 in flight (A) and one of 3 (B, then C-E queued
	// behind both slots and sent when A came back).
	a := run(0)
	direct.WaitOrTimeout()
	ah := g.next(t)
	run(1)
	queued.WaitOrTimeout()
	bh := g.next(t)
	rest := []<-chan error{run(2), run(3), run(4)}
	queued.WaitOrTimeoutN(3)
	ah.pass() // C-E go out
	if err := result(t, a); err != nil {
		t.Fatal(err)
	}
	ce := g.next(t)
	if ce.n != 3 {
		t.Fatalf("pipeline of %d", ce.n)
	}
	// F queues (smaller than the pipelines in flight); when the last
	// pipeline in flight is back, its slot sends F whatever its size.
	f := run(5)
	queued.WaitOrTimeout()
	bh.pass()
	ce.pass()
	for _, c := range rest {
		if err := result(t, c); err != nil {
			t.Fatal(err)
		}
	}
	fh := g.next(t)
	if fh.n != 1 {
		t.Fatalf("F went out in %d commands", fh.n)
	}
	fh.pass()
	if err := result(t, f); err != nil {
		t.Fatal(err)
	}
}
