package lease_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/model"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/lease"
)

var (
	linOps     = flag.Int("lin.ops", 60, "linearizability: operations per client goroutine")
	linClients = flag.Int("lin.clients", 3, "linearizability: client goroutines per process")
	linProcs   = flag.Int("lin.procs", 2, "linearizability: OS processes running clients (the test binary re-executed), at least 2")
	linRuns    = flag.Int("lin.runs", 1, "linearizability: histories per test")
)

// TestMain doubles as a helper process for the linearizability test: with
// model.HelperEnv set, the test binary runs lease clients and writes their
// history instead of running the tests.
func TestMain(m *testing.M) {
	if h, ok := model.HelperFromEnv(); ok {
		os.Exit(runLeaseHelper(h))
	}
	os.Exit(m.Run())
}

const linResources = 3

// linRedis is a client that never retries a command by itself: a command
// whose connection broke has an unknown outcome, and is recorded so.
func linRedis(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
}

func runLeaseHelper(h model.Helper) int {
	rdb := linRedis(h.Addr)
	defer rdb.Close()
	if h.Broken != "" {
		defer lease.UseBrokenScript(h.Broken)()
	}
	m := lease.NewManager(rdb, lease.Config{Namespace: h.NS})
	rec := &model.Recorder{}
	var wg sync.WaitGroup
	for i := range h.Clients {
		wg.Go(func() { leaseClient(m, rdb, rec, h.Proc, i, h.Ops, nil) })
	}
	wg.Wait()
	if err := rec.WriteFile(h.Out); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// leaseClient acquires random resources; with a lease it may renew it,
// release it with a stale token, and releases it; every call is recorded.
// halfway (idempotent) is called once half its operations are done.
func leaseClient(m *lease.Manager, rdb *redis.Client, rec *model.Recorder, proc, client, n int, halfway func()) {
	ctx := context.Background()
	owner := fmt.Sprintf("p%d-c%d", proc, client)
	rng := rand.New(rand.NewPCG(uint64(proc), uint64(client)))
	if halfway == nil {
		halfway = func() {}
	}
	defer halfway()
	done := 0
	record := func(op model.Op, ok bool, err error, lost error) {
		op.Proc, op.Client, op.Owner, op.Return, op.OK = proc, client, owner, model.Now(), ok
		if err != nil && !errors.Is(err, lost) {
			op.Unknown = true
			_ = redistest.WaitAnswer(ctx, rdb) // a caller retries once its server is back
		}
		rec.Add(op)
		if done++; done >= n/2 {
			halfway()
		}
	}
	for done < n {
		res := fmt.Sprintf("r%d", rng.IntN(linResources))
		op := model.Op{Kind: model.KindAcquire, Key: res, Call: model.Now()}
		l, err := m.Acquire(ctx, res, owner, 30*time.Second)
		var held *lease.HeldError
		if errors.As(err, &held) {
			op.Holder, op.Current = held.Owner, uint64(held.Token)
		}
		if l != nil {
			op.Token = uint64(l.Token)
		}
		record(op, err == nil, err, lease.ErrHeld)
		if err != nil {
			continue
		}
		if rng.IntN(2) == 0 {
			op := model.Op{Kind: model.KindRenew, Key: res, Token: uint64(l.Token), Call: model.Now()}
			err := m.Renew(ctx, l, 30*time.Second)
			record(op, err == nil, err, lease.ErrLost)
		}
		if rng.IntN(3) == 0 {
			stale := &lease.Lease{Resource: res, Owner: owner, Token: l.Token - 1}
			op := model.Op{Kind: model.KindRelease, Key: res, Token: uint64(stale.Token), Call: model.Now()}
			err := m.Release(ctx, stale)
			record(op, err == nil, err, lease.ErrNotHeld)
		}
		op = model.Op{Kind: model.KindRelease, Key: res, Token: uint64(l.Token), Call: model.Now()}
		err = m.Release(ctx, l)
		record(op, err == nil, err, lease.ErrNotHeld)
	}
}

// leaseHistory runs one concurrent history on a fresh redis-server without
// persistence: *linProcs processes (this one and helpers) of *linClients
// clients each; with restart, Redis is restarted (losing every key) when
// this process's first client is halfway.
func leaseHistory(t *testing.T, restart bool, broken string) []model.Op {
	srv := redistest.Start(t, redistest.Options{})
	rdb := linRedis(srv.Addr)
	defer rdb.Close()
	ns := redistest.Namespace(t)
	m := lease.NewManager(rdb, lease.Config{Namespace: ns})
	rec := &model.Recorder{}
	if broken != "" {
		defer lease.UseBrokenScript(broken)()
	}
	var cmds []*exec.Cmd
	var files []string
	for p := 1; p < max(*linProcs, 2); p++ {
		out := filepath.Join(t.TempDir(), fmt.Sprintf("proc%d.jsonl", p))
		cmd, err := model.Helper{Addr: srv.Addr, NS: ns, Proc: p, Clients: *linClients, Ops: *linOps, Broken: broken, Out: out}.Start()
		if err != nil {
			t.Fatal(err)
		}
		cmds, files = append(cmds, cmd), append(files, out)
	}
	half := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	for i := range *linClients {
		halfway := func() {}
		if i == 0 {
			halfway = func() { once.Do(func() { close(half) }) }
		}
		wg.Go(func() { leaseClient(m, rdb, rec, 0, i, *linOps, halfway) })
	}
	if restart {
		<-half
		call := model.Now()
		srv.Restart()
		rec.Add(model.Op{Client: 999, Kind: model.KindRestart, OK: true, Call: call, Return: model.Now()})
	}
	wg.Wait()
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("helper process: %v", err)
		}
	}
	ops, err := model.Merge(rec.Ops(), files...)
	if err != nil {
		t.Fatal(err)
	}
	return ops
}

func summary(ops []model.Op) string {
	n := map[string]int{}
	for _, op := range ops {
		k := op.Kind
		switch {
		case op.Unknown:
			k += "?"
		case !op.OK:
			k += "-refused"
		}
		n[k]++
	}
	return fmt.Sprintf("%d operations %v", len(ops), n)
}

func TestLinearizabilityLease(t *testing.T) {
	for _, restart := range []bool{false, true} {
		t.Run(fmt.Sprintf("restart=%v", restart), func(t *testing.T) {
			for run := range *linRuns {
				start := time.Now()
				ops := leaseHistory(t, restart, "")
				if res := model.Linearizable(model.LeaseModel(), ops, time.Minute); res != porcupine.Ok {
					t.Fatalf("history %d (%s) is not linearizable: %v", run, summary(ops), res)
				}
				if bad := model.CheckHistory(ops); len(bad) > 0 {
					t.Fatalf("history %d breaks invariants:\n%s", run, strings.Join(bad, "\n"))
				}
				t.Logf("history %d: %s, linearizable, invariants hold (%v)", run, summary(ops), time.Since(start).Round(time.Millisecond))
			}
		})
	}
}

// TestLinearizabilityCatchesBrokenAcquire requires the linearizability
// check to reject a history of a lease that ignores the live holder.
func TestLinearizabilityCatchesBrokenAcquire(t *testing.T) {
	ops := leaseHistory(t, false, "acquire-ignore-holder")
	if res := model.Linearizable(model.LeaseModel(), ops, time.Minute); res != porcupine.Illegal {
		t.Fatalf("a lease with two holders at once passed the linearizability check: %v (%s)", res, summary(ops))
	}
}

// TestInvariantsCatchBrokenAcquire requires the invariant check to reject a
// history of a lease that hands a resource's token out again.
func TestInvariantsCatchBrokenAcquire(t *testing.T) {
	ops := leaseHistory(t, false, "acquire-reuse-token")
	bad := model.CheckHistory(ops)
	if len(bad) == 0 {
		t.Fatalf("a lease reusing tokens passed the invariant check (%s)", summary(ops))
	}
	t.Logf("caught: %s", bad[0])
}
