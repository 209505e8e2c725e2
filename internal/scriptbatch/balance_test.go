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
// the test lets it go, reporting each one's size as it arrives (a new
// connection's set-up commands pass).
type gate struct {
	arrived chan int
	release chan struct{}
}

func newGate() *gate { return &gate{arrived: make(chan int, 64), release: make(chan struct{}, 64)} }

func (g *gate) DialHook(next redis.DialHook) redis.DialHook { return next }
func (g *gate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !isScript(cmd) {
			return next(ctx, cmd)
		}
		g.arrived <- 1
		<-g.release
		return next(ctx, cmd)
	}
}
func (g *gate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) == 0 || !isScript(cmds[0]) {
			return next(ctx, cmds)
		}
		g.arrived <- len(cmds)
		<-g.release
		return next(ctx, cmds)
	}
}

func isScript(cmd redis.Cmder) bool { return cmd.Name() == "evalsha" || cmd.Name() == "eval" }

// next waits for the next command or pipeline to reach the gate and
// returns its size.
func (g *gate) next(t *testing.T) int {
	t.Helper()
	select {
	case n := <-g.arrived:
		return n
	case <-t.Context().Done():
	case <-timeout(t):
	}
	t.Fatal("no command reached the server")
	return 0
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
	if n := g.next(t); n != 1 {
		t.Fatalf("first call went out in %d commands", n)
	}
	b1 := call(1)
	queued.WaitOrTimeout()
	if n := g.next(t); n != 1 {
		t.Fatalf("second call went out in %d commands", n)
	}
	// The budget is used up: C, D, E queue, and go together when A is back.
	for i := 2; i < 5; i++ {
		call(i)
	}
	queued.WaitOrTimeoutN(3)
	g.release <- struct{}{} // A
	if n := g.next(t); n != 3 {
		t.Fatalf("the three queued calls went out in a pipeline of %d", n)
	}
	g.release <- struct{}{} // B: its slot is free again, C-E still in flight
	if err := <-b1; err != nil {
		t.Fatal(err)
	}
	// A slot is free and a pipeline of 3 is in flight: F and G wait, H
	// makes the queue as large, and the three go together.
	call(5)
	call(6)
	queued.WaitOrTimeoutN(2)
	call(7)
	queued.WaitOrTimeout()
	if n := g.next(t); n != 3 {
		t.Fatalf("F, G, H went out in a pipeline of %d, want 3 (a free slot sent calls before the queue was as large as the pipeline in flight)", n)
	}
	g.release <- struct{}{}
	g.release <- struct{}{}
	for range 8 {
		if err := <-results; err != nil {
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
	g.next(t)
	run(1)
	queued.WaitOrTimeout()
	g.next(t)
	rest := []<-chan error{run(2), run(3), run(4)}
	queued.WaitOrTimeoutN(3)
	g.release <- struct{}{} // A; C-E go out
	if err := <-a; err != nil {
		t.Fatal(err)
	}
	if n := g.next(t); n != 3 {
		t.Fatalf("pipeline of %d", n)
	}
	// F queues (smaller than the pipelines in flight); when the last
	// pipeline in flight is back, its slot sends F whatever its size.
	f := run(5)
	queued.WaitOrTimeout()
	g.release <- struct{}{} // B
	g.release <- struct{}{} // C-E
	for _, c := range rest {
		if err := <-c; err != nil {
			t.Fatal(err)
		}
	}
	if n := g.next(t); n != 1 {
		t.Fatalf("F went out in %d commands", n)
	}
	g.release <- struct{}{}
	if err := <-f; err != nil {
		t.Fatal(err)
	}
}
