package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

type rangeArgs struct {
	N int `json:"n"`
}

func (rangeArgs) Kind() string { return "range" }

// TestNilOptionIsRefused: a nil option (an unset variable of type
// jobs.Option passed along) is refused with ErrInvalid naming its place,
// by every entry point that takes options, before anything is written,
// instead of panicking.
func TestNilOptionIsRefused(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	var unset jobs.Option
	_, err := c.Enqueue(ctx, rangeArgs{N: 1}, jobs.Queue("q"), unset)
	if !errors.Is(err, jobs.ErrInvalid) || !strings.Contains(err.Error(), "option 1 of the enqueue is nil") {
		t.Errorf("Enqueue: %v, want ErrInvalid naming option 1", err)
	}
	if _, err := c.EnqueueRaw(ctx, "range", []byte(`{"n":1}`), jobs.Unchecked(), unset); !errors.Is(err, jobs.ErrInvalid) {
		t.Errorf("EnqueueRaw: %v, want ErrInvalid", err)
	}
	if _, err := c.EnqueueMany(ctx, []jobs.Params{{Args: rangeArgs{N: 1}}, {Args: rangeArgs{N: 2}, Options: []jobs.Option{unset}}}); !errors.Is(err, jobs.ErrInvalid) {
		t.Errorf("EnqueueMany: %v, want ErrInvalid", err)
	}
	if _, err := jobs.Prepare(rangeArgs{N: 1}, unset); !errors.Is(err, jobs.ErrInvalid) {
		t.Errorf("Prepare: %v, want ErrInvalid", err)
	}
	pass := func(next jobs.EnqueueFunc) jobs.EnqueueFunc { return next }
	through := jobs.NewClient(rdb, jobs.Config{Namespace: ns, EnqueueMiddleware: []jobs.EnqueueMiddleware{pass}})
	if _, err := through.Enqueue(ctx, rangeArgs{N: 1}, unset); !errors.Is(err, jobs.ErrInvalid) {
		t.Errorf("Enqueue through a middleware: %v, want ErrInvalid", err)
	}
	if keys, err := rdb.Keys(ctx, "*"+ns+"*").Result(); err != nil || len(keys) != 0 {
		t.Errorf("keys written: %v (%v)", keys, err)
	}
}

// TestNilEnqueueMiddlewareIsRefused: a client whose Config lists a nil
// enqueue middleware fails every call with ErrInvalid naming it (as for any
// invalid Config), instead of panicking at its first enqueue.
func TestNilEnqueueMiddlewareIsRefused(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	pass := func(next jobs.EnqueueFunc) jobs.EnqueueFunc { return next }
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns, EnqueueMiddleware: []jobs.EnqueueMiddleware{pass, nil}})
	if _, err := c.Enqueue(ctx, rangeArgs{N: 1}); !errors.Is(err, jobs.ErrInvalid) || !strings.Contains(err.Error(), "EnqueueMiddleware 1 is nil") {
		t.Errorf("Enqueue: %v, want ErrInvalid naming EnqueueMiddleware 1", err)
	}
	if keys, err := rdb.Keys(ctx, "*"+ns+"*").Result(); err != nil || len(keys) != 0 {
		t.Errorf("keys written: %v (%v)", keys, err)
	}
}

// TestEnqueueRefusesNumbersOutOfRange: numbers and durations that do not fit
// are refused (nothing written), never wrapped or truncated; sub-millisecond
// durations round up to the millisecond the ledger stores.
func TestEnqueueRefusesNumbersOutOfRange(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	for name, opt := range map[string]jobs.Option{
		"max retries past int32": jobs.MaxRetries(math.MaxInt32 + 1),
		"negative max retries":   jobs.MaxRetries(-1),
		"timeout past a year":    jobs.Timeout(366 * 24 * time.Hour),
		"delay past a century":   jobs.Delay(101 * 365 * 24 * time.Hour),
		"run at past a century":  jobs.RunAt(time.Now().Add(101 * 365 * 24 * time.Hour)),
		"negative timeout":       jobs.Timeout(-time.Second),
		"negative delay":         jobs.Delay(-time.Second),
	} {
		if _, err := c.Enqueue(ctx, rangeArgs{N: 1}, opt); !errors.Is(err, jobs.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	// A negative duration is refused naming the option and its value.
	for want, opt := range map[string]jobs.Option{
		"timeout -1s is negative": jobs.Timeout(-time.Second), "delay -1h0m0s is negative": jobs.Delay(-time.Hour),
	} {
		if _, err := c.Enqueue(ctx, rangeArgs{N: 1}, opt); !strings.Contains(fmt.Sprint(err), want) {
			t.Errorf("%v, want ErrInvalid saying %q", err, want)
		}
	}
	// A delay and a run-at time together say two due times: refused, not
	// one of them dropped, on every path to the write.
	both := []jobs.Option{jobs.Delay(time.Hour), jobs.RunAt(time.Now())}
	if _, err := c.Enqueue(ctx, rangeArgs{N: 1}, both...); !errors.Is(err, jobs.ErrInvalid) {
		t.Errorf("Delay with RunAt: %v, want ErrInvalid", err)
	}
	if _, err := jobs.Prepare(rangeArgs{N: 1}, both...); !errors.Is(err, jobs.ErrInvalid) {
		t.Errorf("Prepare with Delay and RunAt: %v, want ErrInvalid", err)
	}
	viaMW := jobs.NewClient(rdb, jobs.Config{Namespace: ns, EnqueueMiddleware: []jobs.EnqueueMiddleware{passThrough}})
	if _, err := viaMW.Enqueue(ctx, rangeArgs{N: 1}, both...); !errors.Is(err, jobs.ErrInvalid) {
		t.Errorf("Delay with RunAt through middleware: %v, want ErrInvalid", err)
	}
	if _, err := c.EnqueueMany(ctx, []jobs.Params{{Args: rangeArgs{}}, {Args: rangeArgs{}, Options: []jobs.Option{jobs.MaxRetries(math.MaxInt32 + 1)}}}); !errors.Is(err, jobs.ErrInvalid) {
		t.Errorf("EnqueueMany with one bad job: %v", err)
	}
	if keys, _ := rdb.Keys(ctx, ns+":*").Result(); len(keys) != 0 {
		t.Fatalf("refused enqueues wrote %v", keys)
	}
	if err := (jobs.Config{Retention: time.Millisecond}).Validate(); !errors.Is(err, jobs.ErrInvalid) {
		t.Errorf("a 1ms retention: %v", err)
	}

	res, err := c.Enqueue(ctx, rangeArgs{N: 2}, jobs.Timeout(500*time.Microsecond), jobs.MaxRetries(math.MaxInt32))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := c.Inspector().Get(ctx, res.Queue, res.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Timeout != time.Millisecond || rec.MaxRetries != math.MaxInt32 {
		t.Fatalf("stored timeout %v, max retries %d: want 1ms (rounded up) and %d", rec.Timeout, rec.MaxRetries, math.MaxInt32)
	}
}

// passThrough is enqueue middleware that changes nothing: a client with
// middleware validates on the middleware chain's path.
func passThrough(next jobs.EnqueueFunc) jobs.EnqueueFunc { return next }

// TestUncheckedDoesNotOverrideALivePoolsRules: Unchecked vouches only for
// a kind no live pool runs; a kind a live pool reports with rules is
// refused for a raw enqueue all the same (ErrInvalid, nothing written),
// with or without enqueue middleware; a kind no live pool runs is refused
// with ErrUnknownKind, the error naming Unchecked as the way to vouch for it.
func TestUncheckedDoesNotOverrideALivePoolsRules(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	l := ledger.New(rdb, ledger.Config{Namespace: ns})
	if err := l.Heartbeat(ctx, jobs.PoolInfo{ID: "pool-1", Queues: map[string]int{jobs.DefaultQueue: 1}, Concurrency: 1,
		Kinds: map[string]jobs.KindRules{
			"pay":   {Sensitive: true},
			"acct":  {Resource: true, Limit: true},
			"plain": {},
		}}, time.Minute); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]*jobs.Client{
		"plain client":    jobs.NewClient(rdb, jobs.Config{Namespace: ns}),
		"with middleware": jobs.NewClient(rdb, jobs.Config{Namespace: ns, EnqueueMiddleware: []jobs.EnqueueMiddleware{passThrough}}),
	} {
		for _, e := range []struct {
			kind string
			opts []jobs.Option
			want string
		}{
			{"pay", nil, "(sensitive fields)"},
			{"acct", []jobs.Option{jobs.Resource("account:1")}, "(Resource, Limit)"},
			{"acct", []jobs.Option{jobs.Resource("account:1"), jobs.Limit("acct:1", 1)}, "(Resource)"},
		} {
			_, err := c.EnqueueRaw(ctx, e.kind, []byte(`{"card":"SECRET"}`), append(e.opts, jobs.Unchecked())...)
			if !errors.Is(err, jobs.ErrInvalid) || !strings.Contains(err.Error(), e.want) || !strings.Contains(err.Error(), "Unchecked vouches only") {
				t.Errorf("%s: unchecked raw %s: %v, want ErrInvalid naming %s", name, e.kind, err, e.want)
			}
		}
		// what Unchecked is for: a kind no live pool runs, refused with an
		// error that names the way out
		if _, err := c.EnqueueRaw(ctx, "nobody-runs-this", []byte(`{}`)); !errors.Is(err, jobs.ErrInvalid) ||
			!errors.Is(err, jobs.ErrUnknownKind) || !strings.Contains(err.Error(), "jobs.Unchecked()") {
			t.Errorf("%s: raw kind no pool runs: %v, want ErrInvalid and ErrUnknownKind naming jobs.Unchecked()", name, err)
		}
		for _, kind := range []string{"nobody-runs-this", "plain"} {
			if _, err := c.EnqueueRaw(ctx, kind, []byte(`{}`), jobs.Unchecked()); err != nil {
				t.Errorf("%s: unchecked raw %s: %v", name, kind, err)
			}
		}
	}
	counts, err := jobs.NewClient(rdb, jobs.Config{Namespace: ns}).Inspector().Counts(ctx, jobs.DefaultQueue)
	if err != nil || counts[jobs.Pending] != 4 {
		t.Fatalf("pending %v (%v), want only the 4 accepted jobs: a refused one was written", counts, err)
	}
}

// setOperation is enqueue middleware that gives every job an operation id.
func setOperation(next jobs.EnqueueFunc) jobs.EnqueueFunc {
	return func(ctx context.Context, reqs []*jobs.EnqueueRequest) ([]*jobs.Result, error) {
		for _, r := range reqs {
			r.OperationID = "from-middleware"
		}
		return next(ctx, reqs)
	}
}

// TestEnqueueRefusesAnEmptyOperationID: OperationID("") is an error
// (ErrInvalid, nothing written), not taken for "none", in Enqueue,
// EnqueueRaw, every job of EnqueueMany, Prepare and through middleware,
// unless middleware gives the job an operation id.
func TestEnqueueRefusesAnEmptyOperationID(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	empty := jobs.OperationID("")
	for name, c := range map[string]*jobs.Client{
		"plain client":    jobs.NewClient(rdb, jobs.Config{Namespace: ns}),
		"with middleware": jobs.NewClient(rdb, jobs.Config{Namespace: ns, EnqueueMiddleware: []jobs.EnqueueMiddleware{passThrough}}),
	} {
		if _, err := c.Enqueue(ctx, rangeArgs{N: 1}, empty); !errors.Is(err, jobs.ErrInvalid) || !strings.Contains(err.Error(), "operation id") {
			t.Errorf("%s: Enqueue: %v, want ErrInvalid", name, err)
		}
		if _, err := c.EnqueueRaw(ctx, "raw", []byte(`{}`), empty, jobs.Unchecked()); !errors.Is(err, jobs.ErrInvalid) {
			t.Errorf("%s: EnqueueRaw: %v, want ErrInvalid", name, err)
		}
		_, err := c.EnqueueMany(ctx, []jobs.Params{{Args: rangeArgs{N: 1}, Options: []jobs.Option{jobs.OperationID("fine")}},
			{Args: rangeArgs{N: 2}, Options: []jobs.Option{empty}}})
		if !errors.Is(err, jobs.ErrInvalid) || !strings.Contains(err.Error(), "job 1") {
			t.Errorf("%s: EnqueueMany: %v, want ErrInvalid for job 1", name, err)
		}
	}
	if _, err := jobs.Prepare(rangeArgs{N: 1}, empty); !errors.Is(err, jobs.ErrInvalid) {
		t.Errorf("Prepare: %v, want ErrInvalid", err)
	}
	if keys, _ := rdb.Keys(ctx, ns+":*").Result(); len(keys) != 0 {
		t.Fatalf("refused enqueues wrote %v", keys)
	}
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns, EnqueueMiddleware: []jobs.EnqueueMiddleware{setOperation}})
	res, err := c.Enqueue(ctx, rangeArgs{N: 3}, empty)
	if err != nil || res.OperationID != "from-middleware" {
		t.Fatalf("middleware giving the operation id: %+v %v", res, err)
	}
}

// TestEnqueueRefusesAnEmptyResource: Resource("") is an error (ErrInvalid,
// nothing written), not taken for "the job itself": a resource built from
// an empty value (an account id not set) would otherwise lease each job
// alone, and jobs meant to exclude each other would run at once. So in
// Enqueue, EnqueueRaw, every job of EnqueueMany, Prepare and through
// middleware; args whose Resource method names one take it as before.
func TestEnqueueRefusesAnEmptyResource(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	empty := jobs.Resource("")
	for name, c := range map[string]*jobs.Client{
		"plain client":    jobs.NewClient(rdb, jobs.Config{Namespace: ns}),
		"with middleware": jobs.NewClient(rdb, jobs.Config{Namespace: ns, EnqueueMiddleware: []jobs.EnqueueMiddleware{passThrough}}),
	} {
		if _, err := c.Enqueue(ctx, rangeArgs{N: 1}, empty); !errors.Is(err, jobs.ErrInvalid) || !strings.Contains(err.Error(), "resource") {
			t.Errorf("%s: Enqueue: %v, want ErrInvalid naming the resource", name, err)
		}
		if _, err := c.EnqueueRaw(ctx, "raw", []byte(`{}`), empty, jobs.Unchecked()); !errors.Is(err, jobs.ErrInvalid) {
			t.Errorf("%s: EnqueueRaw: %v, want ErrInvalid", name, err)
		}
		_, err := c.EnqueueMany(ctx, []jobs.Params{{Args: rangeArgs{N: 1}, Options: []jobs.Option{jobs.Resource("account:1")}},
			{Args: rangeArgs{N: 2}, Options: []jobs.Option{empty}}})
		if !errors.Is(err, jobs.ErrInvalid) || !strings.Contains(err.Error(), "job 1") {
			t.Errorf("%s: EnqueueMany: %v, want ErrInvalid for job 1", name, err)
		}
	}
	if _, err := jobs.Prepare(rangeArgs{N: 1}, empty); !errors.Is(err, jobs.ErrInvalid) {
		t.Errorf("Prepare: %v, want ErrInvalid", err)
	}
	if keys, _ := rdb.Keys(ctx, ns+":*").Result(); len(keys) != 0 {
		t.Fatalf("refused enqueues wrote %v", keys)
	}
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	res, err := c.Enqueue(ctx, resourceArgs{Account: "7"}, empty)
	if err != nil {
		t.Fatalf("args naming their resource, with Resource(\"\"): %v", err)
	}
	rec, err := c.Inspector().Get(ctx, res.Queue, res.JobID)
	if err != nil || rec.Resource != "account:7" {
		t.Fatalf("args naming their resource: %+v %v, want resource account:7", rec, err)
	}
}

// resourceArgs name the resource their attempts lease.
type resourceArgs struct {
	Account string `json:"account"`
}

func (resourceArgs) Kind() string       { return "resourced" }
func (a resourceArgs) Resource() string { return "account:" + a.Account }

// TestEnqueueRefusesNilPointerArgs: a nil pointer to args is refused like
// nil args (ErrInvalid, nothing written) by every typed entry point, with
// and without enqueue middleware, never a panic from calling its Kind.
func TestEnqueueRefusesNilPointerArgs(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	pass := func(next jobs.EnqueueFunc) jobs.EnqueueFunc { return next }
	for _, c := range []*jobs.Client{
		jobs.NewClient(rdb, jobs.Config{Namespace: ns}),
		jobs.NewClient(rdb, jobs.Config{Namespace: ns, EnqueueMiddleware: []jobs.EnqueueMiddleware{pass}}),
	} {
		var nilArgs *rangeArgs
		if _, err := c.Enqueue(ctx, nilArgs); !errors.Is(err, jobs.ErrInvalid) {
			t.Errorf("Enqueue of a nil pointer: %v, want ErrInvalid", err)
		}
		if _, err := c.EnqueueMany(ctx, []jobs.Params{{Args: rangeArgs{}}, {Args: nilArgs}}); !errors.Is(err, jobs.ErrInvalid) {
			t.Errorf("EnqueueMany with a nil pointer: %v, want ErrInvalid", err)
		}
		if _, err := c.Enqueue(ctx, &rangeArgs{N: 1}); err != nil {
			t.Errorf("Enqueue of a pointer to args: %v", err)
		}
	}
	if _, err := jobs.Prepare((*rangeArgs)(nil)); !errors.Is(err, jobs.ErrInvalid) {
		t.Errorf("Prepare of a nil pointer: %v, want ErrInvalid", err)
	}
}

// TestEnqueueManyFirstOfAnOperationWins: jobs of one EnqueueMany call that
// share an operation id are written as one after another would be,
// whatever their options: the first is created, the later ones are
// deduplicated to it, and the job keeps the first one's args and options
// (a unique key, a group), not a later plain job's.
func TestEnqueueManyFirstOfAnOperationWins(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	op := jobs.OperationID
	res, err := c.EnqueueMany(ctx, []jobs.Params{
		{Args: rangeArgs{N: 1}, Options: []jobs.Option{op("x")}},
		{Args: rangeArgs{N: 2}, Options: []jobs.Option{op("y"), jobs.Unique(jobs.UniqueOpts{ByArgs: true})}},
		{Args: rangeArgs{N: 3}, Options: []jobs.Option{op("y")}},
		{Args: rangeArgs{N: 4}, Options: []jobs.Option{op("z"), jobs.Group("acme")}},
		{Args: rangeArgs{N: 5}, Options: []jobs.Option{op("z")}},
		{Args: rangeArgs{N: 6}, Options: []jobs.Option{op("x"), jobs.Limit("export", 1)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	wantDedup := []bool{false, false, true, false, true, true}
	for i, r := range res {
		if r.Deduplicated != wantDedup[i] {
			t.Errorf("job %d (operation %s): deduplicated %v, want %v", i, r.OperationID, r.Deduplicated, wantDedup[i])
		}
	}
	in := c.Inspector()
	for op, want := range map[string]string{"x": `{"n":1}`, "y": `{"n":2}`, "z": `{"n":4}`} {
		r, err := in.FindByOperation(ctx, op)
		if err != nil {
			t.Fatal(err)
		}
		if string(r.Args) != want {
			t.Errorf("operation %s holds args %s, want the first job's %s", op, r.Args, want)
		}
		switch {
		case op == "y" && r.UniqueKey == "":
			t.Errorf("operation y lost the first job's unique key")
		case op == "z" && r.Group != "acme":
			t.Errorf("operation z lost the first job's group")
		case op == "x" && r.LimitKey != "":
			t.Errorf("operation x took the later job's limit %q", r.LimitKey)
		}
	}
}

// TestEnqueueRefusesFlowKeysWithControlCharacters: a limit's or a rate's key
// with a control character is refused before anything is written, and the
// error quotes the key cut short, never whole.
func TestEnqueueRefusesFlowKeysWithControlCharacters(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	long := "acct\x1b[2J" + strings.Repeat("x", 150)
	for name, opt := range map[string]jobs.Option{
		"limit with an escape": jobs.Limit(long, 1),
		"limit with a newline": jobs.Limit("acct\n1", 1),
		"rate with a bell":     jobs.Rate("provider\a", 10, time.Second),
		"rate with a delete":   jobs.Rate("provider\x7f", 10, time.Second),
		"limit with a C1 code": jobs.Limit("acct\u0085", 1),
	} {
		_, err := c.Enqueue(ctx, rangeArgs{N: 1}, opt)
		if !errors.Is(err, jobs.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
			continue
		}
		if strings.Contains(err.Error(), strings.Repeat("x", 100)) {
			t.Errorf("%s: the error quotes the whole key: %v", name, err)
		}
	}
	if keys, _ := rdb.Keys(ctx, ns+":*").Result(); len(keys) != 0 {
		t.Fatalf("refused enqueues wrote %v", keys)
	}
}
