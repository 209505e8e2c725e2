package worker_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fence/redisfence"
	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/syncbuf"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
	"github.com/fencedq/fencedq/worker"
)

// hopArgs is a job of the double failover test; the one with Zombie set
// is paused on its first run.
type hopArgs struct {
	Zombie bool `json:"zombie,omitempty"`
}

func (hopArgs) Kind() string { return "hop" }

// hops records the pool's fenced writes in the double failover test.
type hops struct {
	mu      sync.Mutex
	tokens  []lease.Token // every accepted attempt's token, in order
	refused []error       // live attempts storage refused
	zombie  lease.Token   // the paused attempt's token
	late    error         // the paused attempt's write once woken
	paused  chan struct{} // closed once the paused attempt wrote its first step
	wake    chan struct{} // the test closes it to wake the paused attempt
	woken   chan struct{} // closed once the woken attempt wrote
	first   sync.Once
}

// since returns the tokens accepted from index i on, and the count.
func (h *hops) since(i int) ([]lease.Token, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]lease.Token(nil), h.tokens[i:]...), len(h.tokens)
}

// await waits until ch is closed, failing the test after
// testsignal.Timeout.
func await(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(testsignal.Timeout()):
		t.Fatalf("%s: not within %v", what, testsignal.Timeout())
	}
}

// A primary A fails over to a lagging replica B (replication cut before
// the kill, so B misses claims, completions, a lease and enqueues), then B
// fails over to a lagging C, each promoted node's clock further behind. Job
// tokens and lease tokens minted on C are above every token minted on A
// and B; an attempt paused on A (its handler blocked, ignoring its
// context) and woken after the second failover is refused by storage and
// its commit by the ledger, and so is a lease holder of A's; each loss is
// detected, logged at error level and recorded, the client's re-submission
// brings the lost jobs back, and work goes on after each failover.
func TestDoubleFailoverTokensOutrankEveryEarlierTenure(t *testing.T) {
	if testing.Short() {
		t.Skip("failover tests skipped in -short mode")
	}
	for _, sentinel := range []bool{true, false} {
		name := "counted"
		if sentinel {
			name = "sentinel"
		}
		t.Run(name, func(t *testing.T) { testDoubleFailover(t, sentinel) })
	}
}

func testDoubleFailover(t *testing.T, sentinel bool) {
	ctx := context.Background()
	f := redistest.StartFailover(t, redistest.FailoverOptions{ClockShim: true})
	f.Replica.SetClockOffset(-10 * time.Minute) // B
	c := f.Client()
	ns := redistest.Namespace(t)
	jc := jobs.Config{Namespace: ns}
	lc := lease.Config{Namespace: ns}
	if sentinel {
		jc.Sentinel, lc.Sentinel = f.ClientOptions(), f.ClientOptions()
	}
	e := newEnvOn(t, c, ns)
	clientLogs := &syncbuf.Buffer{}
	cjc := jc
	cjc.Logger = slog.New(slog.NewJSONHandler(clientLogs, nil))
	client := jobs.NewClient(c, cjc)
	t.Cleanup(func() { _ = client.Close() })
	insp := client.Inspector()
	l := ledger.New(c, ledger.Config{Namespace: ns, Sentinel: jc.Sentinel})
	m := lease.NewManager(c, lc)
	store, err := redisfence.New(redistest.Start(t, redistest.Options{}).Client(), redisfence.Config{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	const resource = "ledger-account"
	leaseWrite := func(ls *lease.Lease, op string) error {
		fc := fence.Fence{Resource: ls.Resource, Token: ls.Token, Owner: ls.Owner, OperationID: op}
		return store.Apply(ctx, fc, redisfence.RPush(store.DataKey(fc.Resource, "log"), op))
	}
	// leaseStep takes the resource, writes once and lets it go, retrying
	// while a failover client's pooled connections still meet a killed
	// primary; it returns the token.
	leaseStep := func(owner string) lease.Token {
		t.Helper()
		ls := settle(t, "acquire "+owner, func() (*lease.Lease, error) { return m.Acquire(ctx, resource, owner, 2*time.Second) })
		if err := leaseWrite(ls, owner); err != nil {
			t.Fatalf("storage refused the live lease holder %s (token %d): %v", owner, ls.Token, err)
		}
		if err := m.Release(ctx, ls); err != nil {
			t.Fatal(err)
		}
		return ls.Token
	}

	h := &hops{paused: make(chan struct{}), wake: make(chan struct{}), woken: make(chan struct{})}
	var zombieID string
	cfg := e.config()
	cfg.Jobs = jc
	cfg.HandlerTimeout = time.Minute
	p := e.pool(cfg)
	if err := worker.Register(p, jobs.WorkFunc[hopArgs](func(ctx context.Context, j *jobs.Job[hopArgs]) error {
		fc, _ := fence.FromContext(ctx)
		// Each step is an operation of its own: the effect log would
		// answer a step the live attempt applied as applied already.
		apply := func(ctx context.Context, step string) error {
			sf := fc
			sf.OperationID = fc.OperationID + "/" + step
			return store.Apply(ctx, sf, redisfence.RPush(store.DataKey(fc.Resource, "log"), step))
		}
		paused := false
		if j.Args.Zombie {
			h.first.Do(func() { paused = true })
		}
		if paused {
			// The zombie: it writes a step, then is paused (SIGSTOP-like)
			// until the test wakes it, whatever its context says.
			err := apply(ctx, "step-1")
			h.mu.Lock()
			h.zombie = j.Token
			zombieID = j.ID
			h.mu.Unlock()
			if err != nil {
				return err
			}
			close(h.paused)
			<-h.wake
			err = apply(context.WithoutCancel(ctx), "step-2")
			h.mu.Lock()
			h.late = err
			h.mu.Unlock()
			close(h.woken)
			return nil
		}
		err := apply(ctx, "step-2")
		h.mu.Lock()
		defer h.mu.Unlock()
		// A job whose completion a failover lost runs again: the effect
		// log finds its step applied, which stands.
		if err != nil && !errors.Is(err, fence.ErrAlreadyApplied) {
			h.refused = append(h.refused, fmt.Errorf("job %s token %d: %w", j.ID, j.Token, err))
			return err
		}
		h.tokens = append(h.tokens, j.Token)
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	e.start(p)
	var wakeOnce sync.Once
	wake := func() { wakeOnce.Do(func() { close(h.wake) }) }
	t.Cleanup(wake) // before the pool stops, should the test fail first

	// enqueue enqueues n jobs, settling while the client's connections
	// still meet a killed primary.
	enqueue := func(n int, zombie bool) []*jobs.Result {
		t.Helper()
		var out []*jobs.Result
		for range n {
			out = append(out, settle(t, "enqueue", func() (*jobs.Result, error) { return client.Enqueue(ctx, hopArgs{Zombie: zombie}) }))
		}
		return out
	}
	waitDone := func(rs []*jobs.Result) {
		t.Helper()
		for _, r := range rs {
			jobstest.WaitState(t, l, r.Queue, r.JobID, jobs.Succeeded)
		}
	}
	// aboveAll checks every token accepted from index i on is above top.
	aboveAll := func(i int, top lease.Token, tenure string) int {
		t.Helper()
		toks, n := h.since(i)
		if len(toks) == 0 {
			t.Fatalf("no job ran on %s", tenure)
		}
		for _, tok := range toks {
			if tok <= top {
				t.Fatalf("fencing inverted: a job token %d minted on %s is not above %d, minted before", tok, tenure, top)
			}
		}
		return n
	}
	maxOf := func(toks []lease.Token) lease.Token {
		var top lease.Token
		for _, tok := range toks {
			top = max(top, tok)
		}
		return top
	}
	// resubmit waits for the client to see the loss the failover caused
	// (its nth rewind recorded) and re-submits the lost jobs.
	resubmit := func(n, lost int) {
		t.Helper()
		enqueue(1, false) // the client's first call on the new primary sees the loss
		rs, err := insp.Rewinds(ctx)
		if err != nil || len(rs) != n {
			t.Fatalf("rewinds recorded after failover %d: %+v, %v", n, rs, err)
		}
		for _, r := range rs {
			if r.LostEnqueues < 1 {
				t.Fatalf("a rewind counts no lost enqueue: %+v", r)
			}
		}
		res, err := client.Resubmit(ctx)
		if err != nil || len(res) != 1 || res[0].Restored != lost {
			t.Fatalf("re-submission after failover %d: %+v, %v (want %d restored)", n, res, err, lost)
		}
	}

	// On A: jobs run, the resource is leased, all of it on the replica.
	waitDone(enqueue(5, false))
	leaseStep("a-1")
	f.Sync()
	// Replication cut: what A acknowledges now is lost with it. A zombie
	// attempt is claimed and paused, other jobs run, a lease holder writes.
	f.CutReplication()
	zombieJob := enqueue(1, true)[0]
	lostA := enqueue(3, false)
	await(t, h.paused, "the zombie attempt's first step")
	waitDone(lostA)
	zombieLease, err := m.Acquire(ctx, resource, "zombie", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := leaseWrite(zombieLease, "zombie/step-1"); err != nil {
		t.Fatal(err)
	}
	toksA, nA := h.since(0)
	h.mu.Lock()
	zombieTok := h.zombie
	h.mu.Unlock()
	topA := max(maxOf(toksA), zombieTok)
	f.KillPrimary()

	// On B, whose clock is behind: the loss is seen and the lost jobs
	// (the zombie's among them) come back and run with tokens above A's.
	resubmit(1, 1+len(lostA))
	waitDone(append(lostA, zombieJob))
	waitDone(enqueue(5, false))
	leaseB := leaseStep("b-1")
	if leaseB <= zombieLease.Token {
		t.Fatalf("fencing inverted: the lease token %d minted on B is not above A's %d", leaseB, zombieLease.Token)
	}
	aboveAll(nA, topA, "B")

	// B fails over to C, also lagging and further behind.
	f.FailBackReady()
	f.Replica.SetClockOffset(-20 * time.Minute) // C
	f.CutReplication()
	lostB := enqueue(3, false)
	waitDone(lostB)
	leaseB2 := leaseStep("b-2")
	toksB, nB := h.since(nA)
	topB := max(topA, maxOf(toksB))
	f.KillPrimary()

	// On C: the second loss is seen too, and every token is above A's and B's.
	resubmit(2, len(lostB))
	waitDone(lostB)
	waitDone(enqueue(5, false))
	if leaseC := leaseStep("c-1"); leaseC <= max(leaseB, leaseB2, zombieLease.Token) {
		t.Fatalf("fencing inverted: the lease token %d minted on C is not above B's %d", leaseC, max(leaseB, leaseB2))
	}
	aboveAll(nB, topB, "C")

	// The zombies wake: storage refuses them, and so does the ledger.
	wake()
	await(t, h.woken, "the woken zombie's write")
	h.mu.Lock()
	late, refused := h.late, h.refused
	h.mu.Unlock()
	if !errors.Is(late, fence.ErrStale) {
		t.Fatalf("the attempt paused on A, woken on C: storage answered %v, want fence.ErrStale", late)
	}
	if err := leaseWrite(zombieLease, "zombie/step-2"); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("the lease holder of A, woken on C: storage answered %v, want fence.ErrStale", err)
	}
	if err := m.Renew(ctx, zombieLease, time.Minute); err == nil {
		t.Fatal("the lease holder of A renewed its lease on C")
	}
	out, err := l.Complete(ctx, jobs.DefaultQueue, []ledger.Completion{{ID: zombieID, Token: zombieTok, Outcome: ledger.Outcome{To: jobs.Succeeded}}})
	if err != nil || out[0].Applied || out[0].Current <= zombieTok {
		t.Fatalf("the ledger on the paused attempt's commit (token %d): %+v, %v", zombieTok, out, err)
	}
	if len(refused) > 0 {
		t.Fatalf("storage refused live attempts: %v", refused)
	}
	// Each loss was logged at error level by the client that saw it.
	if n := strings.Count(clientLogs.String(), "the ledger lost acknowledged writes"); n < 2 {
		t.Fatalf("%d rewinds logged by the client, want 2:\n%s", n, clientLogs.String())
	}
	// Work goes on.
	waitDone(enqueue(3, false))
}
