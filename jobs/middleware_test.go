package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

type accountArgs struct {
	Account string `json:"account"`
}

func (accountArgs) Kind() string       { return "account" }
func (a accountArgs) Resource() string { return "account:" + a.Account }

// TestEnqueueMiddlewareSeesAndAmends: middleware runs in order (the first
// outermost), sees the job and its resolved options before the write, and
// its amendments are what is written; it sees the results after.
func TestEnqueueMiddlewareSeesAndAmends(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	var trace []string
	var seen []jobs.EnqueueRequest
	var results []*jobs.Result
	tag := func(name string) jobs.EnqueueMiddleware {
		return func(next jobs.EnqueueFunc) jobs.EnqueueFunc {
			return func(ctx context.Context, reqs []*jobs.EnqueueRequest) ([]*jobs.Result, error) {
				trace = append(trace, name+" before")
				res, err := next(ctx, reqs)
				trace = append(trace, name+" after")
				return res, err
			}
		}
	}
	amend := func(next jobs.EnqueueFunc) jobs.EnqueueFunc {
		return func(ctx context.Context, reqs []*jobs.EnqueueRequest) ([]*jobs.Result, error) {
			for _, r := range reqs {
				seen = append(seen, *r)
				r.Queue = "amended"
				r.SetHeader("tenant", "acme")
			}
			res, err := next(ctx, reqs)
			results = res
			return res, err
		}
	}
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns, EnqueueMiddleware: []jobs.EnqueueMiddleware{tag("outer"), amend, tag("inner")}})

	res, err := c.Enqueue(ctx, accountArgs{Account: "42"}, jobs.OperationID("op-1"), jobs.Timeout(3*time.Second), jobs.Header("traceparent", "tp"))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"outer before", "inner before", "inner after", "outer after"}; !slices.Equal(trace, want) {
		t.Fatalf("middleware ran %v, want %v", trace, want)
	}
	r := seen[0]
	if r.Kind() != "account" || r.Args() == nil || r.Payload() != nil || r.Resource() != "account:42" ||
		r.Queue != jobs.DefaultQueue || r.OperationID != "op-1" || r.MaxRetries != jobs.DefaultMaxRetries ||
		r.Timeout != 3*time.Second || r.Headers["traceparent"] != "tp" {
		t.Fatalf("middleware saw %+v (kind %q, resource %q)", r, r.Kind(), r.Resource())
	}
	if len(results) != 1 || results[0] != res || res.Queue != "amended" || res.Deduplicated {
		t.Fatalf("middleware saw results %v, Enqueue returned %+v", results, res)
	}
	rec, err := c.Inspector().Get(ctx, "amended", res.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"traceparent": "tp", "tenant": "acme"}; !maps.Equal(rec.Headers, want) || rec.Resource != "account:42" {
		t.Fatalf("record headers %v resource %q, want %v on account:42", rec.Headers, rec.Resource, want)
	}

	// EnqueueRaw: the kind and payload are seen, Args is nil.
	seen = nil
	if _, err := c.EnqueueRaw(ctx, "raw", []byte(`{"n":1}`), jobs.Unchecked(), jobs.Resource("r:1")); err != nil {
		t.Fatal(err)
	}
	if r := seen[0]; r.Kind() != "raw" || r.Args() != nil || string(r.Payload()) != `{"n":1}` || r.Resource() != "r:1" {
		t.Fatalf("raw enqueue seen as %+v", r)
	}

	// EnqueueMany: the whole batch passes through once, in order.
	seen, trace = nil, nil
	out, err := c.EnqueueMany(ctx, []jobs.Params{{Args: accountArgs{Account: "1"}}, {Args: accountArgs{Account: "2"}, Options: []jobs.Option{jobs.MaxRetries(1)}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(trace) != 4 || len(seen) != 2 || seen[0].Resource() != "account:1" || seen[1].MaxRetries != 1 || len(out) != 2 || out[1].Queue != "amended" {
		t.Fatalf("batch: trace %v, seen %+v, results %+v", trace, seen, out)
	}
}

// TestEnqueueMiddlewareAmendmentsAreValidated: requests are validated after
// the last middleware, so an amendment out of bounds is refused and writes
// nothing; middleware that returns without calling next writes nothing.
func TestEnqueueMiddlewareAmendmentsAreValidated(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	amend := func(f func(*jobs.EnqueueRequest)) jobs.EnqueueMiddleware {
		return func(next jobs.EnqueueFunc) jobs.EnqueueFunc {
			return func(ctx context.Context, reqs []*jobs.EnqueueRequest) ([]*jobs.Result, error) {
				for _, r := range reqs {
					f(r)
				}
				return next(ctx, reqs)
			}
		}
	}
	var sawErr error
	observe := func(next jobs.EnqueueFunc) jobs.EnqueueFunc {
		return func(ctx context.Context, reqs []*jobs.EnqueueRequest) ([]*jobs.Result, error) {
			res, err := next(ctx, reqs)
			sawErr = err
			return res, err
		}
	}
	for name, f := range map[string]func(*jobs.EnqueueRequest){
		"queue":       func(r *jobs.EnqueueRequest) { r.Queue = "no spaces allowed" },
		"max retries": func(r *jobs.EnqueueRequest) { r.MaxRetries = -1 },
		"header":      func(r *jobs.EnqueueRequest) { r.SetHeader("k", strings.Repeat("v", jobs.MaxHeaderValueLen+1)) },
		"timeout":     func(r *jobs.EnqueueRequest) { r.Timeout = -time.Second },
	} {
		c := jobs.NewClient(rdb, jobs.Config{Namespace: ns, EnqueueMiddleware: []jobs.EnqueueMiddleware{observe, amend(f)}})
		if _, err := c.Enqueue(ctx, rangeArgs{N: 1}); !errors.Is(err, jobs.ErrInvalid) || !errors.Is(sawErr, jobs.ErrInvalid) {
			t.Errorf("%s amended out of bounds: %v (middleware saw %v), want ErrInvalid", name, err, sawErr)
		}
		if _, err := c.EnqueueMany(ctx, []jobs.Params{{Args: rangeArgs{N: 1}}, {Args: rangeArgs{N: 2}}}); !errors.Is(err, jobs.ErrInvalid) || !strings.Contains(err.Error(), "job 0") {
			t.Errorf("%s amended out of bounds in a batch: %v, want ErrInvalid naming job 0", name, err)
		}
	}
	refuse := errors.New("refused by policy")
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns, EnqueueMiddleware: []jobs.EnqueueMiddleware{func(jobs.EnqueueFunc) jobs.EnqueueFunc {
		return func(context.Context, []*jobs.EnqueueRequest) ([]*jobs.Result, error) { return nil, refuse }
	}}})
	if res, err := c.Enqueue(ctx, rangeArgs{N: 1}); !errors.Is(err, refuse) || res != nil {
		t.Fatalf("a refusing middleware: %v %v", res, err)
	}
	if keys, _ := rdb.Keys(ctx, ns+":*").Result(); len(keys) != 0 {
		t.Fatalf("refused enqueues wrote %v", keys)
	}
}

// TestEnqueueMiddlewareHeadersAreCopies: a header option reused across
// enqueues gives each its own map, so middleware amending one job's headers
// never changes another's.
func TestEnqueueMiddlewareHeadersAreCopies(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	n := 0
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns, EnqueueMiddleware: []jobs.EnqueueMiddleware{func(next jobs.EnqueueFunc) jobs.EnqueueFunc {
		return func(ctx context.Context, reqs []*jobs.EnqueueRequest) ([]*jobs.Result, error) {
			for _, r := range reqs {
				n++
				if len(r.Headers) != 1 {
					t.Errorf("enqueue %d saw headers %v: an earlier amendment leaked", n, r.Headers)
				}
				r.SetHeader("n", strings.Repeat("x", n))
			}
			return next(ctx, reqs)
		}
	}}})
	opts := []jobs.Option{jobs.Header("shared", "1")}
	for i := range 3 {
		if _, err := c.Enqueue(ctx, rangeArgs{N: i}, opts...); err != nil {
			t.Fatal(err)
		}
	}
}

// TestEnqueueMiddlewareUniqueOptsAreCopies: a Unique option reused across
// enqueues gives each request its own UniqueOpts, so middleware amending
// one job's uniqueness never changes the option or another job's.
func TestEnqueueMiddlewareUniqueOptsAreCopies(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	n := 0
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns, EnqueueMiddleware: []jobs.EnqueueMiddleware{func(next jobs.EnqueueFunc) jobs.EnqueueFunc {
		return func(ctx context.Context, reqs []*jobs.EnqueueRequest) ([]*jobs.Result, error) {
			for _, r := range reqs {
				n++
				if r.Unique == nil || r.Unique.ByPeriod != 0 || !slices.Equal(r.Unique.ByFields, []string{"customer"}) {
					t.Errorf("enqueue %d saw unique %+v: an earlier amendment leaked", n, r.Unique)
					continue
				}
				r.Unique.ByPeriod = time.Duration(n) * time.Hour
				r.Unique.ByFields[0] = "scope"
			}
			return next(ctx, reqs)
		}
	}}})
	opts := []jobs.Option{jobs.Unique(jobs.UniqueOpts{ByFields: []string{"customer"}})}
	for i := range 3 {
		if _, err := c.Enqueue(ctx, syncArgs{Customer: fmt.Sprint(i)}, opts...); err != nil {
			t.Fatal(err)
		}
	}
}

// TestEnqueueMiddlewareKeepsFlowAndGroupOptions: with a middleware in the
// chain, the Limit, Rate and Group options still reach the job.
func TestEnqueueMiddlewareKeepsFlowAndGroupOptions(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	var seen string
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns, EnqueueMiddleware: []jobs.EnqueueMiddleware{func(next jobs.EnqueueFunc) jobs.EnqueueFunc {
		return func(ctx context.Context, reqs []*jobs.EnqueueRequest) ([]*jobs.Result, error) {
			seen = reqs[0].Group
			return next(ctx, reqs)
		}
	}}})
	res, err := c.Enqueue(ctx, rangeArgs{N: 1}, jobs.Limit("export:c1", 2), jobs.Rate("provider", 5, time.Second), jobs.Group("acme"))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := c.Inspector().Get(ctx, jobs.DefaultQueue, res.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.LimitKey != "export:c1" || rec.LimitMax != 2 || rec.RateKey != "provider" || rec.RateMax != 5 ||
		rec.RatePer != time.Second || rec.Group != "acme" || seen != "acme" {
		t.Fatalf("limit %s/%d, rate %s/%d/%v, group %q (middleware saw %q)", rec.LimitKey, rec.LimitMax,
			rec.RateKey, rec.RateMax, rec.RatePer, rec.Group, seen)
	}
}

// TestEnqueueMiddlewareWithoutResultsIsAnError: a middleware that returns
// neither results nor an error (it swallowed next's error, or dropped the
// jobs without saying so) does not hand the caller a nil Result with a nil
// error: the call fails with ErrEnqueueUnknown, for Enqueue, EnqueueRaw
// and EnqueueMany alike. A middleware that passes next's results on is
// unaffected.
func TestEnqueueMiddlewareWithoutResultsIsAnError(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	swallow := func(next jobs.EnqueueFunc) jobs.EnqueueFunc {
		return func(ctx context.Context, reqs []*jobs.EnqueueRequest) ([]*jobs.Result, error) {
			if len(reqs) > 0 && reqs[0].OperationID == "pass" {
				return next(ctx, reqs)
			}
			_, _ = next(ctx, reqs)
			return nil, nil
		}
	}
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns, EnqueueMiddleware: []jobs.EnqueueMiddleware{swallow}})
	res, err := c.Enqueue(ctx, accountArgs{Account: "1"})
	if !errors.Is(err, jobs.ErrEnqueueUnknown) {
		t.Errorf("Enqueue: %+v, %v; want ErrEnqueueUnknown", res, err)
	}
	res, err = c.EnqueueRaw(ctx, "account", []byte(`{"account":"2"}`), jobs.Unchecked(), jobs.Resource("account:2"))
	if !errors.Is(err, jobs.ErrEnqueueUnknown) {
		t.Errorf("EnqueueRaw: %+v, %v; want ErrEnqueueUnknown", res, err)
	}
	many, err := c.EnqueueMany(ctx, []jobs.Params{{Args: accountArgs{Account: "3"}}, {Args: accountArgs{Account: "4"}}})
	if !errors.Is(err, jobs.ErrEnqueueUnknown) {
		t.Errorf("EnqueueMany: %v, %v; want ErrEnqueueUnknown", many, err)
	}
	if res, err := c.Enqueue(ctx, accountArgs{Account: "5"}, jobs.OperationID("pass")); err != nil || res == nil || res.JobID == "" {
		t.Errorf("a middleware passing next's result on: %+v, %v", res, err)
	}
	if many, err := c.EnqueueMany(ctx, nil); err != nil || len(many) != 0 {
		t.Errorf("EnqueueMany of nothing: %v, %v", many, err)
	}
}

// TestEnqueueMiddlewarePassingOtherRequestsWritesNothing: a middleware
// must pass next the call's requests, in their order. One that reorders a
// batch would hand the caller each job's result under another job, and
// one that drops a request would write the others and fail the call: both
// are refused with ErrInvalid and write nothing, as for a workflow's steps.
func TestEnqueueMiddlewarePassingOtherRequestsWritesNothing(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	mangle := func(next jobs.EnqueueFunc) jobs.EnqueueFunc {
		return func(ctx context.Context, reqs []*jobs.EnqueueRequest) ([]*jobs.Result, error) {
			switch reqs[0].OperationID {
			case "reverse":
				reqs = slices.Clone(reqs)
				slices.Reverse(reqs)
			case "drop":
				reqs = reqs[1:]
			case "twice":
				reqs = []*jobs.EnqueueRequest{reqs[0], reqs[0]}
			}
			return next(ctx, reqs)
		}
	}
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns, EnqueueMiddleware: []jobs.EnqueueMiddleware{mangle}})
	for i, how := range []string{"reverse", "drop", "twice"} {
		ps := []jobs.Params{
			{Args: accountArgs{Account: fmt.Sprint(i, "a")}, Options: []jobs.Option{jobs.OperationID(how)}},
			{Args: accountArgs{Account: fmt.Sprint(i, "b")}, Options: []jobs.Option{jobs.Queue("other")}},
		}
		res, err := c.EnqueueMany(ctx, ps)
		if !errors.Is(err, jobs.ErrInvalid) {
			t.Errorf("%s: %v, %v; want ErrInvalid", how, res, err)
		}
	}
	for _, q := range []string{"default", "other"} {
		if n, err := c.Inspector().Counts(ctx, q); err != nil || n[jobs.Pending] != 0 {
			t.Errorf("queue %s: %v jobs (%v), want none written", q, n, err)
		}
	}
	if res, err := c.Enqueue(ctx, accountArgs{Account: "ok"}); err != nil || res.JobID == "" {
		t.Errorf("a middleware passing the requests on: %+v, %v", res, err)
	}
}

// TestEnqueueMiddlewareReturningNilIsRefused: a middleware that returns a
// nil EnqueueFunc is a configuration mistake: the client's calls fail with
// ErrInvalid naming it, instead of the chain being skipped (the outermost
// returned nil) or the enqueue panicking (an inner one did).
func TestEnqueueMiddlewareReturningNilIsRefused(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	broken := func(jobs.EnqueueFunc) jobs.EnqueueFunc { return nil }
	pass := func(next jobs.EnqueueFunc) jobs.EnqueueFunc { return next }
	for name, mw := range map[string][]jobs.EnqueueMiddleware{
		"outermost": {broken, pass},
		"inner":     {pass, broken},
	} {
		c := jobs.NewClient(rdb, jobs.Config{Namespace: ns, EnqueueMiddleware: mw})
		res, err := c.Enqueue(ctx, accountArgs{Account: "1"})
		if !errors.Is(err, jobs.ErrInvalid) || !strings.Contains(err.Error(), "nil EnqueueFunc") {
			t.Errorf("%s: %+v, %v; want ErrInvalid naming the nil EnqueueFunc", name, res, err)
		}
	}
	if n, err := jobs.NewInspector(rdb, jobs.Config{Namespace: ns}).Counts(ctx, "default"); err != nil || n[jobs.Pending] != 0 {
		t.Errorf("%v jobs (%v), want none written", n, err)
	}
}

// TestEnqueueMiddlewarePassingNoRequestsIsRefused: a middleware that
// passes next no requests for a call that has some (all dropped) is
// refused with ErrInvalid, not reported as an unknown outcome, and the
// call's jobs are not written by a later call of next either; an empty
// EnqueueMany still passes through.
func TestEnqueueMiddlewarePassingNoRequestsIsRefused(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	var empty, later error
	drop := func(next jobs.EnqueueFunc) jobs.EnqueueFunc {
		return func(ctx context.Context, reqs []*jobs.EnqueueRequest) ([]*jobs.Result, error) {
			res, err := next(ctx, nil)
			if len(reqs) == 0 {
				return res, err
			}
			empty = err
			_, later = next(ctx, reqs)
			return res, err
		}
	}
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns, EnqueueMiddleware: []jobs.EnqueueMiddleware{drop}})
	res, err := c.Enqueue(ctx, accountArgs{Account: "1"})
	if !errors.Is(err, jobs.ErrInvalid) || !errors.Is(empty, jobs.ErrInvalid) {
		t.Errorf("Enqueue: %+v, %v (next: %v); want ErrInvalid", res, err, empty)
	}
	if later == nil {
		t.Error("a later next with the call's requests wrote them")
	}
	many, err := c.EnqueueMany(ctx, []jobs.Params{{Args: accountArgs{Account: "2"}}, {Args: accountArgs{Account: "3"}}})
	if !errors.Is(err, jobs.ErrInvalid) || later == nil {
		t.Errorf("EnqueueMany: %+v, %v (later next: %v); want ErrInvalid, nothing written", many, err, later)
	}
	if n, err := c.Inspector().Counts(ctx, "default"); err != nil || n[jobs.Pending] != 0 {
		t.Errorf("%v jobs (%v), want none written", n, err)
	}
	if many, err := c.EnqueueMany(ctx, nil); err != nil || len(many) != 0 {
		t.Errorf("an empty EnqueueMany: %v, %v", many, err)
	}
}
