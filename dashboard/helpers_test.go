package dashboard_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/syncbuf"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// xss is the markup planted in args and error texts.
const xss = `<script>alert(1)</script>`

// secret is a sensitive arg value that must never be served.
const secret = "hunter2-card-4111"

type echoArgs struct {
	N      int    `json:"n"`
	Note   string `json:"note"`
	Secret string `json:"secret" fencedq:"sensitive"`
}

func (echoArgs) Kind() string { return "echo" }

type chargeArgs struct {
	Account string `json:"account"`
	Memo    string `json:"memo"`
	Card    string `json:"card" fencedq:"sensitive"`
}

func (chargeArgs) Kind() string { return "charge" }

type brokenArgs struct {
	Why string `json:"why"`
}

func (brokenArgs) Kind() string { return "broken" }

// fixture is one test's Redis namespace with jobs in every state, made by a
// real worker pool and, where a pool cannot reach a state on demand
// (review, a crashed worker's running job), by ledger transitions.
type fixture struct {
	t      *testing.T
	rdb    *redis.Client
	ns     string
	client *jobs.Client
	ledger *ledger.Ledger
	insp   *jobs.Inspector
	logs   *syncbuf.Buffer

	echo      string // succeeded; later found again in the due index (deduplicated at execute) and re-enqueued (at enqueue)
	uncertain string // charge: handler said the outcome is unknown; error text holds markup
	review    string // charge: moved to review
	dead      string // broken: permanent error
	pending   string // echo delayed an hour
	cancelled string // echo delayed an hour, then cancelled by operator alice
	stuck     string // queue "slow": claimed by a worker that died; lease nearly or already expired
	healthy   string // queue "slow": running with a long lease; alice asked to cancel it
	stuckTok  string // the stuck attempt's token
	tickJob   string // queue "reports": the job the newest tick of schedule hourly-echo produced (see schedules)
	// Queue "slow" is paused by operator bob.
}

// newFixture returns an empty namespace with a client.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	rdb, ns := redistest.New(t)
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	t.Cleanup(func() { _ = c.Close() })
	return &fixture{t: t, rdb: rdb, ns: ns, client: c, ledger: ledger.New(rdb, ledger.Config{Namespace: ns}), insp: c.Inspector(), logs: &syncbuf.Buffer{}}
}

// seed fills the namespace: it runs a pool over queue "default" until every
// job there settled, then adds the states a pool cannot be asked for.
func (f *fixture) seed() *fixture {
	t := f.t
	t.Helper()
	ctx := context.Background()
	p, err := worker.NewPool(f.rdb, worker.Config{
		Jobs:            jobs.Config{Namespace: f.ns},
		Concurrency:     4,
		LeaseTTL:        time.Second,
		HandlerTimeout:  5 * time.Second,
		ShutdownTimeout: 5 * time.Second,
		RetryDelay:      func(int) time.Duration { return 50 * time.Millisecond },
		Logger:          slog.New(slog.DiscardHandler),
		Maintenance:     worker.MaintenanceConfig{Disabled: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	must(t, worker.Register(p, jobs.WorkFunc[echoArgs](func(context.Context, *jobs.Job[echoArgs]) error { return nil })))
	must(t, worker.Register(p, jobs.WorkFunc[chargeArgs](func(context.Context, *jobs.Job[chargeArgs]) error {
		return jobs.Unknown(errors.New("gateway timed out after sending " + xss))
	})))
	must(t, worker.Register(p, jobs.WorkFunc[brokenArgs](func(context.Context, *jobs.Job[brokenArgs]) error {
		return jobs.Permanent(errors.New("card declined"))
	})))
	pctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(pctx) }()
	stop := func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("pool: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Error("pool did not stop")
		}
	}

	f.echo = f.enqueue(echoArgs{N: 1, Note: "hello", Secret: secret}, jobs.OperationID("op-echo"))
	f.uncertain = f.enqueue(chargeArgs{Account: "acct-1", Memo: xss, Card: secret}, jobs.OperationID("op-charge-1"),
		jobs.Header("tenant", xss), jobs.Header("region", "eu"))
	f.review = f.enqueue(chargeArgs{Account: "acct-2", Memo: "second", Card: secret}, jobs.OperationID("op-charge-2"))
	f.dead = f.enqueue(brokenArgs{Why: "test"}, jobs.OperationID("op-broken"))
	f.pending = f.enqueue(echoArgs{N: 2}, jobs.OperationID("op-later"), jobs.Delay(time.Hour))
	jobstest.WaitState(t, f.ledger, "default", f.echo, jobs.Succeeded)
	jobstest.WaitState(t, f.ledger, "default", f.uncertain, jobs.Uncertain)
	jobstest.WaitState(t, f.ledger, "default", f.review, jobs.Uncertain)
	jobstest.WaitState(t, f.ledger, "default", f.dead, jobs.Dead)
	stop()

	// The reconciler could not tell: hand the job to an operator.
	_, err = f.ledger.Decide(ctx, "default", f.review, ledger.Resolution{From: []jobs.State{jobs.Uncertain}, Decision: jobs.DecideReview,
		Actor: "reconciler", Note: "cannot tell after 3 tries"})
	must(t, err)

	// An operator cancels a scheduled job.
	f.cancelled = f.enqueue(echoArgs{N: 5}, jobs.OperationID("op-cancel"), jobs.Delay(time.Hour))
	rec, err := f.client.Cancel(ctx, "default", f.cancelled, "alice", "customer withdrew")
	must(t, err)
	if rec.State != jobs.Cancelled {
		t.Fatalf("cancelled a scheduled job: %+v", rec)
	}

	// Duplicates: the same operation id again, and a succeeded job found
	// again in the due index (a stray entry): the claim drops it.
	res, err := f.client.Enqueue(ctx, echoArgs{N: 1}, jobs.OperationID("op-echo"))
	must(t, err)
	if !res.Deduplicated || res.JobID != f.echo {
		t.Fatalf("second enqueue of op-echo: %+v", res)
	}
	must(t, f.rdb.ZAdd(ctx, f.ledger.StateKey("default", jobs.Pending), redis.Z{Score: 0, Member: f.echo}).Err())
	cr, err := f.ledger.Claim(ctx, "default", "late-worker", time.Second, 1)
	must(t, err)
	if len(cr.Jobs) != 0 || len(cr.Dropped) != 1 || cr.Dropped[0].ID != f.echo || cr.Dropped[0].State != string(jobs.Succeeded) {
		t.Fatalf("claim of a succeeded job: %+v", cr)
	}

	// Queue "slow" has no worker: claim its jobs by hand, as a worker that
	// then died would have.
	f.stuck = f.enqueue(echoArgs{N: 3}, jobs.Queue("slow"), jobs.OperationID("op-stuck"))
	cl := f.claimOne("slow", f.stuck, "crashed-worker", 200*time.Millisecond)
	f.stuckTok = cl.Token.String()
	f.healthy = f.enqueue(echoArgs{N: 4}, jobs.Queue("slow"), jobs.OperationID("op-healthy"))
	f.claimOne("slow", f.healthy, "live-worker", 10*time.Minute)
	// An older token's commit is fenced off.
	cs, err := f.ledger.Complete(ctx, "slow", []ledger.Completion{{ID: f.stuck, Token: cl.Token - 1, Outcome: ledger.Outcome{To: jobs.Succeeded}}})
	must(t, err)
	if cs[0].Applied || cs[0].Current != cl.Token {
		t.Fatalf("stale commit: %+v", cs[0])
	}
	// An operator asks the healthy attempt to stop, and pauses the queue.
	rec, err = f.client.Cancel(ctx, "slow", f.healthy, "alice", "duplicate order")
	must(t, err)
	if rec.State != jobs.Running || rec.CancelledBy != "operator:alice" {
		t.Fatalf("cancel of a running job: %+v", rec)
	}
	changed, err := f.client.Pause(ctx, "slow", "bob", "gateway maintenance")
	must(t, err)
	if !changed {
		t.Fatal("pause of a running queue changed nothing")
	}
	return f
}

// claimOne claims the next due job of queue q, which must be id, as owner.
func (f *fixture) claimOne(q, id, owner string, ttl time.Duration) ledger.Claimed {
	f.t.Helper()
	res, err := f.ledger.Claim(context.Background(), q, owner, ttl, 1)
	must(f.t, err)
	if len(res.Jobs) != 1 || res.Jobs[0].ID != id {
		f.t.Fatalf("claim in %s: want job %s, got %+v", q, id, res)
	}
	return res.Jobs[0]
}

func (f *fixture) enqueue(args jobs.JobArgs, opts ...jobs.Option) string {
	f.t.Helper()
	res, err := f.client.Enqueue(context.Background(), args, opts...)
	must(f.t, err)
	return res.JobID
}

func (f *fixture) state(q, id string) jobs.State {
	f.t.Helper()
	r, err := f.ledger.Get(context.Background(), q, id)
	must(f.t, err)
	return r.State
}

// handler builds the dashboard with opts, logging into f.logs.
func (f *fixture) handler(opts dashboard.Options) *dashboard.Handler {
	f.t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewJSONHandler(f.logs, nil))
	}
	h, err := dashboard.New(f.insp, f.client, opts)
	must(f.t, err)
	return h
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// call serves one request and returns the response and its body.
func call(t *testing.T, h http.Handler, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	rr := httptest.NewRecorder()
	h.ServeHTTP(rr, req)
	res := rr.Result()
	body, _ := io.ReadAll(res.Body)
	return res, body
}

// getJSON GETs path from h, wants 200, and decodes into v.
func getJSON(t *testing.T, h http.Handler, path string, v any) []byte {
	t.Helper()
	res, body := call(t, h, httptest.NewRequest(http.MethodGet, path, nil))
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, res.StatusCode, body)
	}
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("GET %s: content type %q", path, ct)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: %v in %s", path, err, body)
	}
	return body
}

// reviewJob creates a job in queue q and walks it to review through ledger
// transitions (claim, an uncertain commit, a resolver hand-off), as a pool
// and its maintenance leader would.
func (f *fixture) reviewJob(q string, args jobs.JobArgs, op string) string {
	f.t.Helper()
	ctx := context.Background()
	id := f.enqueue(args, jobs.Queue(q), jobs.OperationID(op))
	cl := f.claimOne(q, id, "w1", time.Minute)
	cs, err := f.ledger.Complete(ctx, q, []ledger.Completion{{ID: id, Token: cl.Token,
		Outcome: ledger.Outcome{To: jobs.Uncertain, Error: "timeout after send: " + xss, Reason: "deadline passed mid-call"}}})
	must(f.t, err)
	if !cs[0].Applied || cs[0].State != jobs.Uncertain {
		f.t.Fatalf("commit: %+v", cs[0])
	}
	_, err = f.ledger.Decide(ctx, q, id, ledger.Resolution{Decision: jobs.DecideReview, Actor: "reconciler", Note: "cannot tell"})
	must(f.t, err)
	return id
}

// deadJob creates a job in queue q and commits it dead.
func (f *fixture) deadJob(q string, op string) string {
	f.t.Helper()
	ctx := context.Background()
	id := f.enqueue(brokenArgs{Why: "x"}, jobs.Queue(q), jobs.OperationID(op))
	cl := f.claimOne(q, id, "w1", time.Minute)
	cs, err := f.ledger.Complete(ctx, q, []ledger.Completion{{ID: id, Token: cl.Token,
		Outcome: ledger.Outcome{To: jobs.Dead, Error: "declined", Reason: "permanent error"}}})
	must(f.t, err)
	if !cs[0].Applied || cs[0].State != jobs.Dead {
		f.t.Fatalf("commit: %+v", cs[0])
	}
	return id
}
