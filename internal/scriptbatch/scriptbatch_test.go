package scriptbatch_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/scriptbatch"
)

// slow busy-waits ARGV[1] milliseconds inside Redis: while it runs, every
// other call must queue.
var slow = redis.NewScript(`
local t = redis.call('TIME')
local stop = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[1])
repeat
  t = redis.call('TIME')
until tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) >= stop
return 1`)

// incr counts its calls in KEYS[1] and echoes ARGV[1].
var incr = redis.NewScript(`redis.call('INCR', KEYS[1]) return ARGV[1]`)

// pipeSizes records the size of every pipeline a client sends.
type pipeSizes struct {
	mu    sync.Mutex
	sizes []int
}

func (h *pipeSizes) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *pipeSizes) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return next
}
func (h *pipeSizes) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.mu.Lock()
		h.sizes = append(h.sizes, len(cmds))
		h.mu.Unlock()
		return next(ctx, cmds)
	}
}

func (h *pipeSizes) largest() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := 0
	for _, n := range h.sizes {
		m = max(m, n)
	}
	return m
}

// startSlow runs the slow script through b and returns once it is in
// flight (the server is busy running it).
func startSlow(t *testing.T, ctx context.Context, b *scriptbatch.Batcher, addr string, ms int) <-chan error {
	t.Helper()
	probe := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	defer probe.Close()
	if err := slow.Load(ctx, probe).Err(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx, slow, []string{"x"}, ms).Err() }()
	// A busy server answers other clients with BUSY only past
	// lua-time-limit, so watch for the script through a short timeout.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		pctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		err := probe.Ping(pctx).Err()
		cancel()
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, context.DeadlineExceeded) {
			return done
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("the slow script never blocked the server")
	return nil
}

func TestCallsQueuedBehindOneInFlightShareAPipeline(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Options{})
	rdb := srv.Client()
	hook := &pipeSizes{}
	rdb.AddHook(hook)
	b := scriptbatch.New(rdb)
	if err := incr.Load(ctx, rdb).Err(); err != nil {
		t.Fatal(err)
	}
	slowDone := startSlow(t, ctx, b, rdb.Options().Addr, 300)

	const n = 40
	runIncrs(t, ctx, b, rdb, n, slowDone)
	// All n calls were queued while the slow one ran; the first flush
	// (after a yield) takes what is queued, so most share one pipeline.
	if l := hook.largest(); l < n/2 {
		t.Fatalf("largest pipeline had %d calls (sizes %v); want at least %d of the %d queued calls together", l, hook.sizes, n/2, n)
	}
}

func TestCancelledQueuedCallIsNotSent(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Options{})
	rdb := srv.Client()
	b := scriptbatch.New(rdb)
	slowDone := startSlow(t, ctx, b, rdb.Options().Addr, 300)

	cctx, cancel := context.WithCancel(ctx)
	got := make(chan error, 1)
	go func() { got <- b.Run(cctx, incr, []string{"count"}, "x").Err() }()
	time.Sleep(50 * time.Millisecond) // let it queue
	cancel()
	if err := <-got; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call returned %v, want context.Canceled", err)
	}
	if err := <-slowDone; err != nil {
		t.Fatal(err)
	}
	// A later call proves the queue was flushed, and that the cancelled
	// call did not run.
	if err := b.Run(ctx, incr, []string{"count"}, "y").Err(); err != nil {
		t.Fatal(err)
	}
	if n, _ := rdb.Get(ctx, "count").Int(); n != 1 {
		t.Fatalf("count = %d, want 1: the cancelled call ran", n)
	}
}

func TestScriptMissingFromServerCacheIsLoaded(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Options{})
	rdb := srv.Client()
	b := scriptbatch.New(rdb)
	slowDone := startSlow(t, ctx, b, rdb.Options().Addr, 200)
	// incr was never loaded on this server: the queued calls' EVALSHA
	// fails with NOSCRIPT and each is run again with its source.
	runIncrs(t, ctx, b, rdb, 10, slowDone)
}

// runIncrs makes n concurrent incr calls through b while the slow call
// holds the server, then checks that each got its own reply and ran once.
func runIncrs(t *testing.T, ctx context.Context, b *scriptbatch.Batcher, rdb *redis.Client, n int, slowDone <-chan error) {
	t.Helper()
	var wg sync.WaitGroup
	replies := make([]string, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			replies[i], errs[i] = b.Run(ctx, incr, []string{"count"}, fmt.Sprint(i)).Text()
		}()
	}
	wg.Wait()
	if err := <-slowDone; err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if errs[i] != nil || replies[i] != fmt.Sprint(i) {
			t.Fatalf("call %d: reply %q, error %v", i, replies[i], errs[i])
		}
	}
	if got, _ := rdb.Get(ctx, "count").Int(); got != n {
		t.Fatalf("count = %d, want %d: a call ran twice or not at all", got, n)
	}
}
