package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencedq/fencedq/fencedqtest"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

type syncArgs struct {
	Customer string         `json:"customer"`
	Scope    string         `json:"scope"`
	Extra    map[string]int `json:"extra,omitempty"`
}

func (syncArgs) Kind() string { return "sync" }

// enqueued enqueues and fails the test on an error.
func enqueued(t *testing.T, c *jobs.Client, args jobs.JobArgs, opts ...jobs.Option) *jobs.Result {
	t.Helper()
	res, err := c.Enqueue(context.Background(), args, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestUniqueByArgsAndFields: a duplicate (same kind and chosen args, same
// queue) returns the job holding the key, deduplicated, and writes
// nothing; other args, another kind's key or another queue make new jobs;
// ByFields looks only at the named fields; object key order does not
// matter.
func TestUniqueByArgsAndFields(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	byArgs := jobs.Unique(jobs.UniqueOpts{ByArgs: true})

	first := enqueued(t, c, syncArgs{Customer: "c1", Scope: "all", Extra: map[string]int{"a": 1, "b": 2}}, byArgs)
	if first.Deduplicated {
		t.Fatal("the first unique job was reported deduplicated")
	}
	dup := enqueued(t, c, syncArgs{Customer: "c1", Scope: "all", Extra: map[string]int{"b": 2, "a": 1}}, byArgs)
	if !dup.Deduplicated || dup.JobID != first.JobID {
		t.Fatalf("duplicate: %+v, want job %s deduplicated", dup, first.JobID)
	}
	// The same args as raw JSON with its keys in another order.
	raw, err := c.EnqueueRaw(ctx, "sync", []byte(`{"scope":"all","extra":{"b":2,"a":1},"customer":"c1"}`), byArgs, jobs.Unchecked())
	if err != nil || !raw.Deduplicated || raw.JobID != first.JobID {
		t.Fatalf("raw duplicate: %+v, %v", raw, err)
	}
	rec, err := c.Inspector().Get(ctx, first.Queue, first.JobID)
	if err != nil || rec.UniqueKey == "" || len(rec.UniqueStates) != len(jobs.DefaultUniqueStates) {
		t.Fatalf("the unique job's record: key %q, states %v (%v)", rec.UniqueKey, rec.UniqueStates, err)
	}
	if other := enqueued(t, c, syncArgs{Customer: "c2", Scope: "all"}, byArgs); other.Deduplicated {
		t.Fatal("other args were deduplicated")
	}
	if q := enqueued(t, c, syncArgs{Customer: "c1", Scope: "all", Extra: map[string]int{"a": 1, "b": 2}}, byArgs, jobs.Queue("other")); q.Deduplicated {
		t.Fatal("the same job on another queue was deduplicated: uniqueness is per queue")
	}
	// Without the option, nothing is unique.
	if plain := enqueued(t, c, syncArgs{Customer: "c1", Scope: "all"}); plain.Deduplicated {
		t.Fatal("a job without Unique was deduplicated")
	}

	byCustomer := jobs.Unique(jobs.UniqueOpts{ByFields: []string{"customer"}})
	a := enqueued(t, c, syncArgs{Customer: "c9", Scope: "x"}, byCustomer)
	b := enqueued(t, c, syncArgs{Customer: "c9", Scope: "y"}, byCustomer)
	if a.Deduplicated || !b.Deduplicated || b.JobID != a.JobID {
		t.Fatalf("by field customer: %+v then %+v, want the second deduplicated to the first", a, b)
	}
	if d := enqueued(t, c, syncArgs{Customer: "c10", Scope: "x"}, byCustomer); d.Deduplicated {
		t.Fatal("another customer was deduplicated")
	}
	// By kind only: every job of the kind on the queue is one.
	kindOnly := jobs.Unique(jobs.UniqueOpts{})
	k1 := enqueued(t, c, rangeArgs{N: 1}, kindOnly)
	k2 := enqueued(t, c, rangeArgs{N: 2}, kindOnly)
	if !k2.Deduplicated || k2.JobID != k1.JobID {
		t.Fatalf("unique by kind: %+v then %+v", k1, k2)
	}

	counts, err := c.Inspector().Counts(ctx, jobs.DefaultQueue)
	if err != nil {
		t.Fatal(err)
	}
	if n := counts[jobs.Pending]; n != 6 { // first, c2, plain, c9, c10, range
		t.Fatalf("%d pending jobs on the default queue, want 6", n)
	}
	st, err := c.Inspector().Stats(ctx, jobs.DefaultQueue)
	if err != nil {
		t.Fatal(err)
	}
	if st["deduplicated_unique"] != 4 {
		t.Fatalf("deduplicated_unique = %d, want 4 (stats %v)", st["deduplicated_unique"], st)
	}
}

// TestUniqueConcurrentEnqueues: 64 goroutines over 4 clients enqueue the
// same unique job at once (singly and in batches): exactly one job exists,
// and every caller got its id.
func TestUniqueConcurrentEnqueues(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	clients := make([]*jobs.Client, 4)
	for i := range clients {
		clients[i] = jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	}
	opt := jobs.Unique(jobs.UniqueOpts{ByFields: []string{"customer"}})
	const n = 64
	ids := make([]string, n)
	created := make([]bool, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for g := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			c := clients[g%len(clients)]
			args := syncArgs{Customer: "acme", Scope: fmt.Sprint(g)}
			if g%2 == 0 {
				res, err := c.Enqueue(ctx, args, opt)
				if err == nil {
					ids[g], created[g] = res.JobID, !res.Deduplicated
				}
				errs[g] = err
				return
			}
			res, err := c.EnqueueMany(ctx, []jobs.Params{{Args: args, Options: []jobs.Option{opt}}, {Args: rangeArgs{N: g}}})
			if err == nil {
				ids[g], created[g] = res[0].JobID, !res[0].Deduplicated
			}
			errs[g] = err
		}()
	}
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	winners := 0
	for g := range n {
		if created[g] {
			winners++
		}
		if ids[g] != ids[0] {
			t.Fatalf("caller %d got job %s, caller 0 got %s", g, ids[g], ids[0])
		}
	}
	if winners != 1 {
		t.Fatalf("%d callers created the unique job, want 1", winners)
	}
	list, err := clients[0].Inspector().List(ctx, jobs.ListParams{Queue: jobs.DefaultQueue, State: jobs.Pending, Kind: "sync", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Jobs) != 1 || list.Jobs[0].ID != ids[0] {
		t.Fatalf("%d sync jobs pending, want the one job %s", len(list.Jobs), ids[0])
	}
}

type okWorker struct{}

func (okWorker) Work(context.Context, *jobs.Job[syncArgs]) error { return nil }

// TestUniqueKeyReleasedOutsideItsStates: a job holds its key only while in
// its unique states. With the default states a cancelled job releases it
// and a succeeded one keeps it; with ByState pending and running, success
// releases it. The pruner's scan then drops released keys and keeps held
// ones.
func TestUniqueKeyReleasedOutsideItsStates(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	cfg := jobs.Config{Namespace: ns}
	c := jobs.NewClient(rdb, cfg)
	env := fencedqtest.New(rdb, cfg)
	def := jobs.Unique(jobs.UniqueOpts{ByArgs: true})
	args := syncArgs{Customer: "c1"}

	first := enqueued(t, c, args, def)
	if _, err := c.Cancel(ctx, first.Queue, first.JobID, "alice", "test"); err != nil {
		t.Fatal(err)
	}
	second := enqueued(t, c, args, def)
	if second.Deduplicated || second.JobID == first.JobID {
		t.Fatalf("after the holder was cancelled: %+v, want a new job", second)
	}
	if r := fencedqtest.WorkJob(ctx, t, env, okWorker{}, second.Queue, second.JobID); r.Record.State != jobs.Succeeded {
		t.Fatalf("worked job is %s", r.Record.State)
	}
	if third := enqueued(t, c, args, def); !third.Deduplicated || third.JobID != second.JobID {
		t.Fatalf("a succeeded holder (default states) must keep its key: %+v", third)
	}

	running := jobs.Unique(jobs.UniqueOpts{ByArgs: true, ByState: []jobs.State{jobs.Pending, jobs.Running}})
	other := syncArgs{Customer: "c2"}
	a := enqueued(t, c, other, running)
	if b := enqueued(t, c, other, running); !b.Deduplicated || b.JobID != a.JobID {
		t.Fatalf("a pending holder must keep its key: %+v", b)
	}
	fencedqtest.WorkJob(ctx, t, env, okWorker{}, a.Queue, a.JobID)
	b := enqueued(t, c, other, running)
	if b.Deduplicated {
		t.Fatal("a job unique while pending or running kept its key after it succeeded")
	}

	// Two keys are released (first's, a's), two held (second's, b's).
	l := jobs.NewClient(rdb, cfg)
	removed, err := jobs.PruneUniqueForTest(ctx, l, jobs.DefaultQueue)
	if err != nil {
		t.Fatal(err)
	}
	if removed != 0 { // both released keys were taken over by the new holders
		t.Fatalf("pruned %d keys, want 0: both released keys have new holders", removed)
	}
	if _, err := c.Cancel(ctx, b.Queue, b.JobID, "alice", "test"); err != nil {
		t.Fatal(err)
	}
	if removed, err = jobs.PruneUniqueForTest(ctx, l, jobs.DefaultQueue); err != nil || removed != 1 {
		t.Fatalf("pruned %d keys (%v), want 1: the cancelled job's", removed, err)
	}
	if again := enqueued(t, c, args, def); !again.Deduplicated {
		t.Fatal("pruning released a held key")
	}
}

// TestUniqueByPeriod: jobs enqueued in the same period of Redis's clock are
// duplicates; the first job of the next period is new.
func TestUniqueByPeriod(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{ClockShim: true})
	rdb := srv.Client()
	ns := redistest.Namespace(t)
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	// Move Redis's clock to the middle of an hour, so the test's own time
	// cannot cross a period boundary.
	now := time.Now()
	mid := now.Truncate(time.Hour).Add(30 * time.Minute)
	srv.SetClockOffset(mid.Sub(now))
	hourly := jobs.Unique(jobs.UniqueOpts{ByArgs: true, ByPeriod: time.Hour})
	a := enqueued(t, c, syncArgs{Customer: "c1"}, hourly)
	if b := enqueued(t, c, syncArgs{Customer: "c1"}, hourly); !b.Deduplicated || b.JobID != a.JobID {
		t.Fatalf("same period: %+v, want deduplicated to %s", b, a.JobID)
	}
	srv.SetClockOffset(mid.Sub(now) + time.Hour)
	if b := enqueued(t, c, syncArgs{Customer: "c1"}, hourly); b.Deduplicated {
		t.Fatal("the next period's first job was deduplicated")
	}
	if b := enqueued(t, c, syncArgs{Customer: "c1"}, hourly); !b.Deduplicated {
		t.Fatal("the next period's second job was not deduplicated")
	}
}

// TestUniqueRefusesBadOptions: bad unique options are refused before
// anything is written.
func TestUniqueRefusesBadOptions(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	for name, u := range map[string]jobs.UniqueOpts{
		"negative period":     {ByPeriod: -time.Second},
		"unknown state":       {ByState: []jobs.State{jobs.Pending, jobs.Running, "done"}},
		"without running":     {ByState: []jobs.State{jobs.Pending, jobs.Succeeded}},
		"without pending":     {ByState: []jobs.State{jobs.Running}},
		"an empty field name": {ByFields: []string{""}},
		// either would count as null in every job: all duplicates of one
		"a field the args never encode": {ByFields: []string{"custmer"}},
		"a field's Go name":             {ByFields: []string{"scope", "Customer"}},
	} {
		if _, err := c.Enqueue(ctx, syncArgs{}, jobs.Unique(u)); !errors.Is(err, jobs.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if _, err := c.EnqueueMany(ctx, []jobs.Params{{Args: syncArgs{}}, {Args: syncArgs{}, Options: []jobs.Option{jobs.Unique(jobs.UniqueOpts{ByFields: []string{"Scope"}})}}}); !errors.Is(err, jobs.ErrInvalid) {
		t.Errorf("EnqueueMany with a field's Go name: %v, want ErrInvalid", err)
	}
	if keys, _ := rdb.Keys(ctx, ns+":*").Result(); len(keys) != 0 {
		t.Fatalf("refused enqueues wrote %v", keys)
	}
	// Fields of an embedded struct are the args' own; a field absent from
	// one job's JSON (omitempty) is a field all the same.
	for _, fields := range [][]string{{"customer", "page"}, {"extra"}} {
		if _, err := c.Enqueue(ctx, pagedSyncArgs{syncArgs: syncArgs{Customer: "c1"}, Page: 2}, jobs.Unique(jobs.UniqueOpts{ByFields: fields})); err != nil {
			t.Errorf("ByFields %v: %v", fields, err)
		}
	}
}

type pagedSyncArgs struct {
	syncArgs
	Page int `json:"page"`
}

type pinArgs struct {
	Account string `json:"account"`
	PIN     string `json:"pin" fencedq:"sensitive"`
}

func (pinArgs) Kind() string { return "pin" }

// TestUniqueKeyOfSensitiveArgsNotShown: a unique key is a digest of the
// chosen args, so a shown key over a sensitive value would let anyone who
// reads the ledger (the CLI, the dashboard) find a short secret by hashing
// guesses, and tell which jobs share one. Every read shows it redacted
// when the job's args had values redacted; keys over args with nothing to
// redact are shown.
func TestUniqueKeyOfSensitiveArgsNotShown(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	in := c.Inspector()
	byPIN := jobs.Unique(jobs.UniqueOpts{ByFields: []string{"pin"}})
	byArgs := jobs.Unique(jobs.UniqueOpts{ByArgs: true, ByPeriod: time.Hour})
	secret := []*jobs.Result{
		enqueued(t, c, pinArgs{Account: "a", PIN: "1234"}, byPIN, jobs.Queue("q1"), jobs.OperationID("op-1")),
		enqueued(t, c, pinArgs{Account: "b", PIN: "1234"}, byPIN, jobs.Queue("q2")),
		enqueued(t, c, pinArgs{Account: "c", PIN: "1234"}, byArgs, jobs.Queue("q3")),
	}
	plain := enqueued(t, c, syncArgs{Customer: "c1"}, jobs.Unique(jobs.UniqueOpts{ByFields: []string{"customer"}}))

	check := func(how string, r *jobs.Record, want func(string) bool) {
		t.Helper()
		if !want(r.UniqueKey) {
			t.Errorf("%s: job %s shows unique key %q", how, r.ID, r.UniqueKey)
		}
		if len(r.UniqueStates) == 0 {
			t.Errorf("%s: job %s lost its unique states", how, r.ID)
		}
	}
	redacted := func(k string) bool { return k == jobs.Redacted }
	for _, res := range secret {
		r, err := in.Get(ctx, res.Queue, res.JobID)
		if err != nil {
			t.Fatal(err)
		}
		check("Get", r, redacted)
		if r, err = in.Find(ctx, res.JobID); err != nil {
			t.Fatal(err)
		}
		check("Find", r, redacted)
		l, err := in.List(ctx, jobs.ListParams{Queue: res.Queue, State: jobs.Pending, Limit: 10})
		if err != nil || len(l.Jobs) != 1 {
			t.Fatalf("List %s: %v, %v", res.Queue, l, err)
		}
		check("List", l.Jobs[0].Record, redacted)
	}
	r, err := in.FindByOperation(ctx, "op-1")
	if err != nil {
		t.Fatal(err)
	}
	check("FindByOperation", r, redacted)
	ms, _, err := in.Search(ctx, "op-1", false)
	if err != nil || len(ms) != 1 {
		t.Fatalf("Search: %v, %v", ms, err)
	}
	check("Search", ms[0].Record, redacted)
	if r, err = in.Get(ctx, plain.Queue, plain.JobID); err != nil {
		t.Fatal(err)
	}
	check("Get (no sensitive args)", r, func(k string) bool { return len(k) == 32 })

	// Hidden from readers only: the key still deduplicates.
	if dup := enqueued(t, c, pinArgs{Account: "z", PIN: "1234"}, byPIN, jobs.Queue("q1")); !dup.Deduplicated || dup.JobID != secret[0].JobID {
		t.Fatalf("same PIN in q1: %+v, want deduplicated to %s", dup, secret[0].JobID)
	}
}

type unknownWorker struct{}

func (unknownWorker) Work(context.Context, *jobs.Job[syncArgs]) error {
	return jobs.Unknown(errors.New("the call timed out"))
}

// TestUniqueKeyHeldWhileUncertain: a job unique while pending or running
// whose attempt's outcome is unknown (uncertain: its handler may still run,
// and the reconciler may run it again) keeps its key: an enqueue of the key
// meanwhile is deduplicated, so the key never has two jobs running or
// pending.
func TestUniqueKeyHeldWhileUncertain(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	cfg := jobs.Config{Namespace: ns}
	c := jobs.NewClient(rdb, cfg)
	env := fencedqtest.New(rdb, cfg)
	running := jobs.Unique(jobs.UniqueOpts{ByArgs: true, ByState: []jobs.State{jobs.Pending, jobs.Running}})
	a := enqueued(t, c, syncArgs{Customer: "c1"}, running)
	if r := fencedqtest.WorkJob(ctx, t, env, unknownWorker{}, a.Queue, a.JobID); r.Record.State != jobs.Uncertain {
		t.Fatalf("worked job is %s, want uncertain", r.Record.State)
	}
	if b := enqueued(t, c, syncArgs{Customer: "c1"}, running); !b.Deduplicated || b.JobID != a.JobID {
		t.Fatalf("enqueue while the holder is uncertain: %+v, want deduplicated to %s", b, a.JobID)
	}
	rec, err := c.Inspector().Get(ctx, a.Queue, a.JobID)
	if err != nil || !slices.Contains(rec.UniqueStates, jobs.Uncertain) {
		t.Fatalf("the holder's unique states: %+v, %v; want uncertain among them", rec, err)
	}
}

// TestUniqueNumbersByValue: a number is part of a unique key by its value,
// not by how it is written, so args encoded by another producer (1.0 for
// 1, 1e2 for 100, a float's -0) are duplicates of the same args from Go;
// different values stay different keys, however large or small.
func TestUniqueNumbersByValue(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	byArgs := jobs.Unique(jobs.UniqueOpts{ByArgs: true})
	byField := jobs.Unique(jobs.UniqueOpts{ByFields: []string{"n"}})
	raw := func(payload string, opt jobs.Option) *jobs.Result {
		t.Helper()
		res, err := c.EnqueueRaw(ctx, "sync", []byte(payload), opt, jobs.Unchecked())
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	for _, same := range [][]string{
		{`{"n":1}`, `{"n":1.0}`, `{"n":1e0}`, `{"n":10e-1}`, `{"n":0.1E1}`},
		{`{"n":100}`, `{"n":1e2}`, `{"n":1E+2}`, `{"n":100.000}`},
		{`{"n":0}`, `{"n":-0}`, `{"n":0.0}`, `{"n":-0e10}`},
		{`{"n":-2.5}`, `{"n":-25e-1}`, `{"n":-2.50}`},
		{`{"n":0.001}`, `{"n":1e-3}`},
		{`{"n":1e300}`, `{"n":10e299}`},
		{`{"n":{"m":[1,2.0]}}`, `{"n":{"m":[1.0,2]}}`},
	} {
		for _, opt := range []jobs.Option{byArgs, byField} {
			first := raw(same[0], opt)
			if first.Deduplicated {
				t.Fatalf("%s: the first job was deduplicated", same[0])
			}
			for _, p := range same[1:] {
				if r := raw(p, opt); !r.Deduplicated || r.JobID != first.JobID {
					t.Errorf("%s after %s: %+v, want deduplicated to %s", p, same[0], r, first.JobID)
				}
			}
		}
	}
	// Distinct values, each new (in a queue of their own).
	for _, p := range []string{`{"n":2}`, `{"n":1.5}`, `{"n":10}`, `{"n":0.1}`, `{"n":1e-300}`, `{"n":1e301}`,
		`{"n":-1}`, `{"n":12345678901234567890123}`, `{"n":12345678901234567890124}`, `{"n":"1"}`} {
		if r, err := c.EnqueueRaw(ctx, "sync", []byte(p), byArgs, jobs.Unchecked(), jobs.Queue("distinct")); err != nil || r.Deduplicated {
			t.Errorf("%s: %+v, %v; want a new job", p, r, err)
		}
	}
}

// TestUniqueDeduplicatedResultNamesHolder: a job deduplicated to the holder
// of its unique key reports the holder's operation id with the holder's
// id, not the operation id it was given (or the id it would have had),
// which names no job: looking the result's operation up finds the job.
func TestUniqueDeduplicatedResultNamesHolder(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	in := c.Inspector()
	byCustomer := jobs.Unique(jobs.UniqueOpts{ByFields: []string{"customer"}})
	for _, tc := range []struct{ name, op1, op2 string }{
		{"operation ids named by the job id", "sync-1", "sync-2"},
		{"operation ids with an operation key", "sync/1 a", "sync/2 b"},
		{"the holder without an operation id", "", "sync-3"},
		{"neither with an operation id", "", ""},
	} {
		customer := tc.name
		var o1, o2 []jobs.Option
		if tc.op1 != "" {
			o1 = append(o1, jobs.OperationID(tc.op1))
		}
		if tc.op2 != "" {
			o2 = append(o2, jobs.OperationID(tc.op2))
		}
		first := enqueued(t, c, syncArgs{Customer: customer, Scope: "a"}, append(o1, byCustomer)...)
		dups := []*jobs.Result{enqueued(t, c, syncArgs{Customer: customer, Scope: "b"}, append(o2, byCustomer)...)}
		many, err := c.EnqueueMany(ctx, []jobs.Params{{Args: syncArgs{Customer: customer, Scope: "c"}, Options: append(o2, byCustomer)}})
		if err != nil {
			t.Fatal(err)
		}
		for _, dup := range append(dups, many...) {
			if !dup.Deduplicated || dup.JobID != first.JobID || dup.OperationID != first.OperationID {
				t.Errorf("%s: duplicate %+v, want job %s with its operation id %q", tc.name, dup, first.JobID, first.OperationID)
			}
			if r, err := in.FindByOperationIn(ctx, dup.Queue, dup.OperationID); err != nil || r.ID != first.JobID {
				t.Errorf("%s: the duplicate's operation %q finds %v, %v; want job %s", tc.name, dup.OperationID, r, err, first.JobID)
			}
		}
	}
	st, err := in.Stats(ctx, jobs.DefaultQueue)
	if err != nil || st["enqueued"] != 4 {
		t.Fatalf("enqueued = %d (%v), want 4: duplicates are not counted", st["enqueued"], err)
	}
}

// TestUniqueOptionErrorsCutLongNames: a refused unique state or field name
// is quoted cut to 64 bytes, as every refused name, and a refused list of
// states names each state once, so a huge one does not flood the caller's
// logs.
func TestUniqueOptionErrorsCutLongNames(t *testing.T) {
	rdb, ns := redistest.New(t)
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	long := strings.Repeat("x", 10000)
	for name, u := range map[string]jobs.UniqueOpts{
		"state": {ByState: []jobs.State{jobs.Pending, jobs.Running, jobs.State(long)}},
		"field": {ByFields: []string{long}},
		// every state valid, running missing: the list is named once per state
		"state list": {ByState: slices.Repeat([]jobs.State{jobs.Pending, jobs.Succeeded}, 5000)},
	} {
		_, err := c.Enqueue(context.Background(), syncArgs{}, jobs.Unique(u))
		if !errors.Is(err, jobs.ErrInvalid) || len(err.Error()) > 300 || (name != "state list" && !strings.Contains(err.Error(), "xxx...")) {
			t.Errorf("a %d-byte unique %s: %d-byte error %.300q, want ErrInvalid quoting it cut", len(long), name, len(fmt.Sprint(err)), err)
		}
	}
}
