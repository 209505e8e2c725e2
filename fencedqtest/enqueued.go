package fencedqtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/big"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/argtype"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/jobs"
)

// Want says which enqueued jobs of a kind match. Zero fields match any job.
type Want struct {
	// Args, when set, must equal the job's args (compared as JSON, so
	// sensitive fields count too). They must be of the helper's kind (a
	// value or a pointer): args of another kind fail the test.
	Args jobs.JobArgs
	// Queue is the job's queue: a partitioned queue's name matches the jobs
	// of every partition, a partition's name those of that partition.
	Queue string
	// OperationID is the job's operation id.
	OperationID string
	// State is the job's state (default: any; a job a pool already worked
	// was still enqueued). One that is none of jobs.States fails the test,
	// as does a Queue that is no valid queue name.
	State jobs.State
	// MaxRetries, when positive, is the job's max retries.
	MaxRetries int
	// Timeout, when positive, is the job's timeout.
	Timeout time.Duration
	// Resource is the resource the job's attempts lease (as the args'
	// Resource method or EnqueueRaw's option named it).
	Resource string
	// Scheduled, when true, matches only jobs due later than they were
	// enqueued (a Delay or RunAt).
	Scheduled bool
	// DueAfter, when set, matches only jobs due at or after it.
	DueAfter time.Time
	// Headers must each be among the job's headers, with the same value.
	Headers map[string]string
	// Group is the job's fair group (its args' Group method or the
	// jobs.Group option).
	Group string
	// Limit is the key of the job's concurrency limit (the args' Limit
	// method or the jobs.Limit option).
	Limit string
	// LimitMax, when positive, is the max of the job's concurrency limit.
	LimitMax int
	// Rate is the key of the job's rate limit (the args' RateLimit method
	// or the jobs.Rate option).
	Rate string
	// RateMax, when positive, is the max starts per period of the job's
	// rate limit.
	RateMax int
}

// Job is an enqueued job: its ledger record and its args decoded into the
// kind's type.
type Job[T jobs.JobArgs] struct {
	// Record is the job as the ledger holds it (args redacted in
	// Record.Args, raw in Record.Payload).
	Record *jobs.Record
	// Args are the job's args.
	Args T
}

// scanPage is how many records one read takes from a state's index.
const scanPage = 500

// Enqueued returns every job of T's kind in the Env's namespace that
// matches want (nil: every job of the kind), in each state's index order
// (pending: by due time, jobs waiting in their fair group or parked on
// their limit included). It fails the test when the ledger cannot be read,
// when ctx already ended (saying so), and when want names a state or
// queue that cannot hold a job.
func Enqueued[T jobs.JobArgs](ctx context.Context, tb testing.TB, e *Env, want *Want) []*Job[T] {
	tb.Helper()
	return enqueued[T](ctx, tb, e, want, "Enqueued")
}

// enqueued is Enqueued, called by helper.
func enqueued[T jobs.JobArgs](ctx context.Context, tb testing.TB, e *Env, want *Want, helper string) []*Job[T] {
	tb.Helper()
	e.check(tb)
	checkContext(ctx, tb, helper)
	if want == nil {
		want = &Want{}
	}
	// A state or queue that names nothing would match no job, and
	// RequireNotEnqueued would pass whatever was enqueued.
	if want.State != "" && !slices.Contains(jobs.States, want.State) {
		tb.Fatalf("fencedqtest: Want.State: %q is not a job state (the states: %v)", want.State, jobs.States)
	}
	if want.Queue != "" {
		if err := jobs.ValidateQueueRef(want.Queue); err != nil {
			tb.Fatalf("fencedqtest: Want.Queue: %q: %v", want.Queue, err)
		}
	}
	var wantArgs any
	if want.Args != nil {
		// Args of another kind (a copy-paste slip) would be compared as
		// JSON alone: a job of T's kind with the same fields would match.
		if kind, wk := kindOf[T](tb), argsKind(want.Args); wk != kind {
			if wk == "" {
				wk = "none (its Kind method panicked)"
			}
			tb.Fatalf("fencedqtest: Want.Args: a %T is of kind %s, not %s (the kind the helper reads)", want.Args, wk, kind)
		}
		var err error
		if wantArgs, err = canonical(want.Args); err != nil {
			tb.Fatalf("fencedqtest: Want.Args: %v", err)
		}
	}
	found, err := e.scan(ctx, kindOf[T](tb), want)
	if err != nil {
		tb.Fatalf("fencedqtest: reading the ledger: %v", err)
	}
	var out []*Job[T]
	for _, rec := range found {
		if want.Args != nil { // a nil pointer's null matches no job's args
			got, err := canonical(json.RawMessage(rec.Payload))
			if err != nil || !reflect.DeepEqual(got, wantArgs) {
				continue
			}
		}
		var args T
		if err := jobs.DecodeArgs(rec.Payload, &args); err != nil {
			tb.Fatalf("fencedqtest: job %s: args %s do not decode into %T: %v", rec.ID, rec.Args, args, err)
		}
		out = append(out, &Job[T]{Record: rec, Args: args})
	}
	return out
}

// RequireEnqueued asserts that exactly one job of T's kind matching want
// was enqueued, and returns it. It fails the test, listing the jobs of the
// kind it found, each with what differs from want (its value beside the
// wanted one), when none or several match.
func RequireEnqueued[T jobs.JobArgs](ctx context.Context, tb testing.TB, e *Env, want *Want) *Job[T] {
	tb.Helper()
	got := enqueued[T](ctx, tb, e, want, "RequireEnqueued")
	if len(got) == 1 {
		return got[0]
	}
	what := "no job"
	if len(got) > 1 {
		what = fmt.Sprintf("%d jobs", len(got))
	}
	tb.Fatalf("fencedqtest: want one %s job matching %s, found %s; the kind's jobs:%s", kindOf[T](tb), want.describe(), what,
		listingAgainst(Enqueued[T](ctx, tb, e, nil), want))
	return nil
}

// RequireNotEnqueued asserts that no job of T's kind matching want (nil:
// any job of the kind) was enqueued.
func RequireNotEnqueued[T jobs.JobArgs](ctx context.Context, tb testing.TB, e *Env, want *Want) {
	tb.Helper()
	if got := enqueued[T](ctx, tb, e, want, "RequireNotEnqueued"); len(got) > 0 {
		tb.Fatalf("fencedqtest: want no %s job matching %s, found %d:%s", kindOf[T](tb), want.describe(), len(got), listing(got))
	}
}

// scan reads the records of kind that match want's fields (all but Args).
func (e *Env) scan(ctx context.Context, kind string, want *Want) ([]*jobs.Record, error) {
	qs, err := e.ledger.Queues(ctx)
	if err != nil {
		return nil, err
	}
	if want.Queue != "" {
		qs = queueNames(want.Queue, qs)
	}
	states := jobs.States
	if want.State != "" {
		states = []jobs.State{want.State}
	}
	var out []*jobs.Record
	for _, s := range states {
		// Page reads a pending job wherever it waits: the due index, its
		// fair group's index or its limit's wait list.
		for offset := 0; ; offset += scanPage {
			items, _, _, err := e.ledger.Page(ctx, qs, ledger.Filter{State: s}, offset, scanPage)
			if err != nil {
				return nil, err
			}
			page, _, err := e.ledger.Records(ctx, s, items)
			if err != nil {
				return nil, err
			}
			for _, rec := range page {
				if rec.Kind == kind && want.matches(rec) {
					out = append(out, rec)
				}
			}
			if len(items) < scanPage {
				break
			}
		}
	}
	return out, nil
}

func (w *Want) matches(rec *jobs.Record) bool { return len(w.differences(rec)) == 0 }

// differences names each of w's fields (all but Args, State and Queue,
// which select what is read) that rec does not match, with rec's value
// beside the wanted one, for matches and failure messages.
func (w *Want) differences(rec *jobs.Record) []string {
	var out []string
	// differ adds "<name> <got> (want <want>)", both in verb.
	differ := func(differs bool, name, verb string, got, want any) {
		if differs {
			out = append(out, fmt.Sprintf("%s "+verb+" (want "+verb+")", name, got, want))
		}
	}
	differ(w.OperationID != "" && rec.OperationID != w.OperationID, "operation id", "%q", rec.OperationID, w.OperationID)
	differ(w.MaxRetries > 0 && rec.MaxRetries != w.MaxRetries, "max retries", "%d", rec.MaxRetries, w.MaxRetries)
	differ(w.Timeout > 0 && rec.Timeout != w.Timeout, "timeout", "%v", rec.Timeout, w.Timeout)
	differ(w.Resource != "" && rec.Resource != w.Resource, "resource", "%q", rec.Resource, w.Resource)
	if w.Scheduled && !rec.RunAt.After(rec.Created) {
		out = append(out, fmt.Sprintf("due %s, when enqueued (want scheduled later)", rec.RunAt.Format(time.RFC3339Nano)))
	}
	if !w.DueAfter.IsZero() && rec.RunAt.Before(w.DueAfter) {
		out = append(out, fmt.Sprintf("due %s (want at or after %s)", rec.RunAt.Format(time.RFC3339Nano), w.DueAfter.Format(time.RFC3339Nano)))
	}
	differ(w.Group != "" && rec.Group != w.Group, "group", "%q", rec.Group, w.Group)
	differ(w.Limit != "" && rec.LimitKey != w.Limit, "limit", "%q", rec.LimitKey, w.Limit)
	differ(w.LimitMax > 0 && rec.LimitMax != w.LimitMax, "limit max", "%d", rec.LimitMax, w.LimitMax)
	differ(w.Rate != "" && rec.RateKey != w.Rate, "rate", "%q", rec.RateKey, w.Rate)
	differ(w.RateMax > 0 && rec.RateMax != w.RateMax, "rate max", "%d", rec.RateMax, w.RateMax)
	keys := slices.Sorted(maps.Keys(w.Headers))
	for _, k := range keys {
		got, ok := rec.Headers[k]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("header %s missing (want %q)", k, w.Headers[k]))
		case got != w.Headers[k]:
			out = append(out, fmt.Sprintf("header %s %q (want %q)", k, got, w.Headers[k]))
		}
	}
	return out
}

// queueNames returns the names holding queue q's jobs among the
// registered queue names qs: q itself (registered or not) and, for a queue
// that is not a partition, its partitions.
func queueNames(q string, qs []string) []string {
	out := []string{q}
	if ledger.IsPartition(q) {
		return out
	}
	for _, n := range qs {
		if n != q && ledger.Logical(n) == q {
			out = append(out, n)
		}
	}
	return out
}

// describe names what w matches, for failure messages (args redacted).
func (w *Want) describe() string {
	if w == nil {
		return "anything"
	}
	var parts []string
	add := func(name string, v any, set bool) {
		if set {
			parts = append(parts, fmt.Sprintf("%s %v", name, v))
		}
	}
	if w.Args != nil {
		shown, err := jobs.RedactJSON(w.Args)
		if err != nil {
			shown = []byte(fmt.Sprintf("%T", w.Args))
		}
		add("args", string(shown), true)
	}
	add("queue", w.Queue, w.Queue != "")
	add("operation id", w.OperationID, w.OperationID != "")
	add("state", w.State, w.State != "")
	add("max retries", w.MaxRetries, w.MaxRetries > 0)
	add("timeout", w.Timeout, w.Timeout > 0)
	add("resource", w.Resource, w.Resource != "")
	add("scheduled", w.Scheduled, w.Scheduled)
	add("due after", w.DueAfter, !w.DueAfter.IsZero())
	add("headers", w.Headers, len(w.Headers) > 0)
	add("group", w.Group, w.Group != "")
	add("limit", w.Limit, w.Limit != "")
	add("limit max", w.LimitMax, w.LimitMax > 0)
	add("rate", w.Rate, w.Rate != "")
	add("rate max", w.RateMax, w.RateMax > 0)
	if len(parts) == 0 {
		return "anything"
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// listing renders jobs one a line, args redacted.
func listing[T jobs.JobArgs](js []*Job[T]) string { return listingAgainst(js, nil) }

// listingAgainst is listing with, for each job, what differs from want
// (nil: nothing).
func listingAgainst[T jobs.JobArgs](js []*Job[T], want *Want) string {
	if len(js) == 0 {
		return " none"
	}
	var wantArgs any
	if want != nil && want.Args != nil {
		wantArgs, _ = canonical(want.Args)
	}
	var b strings.Builder
	for _, j := range js {
		r := j.Record
		fmt.Fprintf(&b, "\n  %s queue %s state %s op %s max retries %d args %s", r.ID, r.Queue, r.State, r.OperationID, r.MaxRetries, r.Args)
		if want == nil {
			continue
		}
		diffs := want.differences(r)
		if want.Args != nil {
			if got, err := canonical(json.RawMessage(r.Payload)); err != nil || !reflect.DeepEqual(got, wantArgs) {
				diffs = append([]string{"args differ"}, diffs...) // shown redacted above
			}
		}
		if want.Queue != "" && r.Queue != want.Queue && ledger.Logical(r.Queue) != want.Queue {
			diffs = append(diffs, fmt.Sprintf("queue %s (want %s)", r.Queue, want.Queue))
		}
		if want.State != "" && r.State != want.State {
			diffs = append(diffs, fmt.Sprintf("state %s (want %s)", r.State, want.State))
		}
		if len(diffs) > 0 {
			fmt.Fprintf(&b, "\n    differs: %s", strings.Join(diffs, "; "))
		}
	}
	return b.String()
}

// canonical decodes v's JSON form into plain values, for comparison:
// numbers keep every digit (an int64 id beyond 2^53 is not rounded to
// its neighbour) and equal values compare equal however they are written
// (1, 1.0 and 1e0).
func canonical(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var out any
	if err := d.Decode(&out); err != nil {
		return nil, err
	}
	return exactNumbers(out), nil
}

// exactNumbers replaces the json.Numbers in v by their exact values,
// written one way.
func exactNumbers(v any) any {
	switch v := v.(type) {
	case json.Number:
		if r, ok := new(big.Rat).SetString(string(v)); ok {
			return r.RatString()
		}
	case map[string]any:
		for k, e := range v {
			v[k] = exactNumbers(e)
		}
	case []any:
		for i, e := range v {
			v[i] = exactNumbers(e)
		}
	}
	return v
}

// argsKind returns the kind of a, read from its type's zero value when a
// is a nil pointer ("" when that Kind method panics too).
func argsKind(a jobs.JobArgs) (kind string) {
	defer func() {
		if recover() != nil {
			kind = ""
		}
	}()
	if v := reflect.ValueOf(a); v.Kind() == reflect.Pointer && v.IsNil() {
		if z, ok := reflect.New(v.Type().Elem()).Interface().(jobs.JobArgs); ok {
			return z.Kind()
		}
	}
	return a.Kind()
}

// kindOf returns T's kind, failing the test when T's Kind method panics on
// the zero value or gives an invalid kind, as worker.Register refuses it.
func kindOf[T jobs.JobArgs](tb testing.TB) string {
	tb.Helper()
	kind, err := argtype.ZeroKind[T]() // T may be a pointer to the args
	if err == nil {
		err = jobs.ValidateKind(kind)
	}
	if err != nil {
		tb.Fatalf("fencedqtest: %T.Kind(): %v (worker.Register refuses it)", argtype.Zero[T](), err)
	}
	return kind
}

// checkArgsType fails the test when T's kind is refused (kindOf) or T
// cannot encode as a JSON object, as worker.Register refuses it.
func checkArgsType[T jobs.JobArgs](tb testing.TB) {
	tb.Helper()
	kind := kindOf[T](tb)
	if err := argtype.CheckObject(reflect.TypeFor[T]()); err != nil {
		tb.Fatalf("fencedqtest: kind %s: args type %v (worker.Register refuses it)", kind, err)
	}
}
