package ledger_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"pgregory.net/rapid"

	"github.com/fencedq/fencedq/internal/epoch"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/model"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
)

// machine runs the ledger on a real redis-server beside model.Ledger: every
// action is applied to both, the evidence compared, and after every action
// the ledger's observable state (each job's state, token and attempts, the
// state indexes, the pause) must equal the model's and keep the invariants.
type machine struct {
	ctx        context.Context
	srv        *redistest.Server
	rdb        *redis.Client
	persistent bool
	c          *jobs.Client
	l          *ledger.Ledger
	q          string

	m      model.Ledger
	iv     model.Invariants
	step   model.Step
	ids    []string            // every job id seen, in order
	tokens map[string][]uint64 // every token handed out, per job
	base   int64               // Redis ms when the sequence started
	seq    int64               // makes due times distinct
	high   uint64              // the highest token handed out
	floor  uint64              // the highest token handed out before Redis lost its keys
	epoch  uint64              // the fencing epoch of the last claim's tokens
	minted bool                // a claim handed out tokens
	// restarted is true when Redis restarted since the last claim that
	// handed out tokens.
	restarted bool
}

var machineSeq int

func newMachine(srv *redistest.Server, rdb *redis.Client, persistent bool, t *rapid.T) *machine {
	machineSeq++
	ns := fmt.Sprintf("t-model-%d-%d", time.Now().UnixNano(), machineSeq)
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns, Retention: time.Hour})
	m := &machine{ctx: context.Background(), srv: srv, rdb: rdb, persistent: persistent, c: c, l: ledger.New(rdb, ledger.Config{Namespace: ns, Retention: time.Hour}),
		q: "q", m: model.NewLedger(), tokens: map[string][]uint64{}}
	m.base = m.redisMs(t)
	return m
}

func (m *machine) redisNow(t *rapid.T) time.Time {
	now, err := m.l.ServerTime(m.ctx)
	if err != nil {
		t.Fatalf("redis time: %v", err)
	}
	return now
}

func (m *machine) redisMs(t *rapid.T) int64 { return m.redisNow(t).UnixMilli() }

// due returns a due time an hour in the past or in the future, a second
// from every other, so the order of due jobs is known although the ledger
// computes due times from delays on its own clock.
func (m *machine) due(future bool) int64 {
	m.seq += 1000
	if future {
		return m.base + time.Hour.Milliseconds() + m.seq
	}
	return m.base - time.Hour.Milliseconds() + m.seq
}

func (m *machine) pickID(t *rapid.T) string {
	return rapid.SampledFrom(append(append([]string(nil), m.ids...), "no-such-job")).Draw(t, "id")
}

// pickToken returns the job's current token most of the time, else a
// stale one it had, or one it never had.
func (m *machine) pickToken(t *rapid.T, id string) uint64 {
	cur := m.m.Get(id).Token
	switch rapid.IntRange(0, 3).Draw(t, "which token") {
	case 0:
		return rapid.SampledFrom(append(append([]uint64(nil), m.tokens[id]...), cur+1)).Draw(t, "stale token")
	case 1:
		return cur - 1
	}
	return cur
}

func (m *machine) enqueue(t *rapid.T) {
	op := rapid.SampledFrom([]string{"", "op-a", "op-b", "op-c"}).Draw(t, "operation")
	retries := rapid.IntRange(0, 2).Draw(t, "max retries")
	due := m.due(rapid.IntRange(0, 4).Draw(t, "scheduled") == 0)
	opts := []jobs.Option{jobs.Queue(m.q), jobs.MaxRetries(retries), jobs.RunAt(time.UnixMilli(due))}
	if op != "" {
		opts = append(opts, jobs.OperationID(op))
	}
	res, err := m.c.EnqueueRaw(m.ctx, "note", []byte(`{}`), append(opts, jobs.Unchecked())...)
	if err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	next, ev := m.m.Enqueue(model.Enqueue{ID: res.JobID, Op: op, MaxRetries: retries, Due: due})
	if ev.Created == res.Deduplicated || ev.JobID != res.JobID {
		t.Fatalf("enqueue %q: ledger %+v, model %+v", op, res, ev)
	}
	m.m = next
	if ev.Created {
		m.ids = append(m.ids, res.JobID)
	}
}

func (m *machine) claim(t *rapid.T) {
	n := rapid.IntRange(1, 3).Draw(t, "max")
	ttl := time.Minute
	if rapid.Bool().Draw(t, "short lease") {
		ttl = time.Millisecond
	}
	in := model.Claim{Max: n, TTL: ttl.Milliseconds(), Now: m.redisMs(t)}
	res, err := m.l.Claim(m.ctx, m.q, "pool", ttl, n)
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	if len(res.Jobs) > 0 {
		// The script's clock and fencing epoch, from its evidence: deadline
		// = now + ttl, and a token is max(previous + 1, (epoch << 52) + now
		// in µs).
		in.Now = res.Jobs[0].Deadline.UnixMilli() - in.TTL
		e := epoch.Of(uint64(res.Jobs[0].Token))
		us := uint64(in.Now) * 1000
		for _, c := range res.Jobs {
			if epoch.Of(uint64(c.Token)) != e {
				t.Fatalf("one claim minted tokens %d and %d of two epochs", res.Jobs[0].Token, c.Token)
			}
			if v := uint64(c.Token) - epoch.Floor(e, 0); v/1000 == uint64(in.Now) && (us%1000 == 0 || v < us) {
				us = v
			}
		}
		in.NowMicro = epoch.Floor(e, int64(us))
		// Every restart gives the server a new replication id, so the first
		// claim after one that followed a claim mints in a higher epoch.
		switch {
		case e < m.epoch:
			t.Fatalf("claim minted in epoch %d after epoch %d", e, m.epoch)
		case m.restarted && m.minted && e == m.epoch:
			t.Fatalf("claim after a restart minted in epoch %d again", e)
		}
		m.epoch, m.minted, m.restarted = e, true, false
	}
	next, ev := m.m.Claim(in)
	got := model.Claimed{Paused: res.Paused}
	for _, c := range res.Jobs {
		got.Jobs = append(got.Jobs, model.Attempt{ID: c.ID, Token: uint64(c.Token), Attempt: c.Attempt, Deadline: c.Deadline.UnixMilli()})
	}
	if !reflect.DeepEqual(got, ev) {
		t.Fatalf("claim max %d: ledger %+v, model %+v", n, got, ev)
	}
	m.m = next
	for _, a := range got.Jobs {
		if a.Token <= m.floor {
			t.Fatalf("token %d of %s not above %d, handed out before Redis lost its keys", a.Token, a.ID, m.floor)
		}
		m.tokens[a.ID] = append(m.tokens[a.ID], a.Token)
		m.high = max(m.high, a.Token)
		if bad := m.iv.Mint(a.ID, a.Token, fmt.Sprintf("attempt %d", a.Attempt)); len(bad) > 0 {
			t.Fatalf("invariants: %s", strings.Join(bad, "; "))
		}
	}
}

func (m *machine) renew(t *rapid.T) {
	var in model.Renew
	var as []ledger.Attempt
	for range rapid.IntRange(1, 3).Draw(t, "batch") {
		id := m.pickID(t)
		token := m.pickToken(t, id)
		in.Attempts = append(in.Attempts, model.Held{ID: id, Token: token})
		as = append(as, ledger.Attempt{ID: id, Token: tok(token)})
	}
	in.TTL, in.Now = time.Minute.Milliseconds(), m.redisMs(t)
	out, err := m.l.Renew(m.ctx, m.q, time.Minute, as)
	if err != nil {
		t.Fatalf("renew: %v", err)
	}
	got := make([]model.Renewal, len(out))
	for i, r := range out {
		got[i] = model.Renewal{Status: model.RenewStatus(r.Status), State: model.State(r.State)}
		if r.Status != ledger.Lost {
			in.Now = r.Deadline.UnixMilli() - in.TTL
		}
	}
	next, ev := m.m.Renew(in)
	if !reflect.DeepEqual(got, ev) {
		t.Fatalf("renew %+v: ledger %+v, model %+v", in.Attempts, got, ev)
	}
	m.m = next
}

func (m *machine) complete(t *rapid.T) {
	var in model.Complete
	var cs []ledger.Completion
	for range rapid.IntRange(1, 3).Draw(t, "batch") {
		id := m.pickID(t)
		c := model.Completion{ID: id, Token: m.pickToken(t, id),
			Outcome: rapid.SampledFrom([]model.Outcome{model.OutSucceeded, model.OutRetry, model.OutDead, model.OutUncertain, model.OutDefer}).Draw(t, "outcome"),
			Due:     m.due(rapid.IntRange(0, 4).Draw(t, "retry later") == 0)}
		in.Items = append(in.Items, c)
		o := ledger.Outcome{To: jobs.State(c.Outcome), RetryIn: time.Duration(c.Due-m.redisMs(t)) * time.Millisecond}
		switch c.Outcome {
		case model.OutRetry:
			o.To = jobs.Pending
		case model.OutDefer:
			o = ledger.Outcome{Defer: true, RetryIn: o.RetryIn, Reason: "resource busy"}
		}
		cs = append(cs, ledger.Completion{ID: id, Token: tok(c.Token), Outcome: o})
	}
	out, err := m.l.Complete(m.ctx, m.q, cs)
	if err != nil {
		t.Fatalf("complete: %v", err)
	}
	got := make([]model.Commit, len(out))
	for i, c := range out {
		got[i] = model.Commit{Applied: c.Applied, State: model.State(c.State), Current: uint64(c.Current)}
	}
	next, ev := m.m.Complete(in)
	if !reflect.DeepEqual(got, ev) {
		t.Fatalf("complete %+v: ledger %+v, model %+v", in.Items, got, ev)
	}
	m.m = next
}

func (m *machine) expire(t *rapid.T) {
	// Short leases (1 ms) must have passed by the Redis clock; long ones
	// (a minute) cannot have.
	var last int64
	for _, id := range m.m.IDs(model.Running) {
		if d := m.m.Jobs[id].Deadline; d < m.base+time.Hour.Milliseconds() && d > last && d < m.redisMs(t)+30_000 {
			last = d
		}
	}
	for m.redisMs(t) <= last {
		time.Sleep(time.Millisecond) // waiting for the Redis clock itself
	}
	leader := uint64(rapid.IntRange(1, 4).Draw(t, "leader"))
	in := model.Expire{Leader: leader, Now: m.redisMs(t)}
	res, err := m.l.Expire(m.ctx, m.q, tok(leader), 100)
	got := model.Expired{Stale: errors.Is(err, jobs.ErrStale)}
	if err != nil && !got.Stale {
		t.Fatalf("expire: %v", err)
	}
	if res != nil {
		got.Moved = append(got.Moved, res.Moved...)
		sort.Strings(got.Moved)
		if len(res.Dropped) > 0 {
			t.Fatalf("expire dropped index entries %v", res.Dropped)
		}
	}
	next, ev := m.m.Expire(in)
	if !reflect.DeepEqual(got, ev) {
		t.Fatalf("expire by %d: ledger %+v, model %+v", leader, got, ev)
	}
	m.m = next
}

// resolve applies r to the ledger and the model and compares.
func (m *machine) resolve(t *rapid.T, id string, r ledger.Resolution) {
	in := model.Resolve{ID: id, Decision: model.Decision(r.Decision), Leader: uint64(r.Leader), NotApplied: r.RetryIn != nil}
	if r.RetryIn != nil {
		in.RetryIn = r.RetryIn.Milliseconds()
	}
	for _, s := range r.From {
		in.From = append(in.From, model.State(s))
	}
	if len(in.From) == 0 {
		in.From = []model.State{model.Uncertain, model.Review}
	}
	before := m.redisMs(t)
	st, err := m.l.Decide(m.ctx, m.q, id, r)
	got := model.Resolved{Code: 1, State: model.State(st)}
	switch {
	case errors.Is(err, jobs.ErrStale):
		got.Code = -1
	case errors.Is(err, jobs.ErrNotFound):
		got = model.Resolved{State: model.Missing}
	case errors.Is(err, jobs.ErrWrongState):
		got.Code = 0
	case err != nil:
		t.Fatalf("resolve: %v", err)
	}
	if got.Code == 1 && r.Decision == jobs.DecideRerun && st == jobs.Pending {
		// A re-run is due at the script's clock (a retry after a verdict
		// "not applied", RetryIn after it); read it and check its bounds.
		due, err := m.rdb.ZScore(m.ctx, m.l.StateKey(m.q, jobs.Pending), id).Result()
		ran := int64(due) - in.RetryIn
		if err != nil || ran < before || ran > m.redisMs(t) {
			t.Fatalf("re-run of %s due at %v (%v), not %d ms after a time between %d and now", id, due, err, in.RetryIn, before)
		}
		in.Now = ran
	}
	next, ev := m.m.Resolve(in)
	if got != ev {
		t.Fatalf("resolve %s %s by %d from %v: ledger %+v, model %+v", id, r.Decision, r.Leader, in.From, got, ev)
	}
	m.m = next
}

func (m *machine) reconcile(t *rapid.T) {
	d := rapid.SampledFrom([]jobs.Decision{jobs.DecideSucceeded, jobs.DecideRerun, jobs.DecideDead, jobs.DecideReview, jobs.DecideLater}).Draw(t, "decision")
	leader := tok(rapid.IntRange(1, 4).Draw(t, "leader"))
	r := ledger.Resolution{Decision: d, Actor: "reconciler:model", Note: "evidence", Leader: leader, NextIn: time.Hour}
	if d == jobs.DecideRerun && rapid.Bool().Draw(t, "verdict not applied") {
		// the reconciler's verdict: a failed attempt, retried after its delay
		retry := time.Duration(rapid.IntRange(0, 1).Draw(t, "retry in hours")) * time.Hour
		r.RetryIn = &retry
	}
	m.resolve(t, m.pickID(t), r)
}

// notApplied is the resolver's verdict "not applied" on an uncertain job
// (one the random picks of reconcile rarely reach), by the newest leader
// seen: a failed attempt, retried or dead by the job's attempts.
func (m *machine) notApplied(t *rapid.T) {
	var ids []string
	for _, id := range m.ids {
		if m.m.Get(id).State == model.Uncertain {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return
	}
	id := rapid.SampledFrom(ids).Draw(t, "uncertain id")
	retry := time.Duration(rapid.IntRange(0, 1).Draw(t, "retry in hours")) * time.Hour
	m.resolve(t, id, ledger.Resolution{From: []jobs.State{jobs.Uncertain}, Decision: jobs.DecideRerun, Actor: "reconciler:model",
		Note: "not applied", Leader: tok(max(m.m.Leader, 1)), RetryIn: &retry})
}

func (m *machine) operator(t *rapid.T) {
	m.step.Operator = true
	switch action := rapid.SampledFrom([]string{"cancel", "rerun", "succeeded", "dead", "pause", "resume"}).Draw(t, "action"); action {
	case "cancel":
		id := m.pickID(t)
		st, err := m.l.Cancel(m.ctx, m.q, id, "operator:ada", "")
		got := model.CancelResult{Code: 1, State: model.State(st)}
		switch {
		case errors.Is(err, jobs.ErrNotFound):
			got = model.CancelResult{State: model.Missing}
		case errors.Is(err, jobs.ErrWrongState):
			got.Code = 0
		case err != nil:
			t.Fatalf("cancel: %v", err)
		case st == jobs.Running:
			got.Code = 2
		}
		next, ev := m.m.Cancel(model.Cancel{ID: id})
		if got != ev {
			t.Fatalf("cancel %s: ledger %+v, model %+v", id, got, ev)
		}
		m.m = next
	case "pause", "resume":
		changed, err := m.l.SetPaused(m.ctx, m.q, action == "pause", "operator:ada", "")
		if err != nil {
			t.Fatalf("%s: %v", action, err)
		}
		next, ev := m.m.SetPaused(model.SetPaused{Paused: action == "pause"})
		if changed != ev {
			t.Fatalf("%s: ledger changed %v, model %v", action, changed, ev)
		}
		m.m = next
	default: // the operator's resolutions, from the states Client.Resolve allows
		from := []jobs.State{jobs.Review, jobs.Uncertain}
		if action == "rerun" {
			from = append(from, jobs.Dead, jobs.Cancelled)
		}
		m.resolve(t, m.pickID(t), ledger.Resolution{From: from, Decision: jobs.Decision(action), Actor: "operator:ada", Note: "by hand"})
	}
}

func (m *machine) restart(t *rapid.T) {
	if rapid.IntRange(0, 5).Draw(t, "restart now") != 0 {
		return // restarts are slow: most draws do nothing
	}
	m.srv.Restart()
	m.restarted = true
	m.m = m.m.Restart(model.Restart{Persistent: m.persistent})
	if !m.persistent {
		m.step.Reset = true
		m.floor = m.high
	}
}

// check compares the ledger's observable state with the model's and
// checks the invariants.
func (m *machine) check(t *rapid.T) {
	snap := model.Snapshot{Jobs: map[string]model.Observed{}, Index: map[model.State][]string{}}
	for _, id := range m.ids {
		want := m.m.Get(id)
		rec, err := m.l.Get(m.ctx, m.q, id)
		got := model.Job{ID: id, State: model.Missing}
		switch {
		case errors.Is(err, jobs.ErrNotFound):
		case err != nil:
			t.Fatalf("get %s: %v", id, err)
		default:
			got.State, got.Token, got.Attempts = model.State(rec.State), uint64(rec.Token), rec.Attempts
		}
		if got.State != want.State || got.Token != want.Token || got.Attempts != want.Attempts {
			t.Fatalf("job %s: ledger %s token %d attempts %d, model %s token %d attempts %d",
				id, got.State, got.Token, got.Attempts, want.State, want.Token, want.Attempts)
		}
		snap.Jobs[id] = model.Observed{State: got.State, Token: got.Token}
	}
	counts, err := m.l.Counts(m.ctx, m.q)
	if err != nil {
		t.Fatalf("counts: %v", err)
	}
	wantCounts := m.m.Counts()
	for _, s := range model.States {
		ids, err := m.l.IDs(m.ctx, m.q, jobs.State(s), 0, 1000)
		if err != nil {
			t.Fatalf("ids: %v", err)
		}
		sort.Strings(ids)
		snap.Index[s] = ids
		if want := m.m.IDs(s); counts[jobs.State(s)] != int64(wantCounts[s]) || !reflect.DeepEqual(ids, want) && len(ids)+len(want) > 0 {
			t.Fatalf("%s index: ledger %v (count %d), model %v", s, ids, counts[jobs.State(s)], want)
		}
	}
	if p, err := m.l.Paused(m.ctx, m.q); err != nil || (p != nil) != m.m.Paused {
		t.Fatalf("paused: ledger %+v (%v), model %v", p, err, m.m.Paused)
	}
	if bad := m.iv.Observe(m.step, snap); len(bad) > 0 {
		t.Fatalf("invariants: %s", strings.Join(bad, "; "))
	}
	m.step = model.Step{}
}

// tok converts to a token.
func tok[T ~int | ~uint64](v T) lease.Token { return lease.Token(v) }

func (m *machine) actions() map[string]func(*rapid.T) {
	return map[string]func(*rapid.T){
		"enqueue":    m.enqueue,
		"claim":      m.claim,
		"renew":      m.renew,
		"complete":   m.complete,
		"expire":     m.expire,
		"reconcile":  m.reconcile,
		"notApplied": m.notApplied,
		"operator":   m.operator,
		"restart":    m.restart,
		"":           m.check,
	}
}

// ledgerProperty is the state-machine property: random action sequences
// on a fresh namespace of srv's Redis agree with the model.
func ledgerProperty(srv *redistest.Server, rdb *redis.Client, persistent bool) func(*rapid.T) {
	return func(t *rapid.T) {
		m := newMachine(srv, rdb, persistent, t)
		t.Repeat(m.actions())
	}
}

func TestModelLedgerWithPersistence(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{AOF: true})
	rapid.Check(t, ledgerProperty(srv, srv.Client(), true))
}

func TestModelLedgerWithoutPersistence(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	rapid.Check(t, ledgerProperty(srv, srv.Client(), false))
}

// TestModelCatchesBrokenScripts runs the state-machine property with each
// deliberately broken script and requires rapid to report a failure.
func TestModelCatchesBrokenScripts(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	rdb := srv.Client()
	defer setFlag(t, "rapid.shrinktime", "2s")()
	defer setFlag(t, "rapid.checks", "100")()
	for _, name := range []string{"complete-no-token-check", "claim-reuse-token"} {
		t.Run(name, func(t *testing.T) {
			defer ledger.UseBrokenScript(name)()
			rec := runExpectingFailure(func(tb rapid.TB) { rapid.Check(tb, ledgerProperty(srv, rdb, false)) })
			if !rec.failed {
				t.Fatalf("the model check passed with %s", name)
			}
			t.Logf("caught: %s", firstLine(rec.errors))
		})
	}
}

// setFlag sets a command-line flag for one test and returns the undo.
func setFlag(t *testing.T, name, value string) func() {
	f := flag.Lookup(name)
	old := f.Value.String()
	if err := flag.Set(name, value); err != nil {
		t.Fatal(err)
	}
	return func() { _ = flag.Set(name, old) }
}

// recordingTB is a rapid.TB that records failures instead of failing the
// test, so a test can require a check to fail.
type recordingTB struct {
	mu     sync.Mutex
	failed bool
	errors []string
}

func (r *recordingTB) Helper()                   {}
func (r *recordingTB) Name() string              { return "broken" }
func (r *recordingTB) Logf(string, ...any)       {}
func (r *recordingTB) Log(...any)                {}
func (r *recordingTB) Skipf(f string, a ...any)  { r.Errorf("skipped: "+f, a...); runtime.Goexit() }
func (r *recordingTB) Skip(a ...any)             { r.Error(a...); runtime.Goexit() }
func (r *recordingTB) SkipNow()                  { r.Fail(); runtime.Goexit() }
func (r *recordingTB) Errorf(f string, a ...any) { r.Error(fmt.Sprintf(f, a...)) }
func (r *recordingTB) Fatalf(f string, a ...any) { r.Errorf(f, a...); runtime.Goexit() }
func (r *recordingTB) Fatal(a ...any)            { r.Error(a...); runtime.Goexit() }
func (r *recordingTB) FailNow()                  { r.Fail(); runtime.Goexit() }
func (r *recordingTB) Error(a ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = true
	r.errors = append(r.errors, fmt.Sprint(a...))
}
func (r *recordingTB) Fail() { r.mu.Lock(); r.failed = true; r.mu.Unlock() }
func (r *recordingTB) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

// runExpectingFailure runs check on a recordingTB in its own goroutine
// (FailNow ends it) and returns what it recorded.
func runExpectingFailure(check func(rapid.TB)) *recordingTB {
	rec := &recordingTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		check(rec)
	}()
	<-done
	return rec
}

func firstLine(msgs []string) string {
	if len(msgs) == 0 {
		return ""
	}
	s := msgs[0]
	if i := strings.Index(s, "\nTo reproduce"); i > 0 {
		s = s[:i]
	}
	return s
}
