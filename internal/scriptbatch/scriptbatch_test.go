package scriptbatch_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/luafunc"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/scriptbatch"
	"github.com/fencedq/fencedq/internal/testsignal"
)

// hold is the call a test keeps in flight while the server is paused.
var hold = redis.NewScript(`return 1`)

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

// client returns a client of srv whose replies may take as long as a
// test's waits (while the server is paused), not go-redis's default 3 s.
func client(t *testing.T, srv *redistest.Server) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, ReadTimeout: testsignal.Timeout()})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// one is the options of a batcher with one call or pipeline in flight.
var one = scriptbatch.Options{InFlight: 1}

// holdInFlight pauses the server (SIGSTOP) and sends one call through b
// (made with InFlight 1). The call goes out at once and waits for the
// server, so b queues every call made until resume lets the server answer;
// done then reports the held call's outcome.
func holdInFlight(t *testing.T, ctx context.Context, b *scriptbatch.Batcher, srv *redistest.Server, direct *testsignal.Signal[struct{}]) (resume func(), done <-chan error) {
	t.Helper()
	if err := hold.Load(ctx, srv.Client()).Err(); err != nil {
		t.Fatal(err)
	}
	srv.Pause()
	t.Cleanup(srv.Resume) // a failed test must not leave the server stopped
	held := make(chan error, 1)
	go func() { held <- b.Run(ctx, hold, []string{"x"}).Err() }()
	direct.WaitOrTimeout()
	return srv.Resume, held
}

func TestCallsQueuedBehindOneInFlightShareAPipeline(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Options{})
	rdb := client(t, srv)
	hook := &pipeSizes{}
	rdb.AddHook(hook)
	b := scriptbatch.New(rdb, one)
	direct, queued := scriptbatch.InitHooks(b, t)
	if err := incr.Load(ctx, rdb).Err(); err != nil {
		t.Fatal(err)
	}
	resume, held := holdInFlight(t, ctx, b, srv, direct)

	const n = 40
	runIncrs(t, ctx, b, rdb, incr, n, func() {
		queued.WaitOrTimeoutN(n)
		resume()
	}, held)
	// All n calls were queued while the held one was in flight; the flush
	// after it takes what is queued (up to MaxBatch), so all n share one
	// pipeline.
	if l := hook.largest(); l != n {
		t.Fatalf("largest pipeline had %d calls (sizes %v); want the %d queued calls together", l, hook.sizes, n)
	}
}

func TestCancelledQueuedCallIsNotSent(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Options{})
	rdb := client(t, srv)
	b := scriptbatch.New(rdb, one)
	direct, queued := scriptbatch.InitHooks(b, t)
	resume, held := holdInFlight(t, ctx, b, srv, direct)

	cctx, cancel := context.WithCancel(ctx)
	got := make(chan error, 1)
	go func() { got <- b.Run(cctx, incr, []string{"count"}, "x").Err() }()
	queued.WaitOrTimeout()
	cancel()
	if err := <-got; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call returned %v, want context.Canceled", err)
	}
	resume()
	if err := <-held; err != nil {
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
	rdb := client(t, srv)
	b := scriptbatch.New(rdb, one)
	direct, queued := scriptbatch.InitHooks(b, t)
	resume, held := holdInFlight(t, ctx, b, srv, direct)
	// incr was never loaded on this server: the queued calls' EVALSHA
	// fails with NOSCRIPT and each is run again with its source.
	const n = 10
	runIncrs(t, ctx, b, rdb, incr, n, func() {
		queued.WaitOrTimeoutN(n)
		resume()
	}, held)
}

// incrLibrary returns incr as the function of a library of its own.
func incrLibrary(name string) (*luafunc.Library, *luafunc.Script) {
	lib := luafunc.NewLibrary(func() (string, string) {
		return name, "#!lua name=" + name + "\nredis.register_function('" + name +
			"_incr', function(keys, args) redis.call('INCR', keys[1]) return args[1] end)\n"
	})
	return lib, luafunc.NewScript(lib, "incr", `redis.call('INCR', KEYS[1]) return ARGV[1]`)
}

// A pipeline of calls to a function library the server lacks loads the
// library once and sends the calls again by name; on a server without
// functions they run as plain scripts.
func TestFunctionLibraryMissingFromServerIsLoaded(t *testing.T) {
	for _, noFunctions := range []bool{false, true} {
		t.Run(fmt.Sprintf("no functions %v", noFunctions), func(t *testing.T) {
			ctx := context.Background()
			srv := redistest.Start(t, redistest.Options{NoFunctions: noFunctions})
			rdb := client(t, srv)
			b := scriptbatch.New(rdb, one)
			direct, queued := scriptbatch.InitHooks(b, t)
			resume, held := holdInFlight(t, ctx, b, srv, direct)
			lib, fn := incrLibrary(fmt.Sprintf("fqtest_batch_%v", noFunctions))
			const n = 10
			runIncrs(t, ctx, b, rdb, fn, n, func() {
				queued.WaitOrTimeoutN(n)
				resume()
			}, held)
			if lib.Available() == noFunctions {
				t.Fatalf("library available %v on a server with functions %v", lib.Available(), !noFunctions)
			}
			if noFunctions {
				return
			}
			info, err := rdb.Info(ctx, "commandstats").Result()
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(info, "cmdstat_function|load:calls=1,") || strings.Contains(info, "cmdstat_eval:") {
				t.Fatalf("want one FUNCTION LOAD and no EVAL:\n%s", info)
			}
		})
	}
}

// runIncrs makes n concurrent incr calls through b while a held call keeps
// it busy, calls queuedAll (which waits for them to queue and lets the
// held call finish), then checks that each got its own reply and ran once.
func runIncrs(t *testing.T, ctx context.Context, b *scriptbatch.Batcher, rdb *redis.Client, script scriptbatch.Script, n int, queuedAll func(), held <-chan error) {
	t.Helper()
	var wg sync.WaitGroup
	replies := make([]string, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			replies[i], errs[i] = b.Run(ctx, script, []string{"count"}, fmt.Sprint(i)).Text()
		}()
	}
	queuedAll()
	wg.Wait()
	if err := <-held; err != nil {
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

// push appends ARGV[1] to the list KEYS[1].
var push = redis.NewScript(`redis.call('RPUSH', KEYS[1], ARGV[1]) return ARGV[1]`)

func TestInFlightBudgetThenSharedPipeline(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Options{})
	rdb := client(t, srv)
	hook := &pipeSizes{}
	rdb.AddHook(hook)
	const budget = 3
	b := scriptbatch.New(rdb, scriptbatch.Options{InFlight: budget})
	direct, queued := scriptbatch.InitHooks(b, t)
	if err := incr.Load(ctx, rdb).Err(); err != nil {
		t.Fatal(err)
	}
	resume, held := holdInFlight(t, ctx, b, srv, direct)
	// budget-1 more calls go out at once beside the held one, and wait for
	// the stopped server too.
	var wg sync.WaitGroup
	for i := range budget - 1 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := b.Run(ctx, incr, []string{"direct"}, fmt.Sprint(i)).Err(); err != nil {
				t.Error(err)
			}
		}()
	}
	direct.WaitOrTimeoutN(budget - 1)
	const n = 30
	runIncrs(t, ctx, b, rdb, incr, n, func() {
		queued.WaitOrTimeoutN(n)
		direct.RequireEmpty() // the budget was used up: nothing more went out at once
		resume()
	}, held)
	wg.Wait()
	if l := hook.largest(); l != n {
		t.Fatalf("largest pipeline had %d calls (sizes %v); want the %d queued calls together", l, hook.sizes, n)
	}
}

func TestOneInFlightKeepsTheOrderOfCalls(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Options{})
	rdb := client(t, srv)
	b := scriptbatch.New(rdb, one)
	direct, queued := scriptbatch.InitHooks(b, t)
	if err := push.Load(ctx, rdb).Err(); err != nil {
		t.Fatal(err)
	}
	resume, held := holdInFlight(t, ctx, b, srv, direct)
	const n = 20
	errs := make(chan error, n)
	for i := range n {
		// Each call is queued before the next is made: the order made.
		go func() { errs <- b.Run(ctx, push, []string{"order"}, fmt.Sprint(i)).Err() }()
		if got := queued.WaitOrTimeout(); got != i+1 {
			t.Fatalf("queue length %d after call %d", got, i)
		}
	}
	resume()
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	got, err := rdb.LRange(ctx, "order", 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range got {
		if v != fmt.Sprint(i) {
			t.Fatalf("calls ran in the order %v, want the order they were made", got)
		}
	}
	if len(got) != n {
		t.Fatalf("%d calls ran, want %d", len(got), n)
	}
}

// errUnacked is what the test's Append check reports.
var errUnacked = errors.New("not acknowledged")

func TestAppendAddsOneCommandPerPipelineAndItsCheckFailsTheCalls(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Options{})
	rdb := client(t, srv)
	var mu sync.Mutex
	var pipes []int // each pipeline's calls, counted by its appended command
	fail := false
	b := scriptbatch.New(rdb, scriptbatch.Options{InFlight: 1, Append: func(ctx context.Context, pipe redis.Pipeliner) func() error {
		n := pipe.Len()
		cmd := pipe.Incr(ctx, "appended")
		return func() error {
			mu.Lock()
			defer mu.Unlock()
			if cmd.Err() != nil {
				return cmd.Err()
			}
			pipes = append(pipes, n)
			if fail {
				return errUnacked
			}
			return nil
		}
	}})
	direct, queued := scriptbatch.InitHooks(b, t)
	// incr is not loaded: the first pipeline's EVALSHA fails with NOSCRIPT
	// and the call is sent again with its source, in a pipeline of its own
	// with the appended command.
	if got, err := b.Run(ctx, incr, []string{"first"}, "a").Text(); err != nil || got != "a" {
		t.Fatalf("lone call: reply %q, error %v", got, err)
	}
	mu.Lock()
	if len(pipes) != 2 || pipes[0] != 1 || pipes[1] != 1 {
		t.Fatalf("pipelines seen by the check %v, want [1 1]: the NOSCRIPT pipeline and its retry, each with the call", pipes)
	}
	pipes = nil
	mu.Unlock()

	resume, held := holdInFlight(t, ctx, b, srv, direct)
	const n = 10
	runIncrs(t, ctx, b, rdb, incr, n, func() {
		queued.WaitOrTimeoutN(n)
		resume()
	}, held)
	// The held call and the queued calls: one command appended to each
	// pipeline, and a check run for each.
	if v, _ := rdb.Get(ctx, "appended").Int(); v != 4 {
		t.Fatalf("appended command ran %d times, want 4 (two pipelines for the first call, the held one's, the batch's)", v)
	}
	mu.Lock()
	if len(pipes) != 2 || pipes[1] != n {
		t.Fatalf("pipelines seen by the check %v, want the held call's and one of %d calls", pipes, n)
	}
	fail = true
	mu.Unlock()

	// A failing check fails the calls, whose scripts ran; the reply stays.
	got, err := b.Run(ctx, incr, []string{"count"}, "b").Result()
	if !errors.Is(err, errUnacked) {
		t.Fatalf("call under a failing check returned %v, want %v", err, errUnacked)
	}
	if got != "b" {
		t.Fatalf("unacknowledged call's reply %v, want the script's reply %q beside the error", got, "b")
	}
	if v, _ := rdb.Get(ctx, "count").Int(); v != n+1 {
		t.Fatalf("count = %d, want %d: the unacknowledged call's script did not run", v, n+1)
	}
}

// On Redis Cluster with Append set, a batch is split by the master owning
// each call's first key: each master gets one pipeline with the appended
// command, so a WAIT runs on the node (and connection) that ran the writes
// it is about. Every call succeeds (none was sent to a node that does not
// own its slot) and the appended command runs once per node pipeline.
func TestAppendOnClusterSendsOnePipelinePerNode(t *testing.T) {
	ctx := context.Background()
	cl := redistest.StartCluster(t)
	rdb := cl.Client()
	var mu sync.Mutex
	appended := 0
	b := scriptbatch.New(rdb, scriptbatch.Options{InFlight: 1, Append: func(ctx context.Context, pipe redis.Pipeliner) func() error {
		cmd := pipe.Do(ctx, "WAIT", 0, 0) // no replicas: answers 0 at once
		return func() error {
			mu.Lock()
			defer mu.Unlock()
			appended++
			return cmd.Err()
		}
	}})
	direct, queued := scriptbatch.InitHooks(b, t)
	node := scriptbatch.InitNodeHook(b, t)
	// Keys spread over the three masters.
	keys := make([]string, 30)
	owner := map[string]string{}
	for i := range keys {
		keys[i] = fmt.Sprintf("k{%d}", i)
		m, err := rdb.MasterForKey(ctx, keys[i])
		if err != nil {
			t.Fatal(err)
		}
		owner[keys[i]] = m.Options().Addr
	}
	// Load the script everywhere first, so each call goes out once.
	if err := rdb.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		return incr.Load(ctx, c).Err()
	}); err != nil {
		t.Fatal(err)
	}
	// Hold a call in flight (its node paused), queue the others behind
	// it, then let them go: one batch over the three masters.
	var pausedNode *redistest.Server
	heldKey := "held{0}"
	hm, err := rdb.MasterForKey(ctx, heldKey)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range cl.Nodes {
		if n.Addr == hm.Options().Addr {
			pausedNode = n
		}
	}
	pausedNode.Pause()
	held := make(chan error, 1)
	go func() { held <- b.Run(ctx, incr, []string{heldKey}, "h").Err() }()
	direct.WaitOrTimeout()
	var wg sync.WaitGroup
	errs := make([]error, len(keys))
	for i, k := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = b.Run(ctx, incr, []string{k}, k).Err()
		}()
	}
	queued.WaitOrTimeoutN(len(keys))
	pausedNode.Resume()
	wg.Wait()
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("call on %s: %v (sent to a node not owning its slot?)", keys[i], err)
		}
	}
	for _, k := range keys {
		if v, err := rdb.Get(ctx, k).Int(); err != nil || v != 1 {
			t.Fatalf("%s = %d (%v), want 1", k, v, err)
		}
	}
	sent := node.Drain()
	calls := 0
	perNode := map[string]int{}
	for _, p := range sent {
		calls += p.Calls
		perNode[p.Addr] += p.Calls
	}
	if calls != len(keys)+1 {
		t.Fatalf("node pipelines carried %d calls, want %d", calls, len(keys)+1)
	}
	want := map[string]int{hm.Options().Addr: 1}
	for _, k := range keys {
		want[owner[k]]++
	}
	if fmt.Sprint(perNode) != fmt.Sprint(want) {
		t.Fatalf("calls per node %v, want %v (each call on the master owning its key)", perNode, want)
	}
	if len(want) != 3 {
		t.Fatalf("keys fell on %d masters, want 3", len(want))
	}
	if len(sent) != 4 {
		t.Fatalf("%d node pipelines, want 4: the held call's and one per master for the batch", len(sent))
	}
	mu.Lock()
	defer mu.Unlock()
	if appended != len(sent) {
		t.Fatalf("appended command ran %d times for %d node pipelines", appended, len(sent))
	}
}
