package ledger_test

import (
	"context"
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

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/model"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

var (
	linOps     = flag.Int("lin.ops", 40, "linearizability: operations per client goroutine")
	linClients = flag.Int("lin.clients", 3, "linearizability: client goroutines per process")
	linProcs   = flag.Int("lin.procs", 2, "linearizability: OS processes running clients (the test binary re-executed), at least 2")
	linRuns    = flag.Int("lin.runs", 1, "linearizability: histories per test")
)

// TestMain doubles as a helper process for the linearizability test: with
// model.HelperEnv set, the test binary runs ledger clients and writes their
// history instead of running the tests. It also gives rapid a fixed seed
// and a short run unless the command line asks otherwise.
func TestMain(m *testing.M) {
	if h, ok := model.HelperFromEnv(); ok {
		os.Exit(runLedgerHelper(h))
	}
	flag.Parse()
	defaultFlag("rapid.checks", "8")
	defaultFlag("rapid.seed", "1")
	defaultFlag("rapid.nofailfile", "true")
	os.Exit(m.Run())
}

// defaultFlag sets a flag the command line did not set.
func defaultFlag(name, value string) {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	if !set {
		_ = flag.Set(name, value)
	}
}

const (
	linQueue = "lin"
	linJobs  = 6
)

// linRedis is a client that never retries a command by itself: a command
// whose connection broke has an unknown outcome, and is recorded so.
func linRedis(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
}

func runLedgerHelper(h model.Helper) int {
	rdb := linRedis(h.Addr)
	defer rdb.Close()
	if h.Broken != "" {
		defer ledger.UseBrokenScript(h.Broken)()
	}
	l := ledger.New(rdb, ledger.Config{Namespace: h.NS, Retention: time.Hour})
	rec := &model.Recorder{}
	var wg sync.WaitGroup
	for i := range h.Clients {
		wg.Go(func() { ledgerClient(l, rdb, rec, h.Proc, i, h.Ops, nil) })
	}
	wg.Wait()
	if err := rec.WriteFile(h.Out); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// ledgerClient claims jobs and, for each, commits a stale token, renews,
// and commits an outcome (mostly a retry, so jobs run many attempts),
// recording every call. halfway (idempotent) is called once half its
// operations are done.
func ledgerClient(l *ledger.Ledger, rdb *redis.Client, rec *model.Recorder, proc, client, n int, halfway func()) {
	ctx := context.Background()
	owner := fmt.Sprintf("p%d-c%d", proc, client)
	rng := rand.New(rand.NewPCG(uint64(proc), uint64(client)))
	prev := map[string]uint64{} // this client's previous token per job
	done := 0
	if halfway == nil {
		halfway = func() {}
	}
	defer halfway()
	count := func() {
		if done++; done >= n/2 {
			halfway()
		}
	}
	record := func(op model.Op, err error) {
		op.Proc, op.Client, op.Owner, op.Return = proc, client, owner, model.Now()
		if err != nil {
			op.Unknown = true
			_ = redistest.WaitAnswer(ctx, rdb) // after a restart: a caller retries once its server is back
		}
		rec.Add(op)
		count()
	}
	complete := func(id string, token uint64, outcome model.Outcome) {
		o := ledger.Outcome{To: jobs.State(outcome)}
		switch outcome {
		case model.OutRetry:
			o.To = jobs.Pending
		case model.OutDefer:
			o = ledger.Outcome{Defer: true}
		}
		op := model.Op{Kind: model.KindComplete, Key: id, Token: token, Outcome: string(outcome), Call: model.Now()}
		out, err := l.Complete(ctx, linQueue, []ledger.Completion{{ID: id, Token: tok(token), Outcome: o}})
		if err == nil {
			op.OK, op.State, op.Current = out[0].Applied, model.State(out[0].State), uint64(out[0].Current)
		}
		record(op, err)
	}
	for done < n {
		call := model.Now()
		res, err := l.Claim(ctx, linQueue, owner, 30*time.Second, 2)
		if err != nil {
			record(model.Op{Kind: model.KindClaim, Call: call}, err)
			continue
		}
		if len(res.Jobs) == 0 {
			count() // nothing due: not recorded (it names no job)
			continue
		}
		ret := model.Now()
		for _, c := range res.Jobs {
			rec.Add(model.Op{Proc: proc, Client: client, Owner: owner, Kind: model.KindClaim, Key: c.ID,
				Token: uint64(c.Token), OK: true, Call: call, Return: ret})
		}
		for _, c := range res.Jobs {
			cur := uint64(c.Token)
			if p, ok := prev[c.ID]; ok {
				complete(c.ID, p, model.OutSucceeded) // a late commit of an earlier attempt
			}
			complete(c.ID, cur-1, model.OutSucceeded) // a token that never ran the job
			if rng.IntN(2) == 0 {
				op := model.Op{Kind: model.KindRenew, Key: c.ID, Token: cur, Call: model.Now()}
				out, err := l.Renew(ctx, linQueue, 30*time.Second, []ledger.Attempt{{ID: c.ID, Token: c.Token}})
				if err == nil {
					op.OK, op.State = out[0].Status != ledger.Lost, model.State(out[0].State)
				}
				record(op, err)
			}
			outcome := model.OutRetry
			switch rng.IntN(20) {
			case 0:
				outcome = model.OutSucceeded
			case 1, 2:
				outcome = model.OutDefer
			}
			complete(c.ID, cur, outcome)
			prev[c.ID] = cur
		}
	}
}

// enqueueJobs enqueues linJobs jobs, recording each call.
func enqueueJobs(t *testing.T, c *jobs.Client, rec *model.Recorder) []string {
	var ids []string
	for range linJobs {
		call := model.Now()
		res, err := c.EnqueueRaw(context.Background(), "note", []byte(`{}`), jobs.Queue(linQueue), jobs.MaxRetries(1_000_000), jobs.Unchecked())
		if err != nil {
			t.Fatal(err)
		}
		rec.Add(model.Op{Client: 999, Kind: model.KindEnqueue, Key: res.JobID, OK: true, Call: call, Return: model.Now()})
		ids = append(ids, res.JobID)
	}
	return ids
}

// ledgerHistory runs one concurrent history on a fresh redis-server without
// persistence: *linProcs processes (this one and helpers) of *linClients
// clients each; with restart, Redis is restarted (losing every key) when
// this process's first client is halfway, and new jobs are enqueued. It
// returns the merged history and a final snapshot of the queue.
func ledgerHistory(t *testing.T, restart bool, broken string) ([]model.Op, model.Snapshot) {
	srv := redistest.Start(t, redistest.Options{})
	rdb := linRedis(srv.Addr)
	defer rdb.Close()
	ns := redistest.Namespace(t)
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns, Retention: time.Hour})
	rec := &model.Recorder{}
	ids := enqueueJobs(t, c, rec)
	if broken != "" {
		defer ledger.UseBrokenScript(broken)()
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
		wg.Go(func() { ledgerClient(ledger.New(rdb, ledger.Config{Namespace: ns}), rdb, rec, 0, i, *linOps, halfway) })
	}
	if restart {
		<-half
		call := model.Now()
		srv.Restart()
		rec.Add(model.Op{Client: 999, Kind: model.KindRestart, OK: true, Call: call, Return: model.Now()})
		ids = append(ids, enqueueJobs(t, c, rec)...)
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
	return ops, ledgerSnapshot(t, ledger.New(rdb, ledger.Config{Namespace: ns}), ids)
}

// ledgerSnapshot reads every job's state and token and every state index.
func ledgerSnapshot(t *testing.T, l *ledger.Ledger, ids []string) model.Snapshot {
	ctx := context.Background()
	snap := model.Snapshot{Jobs: map[string]model.Observed{}, Index: map[model.State][]string{}}
	for _, id := range ids {
		o := model.Observed{State: model.Missing}
		if rec, err := l.Get(ctx, linQueue, id); err == nil {
			o = model.Observed{State: model.State(rec.State), Token: uint64(rec.Token)}
		}
		snap.Jobs[id] = o
	}
	for _, s := range model.States {
		ids, err := l.IDs(ctx, linQueue, jobs.State(s), 0, 10_000)
		if err != nil {
			t.Fatal(err)
		}
		snap.Index[s] = ids
	}
	return snap
}

// checkLedger checks a history for linearizability against the ledger's
// specification and for the invariants.
func checkLedger(ops []model.Op, snap model.Snapshot) (porcupine.CheckResult, []string) {
	res := model.Linearizable(model.LedgerModel(), ops, time.Minute)
	return res, append(model.CheckHistory(ops), model.CheckIndexes(snap)...)
}

func summary(ops []model.Op) string {
	n := map[string]int{}
	keys := map[string]bool{}
	for _, op := range ops {
		k := op.Kind
		if op.Unknown {
			k += "?"
		}
		n[k]++
		keys[op.Key] = true
	}
	return fmt.Sprintf("%d operations on %d keys %v", len(ops), len(keys), n)
}

func TestLinearizabilityLedger(t *testing.T) {
	for _, restart := range []bool{false, true} {
		t.Run(fmt.Sprintf("restart=%v", restart), func(t *testing.T) {
			for run := range *linRuns {
				start := time.Now()
				ops, snap := ledgerHistory(t, restart, "")
				res, bad := checkLedger(ops, snap)
				if res != porcupine.Ok {
					t.Fatalf("history %d (%s) is not linearizable: %v", run, summary(ops), res)
				}
				if len(bad) > 0 {
					t.Fatalf("history %d breaks invariants:\n%s", run, strings.Join(bad, "\n"))
				}
				t.Logf("history %d: %s, linearizable, invariants hold (%v)", run, summary(ops), time.Since(start).Round(time.Millisecond))
			}
		})
	}
}

// TestLinearizabilityCatchesBrokenComplete requires the linearizability
// check to reject a history of a ledger whose commits skip the token check.
func TestLinearizabilityCatchesBrokenComplete(t *testing.T) {
	ops, _ := ledgerHistory(t, false, "complete-no-token-check")
	if res := model.Linearizable(model.LedgerModel(), ops, time.Minute); res != porcupine.Illegal {
		t.Fatalf("a ledger applying stale commits passed the linearizability check: %v (%s)", res, summary(ops))
	}
}

// TestInvariantsCatchBrokenClaim requires the invariant check to reject a
// history of a ledger whose claims hand a job's token out again.
func TestInvariantsCatchBrokenClaim(t *testing.T) {
	ops, snap := ledgerHistory(t, false, "claim-reuse-token")
	_, bad := checkLedger(ops, snap)
	if len(bad) == 0 {
		t.Fatalf("a ledger reusing tokens passed the invariant check (%s)", summary(ops))
	}
	t.Logf("caught: %s", bad[0])
}
