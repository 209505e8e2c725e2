package asynqfence_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/asynqfence"
	"github.com/fencedq/fencedq/jobs"
)

// kindSeries returns every value the kind label takes in reg, and how many
// series carry a kind label at all.
func kindSeries(t *testing.T, reg *prometheus.Registry) (map[string]bool, int) {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	kinds, n := map[string]bool{}, 0
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "kind" {
					kinds[l.GetValue()] = true
					n++
				}
			}
		}
	}
	return kinds, n
}

// TestUnhandledTaskTypesAddNoSeries: deliveries of 20 task types without
// a handler are labelled "unknown", as native pools label unregistered
// kinds: after the first, they add no series.
func TestUnhandledTaskTypesAddNoSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	p := startInProcessWith(t, asynqfence.Options{WorkerID: "in-process", Registerer: reg}, func(mux *asynq.ServeMux) {
		mux.HandleFunc("payment", func(context.Context, *asynq.Task) error { return nil })
	})
	enqueue := func(typ string) {
		t.Helper()
		if _, err := p.client.Enqueue(asynq.NewTask(typ, []byte(`{}`)), asynq.MaxRetry(0)); err != nil {
			t.Fatal(err)
		}
		_ = p.next()
	}
	enqueue("payment")
	enqueue("USERDATA-type-0")
	_, after1 := kindSeries(t, reg)
	for i := 1; i < 20; i++ {
		enqueue(fmt.Sprintf("USERDATA-type-%d", i))
	}
	kinds, after20 := kindSeries(t, reg)
	if after20 != after1 {
		t.Errorf("%d series with a kind label after one unhandled type, %d after 20", after1, after20)
	}
	if len(kinds) != 2 || !kinds["payment"] || !kinds[asynqfence.UnknownKind] {
		t.Errorf("kind labels %v, want payment and unknown", kinds)
	}
}

// TestKindLabels: the label is bounded however the bridge is installed.
func TestKindLabels(t *testing.T) {
	b, err := asynqfence.New(redis.NewClient(&redis.Options{}), jobs.Config{}, asynqfence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ok := asynq.HandlerFunc(func(context.Context, *asynq.Task) error { return nil })
	mux := asynq.NewServeMux()
	mux.Handle("payment", ok)
	mux.Handle("email:", ok) // a prefix: any number of types
	asynqfence.Handle(mux, jobs.Worker[transferArgs](&transferWorker{}))
	typed := asynqfence.Handler(jobs.Worker[transferArgs](&transferWorker{}))
	for _, c := range []struct {
		typ  string
		next asynq.Handler
		want string
	}{
		{"payment", mux, "payment"},               // middleware around the whole mux
		{"email:welcome-USERDATA", mux, "email:"}, // the pattern, not the type
		{"USERDATA", mux, asynqfence.UnknownKind},
		{"transfer", mux, "transfer"},
		{"USERDATA", asynq.NotFoundHandler(), asynqfence.UnknownKind}, // under mux.Use
		{"USERDATA", typed, "transfer"},                               // a Handler's worker kind
		{"payment", ok, "payment"},
	} {
		if got := b.KindLabel(asynq.NewTask(c.typ, nil), c.next); got != c.want {
			t.Errorf("%s to %T: label %q, want %q", c.typ, c.next, got, c.want)
		}
	}
	// A plain handler may serve a prefix pattern: past MaxKindLabels types
	// the label is unknown, and types seen before keep theirs.
	for i := range 2 * asynqfence.MaxKindLabels {
		typ := fmt.Sprintf("email:%d", i)
		want := typ
		if i >= asynqfence.MaxKindLabels-1 { // "payment" took one
			want = asynqfence.UnknownKind
		}
		if got := b.KindLabel(asynq.NewTask(typ, nil), ok); got != want {
			t.Fatalf("type %d of a plain handler: %q, want %q", i, got, want)
		}
	}
	if got := b.KindLabel(asynq.NewTask("payment", nil), ok); got != "payment" {
		t.Fatalf("a type labelled before the cap: %q", got)
	}
}

// TestOversizedPayloadIsRefused: a bridged payload over jobs.MaxPayloadBytes
// is refused as Enqueue would refuse it (ErrInvalid, asynq archives the
// task), before the ledger records anything or the handler runs.
func TestOversizedPayloadIsRefused(t *testing.T) {
	var runs atomic.Int32
	p := startInProcess(t, func(mux *asynq.ServeMux) {
		mux.HandleFunc("big", func(context.Context, *asynq.Task) error { runs.Add(1); return nil })
	})
	big := append([]byte(`{"x":"`), bytes.Repeat([]byte("x"), jobs.MaxPayloadBytes)...)
	big = append(big, `"}`...)
	if _, err := p.client.Enqueue(asynq.NewTask("big", big), asynq.TaskID("big-1")); err != nil {
		t.Fatal(err)
	}
	if err := p.next(); !errors.Is(err, jobs.ErrInvalid) || !errors.Is(err, asynq.SkipRetry) {
		t.Fatalf("oversized payload: %v, want ErrInvalid and SkipRetry", err)
	}
	if runs.Load() != 0 {
		t.Fatal("the handler ran")
	}
	if _, err := p.ledger.Get(context.Background(), "default", "big-1"); !errors.Is(err, jobs.ErrNotFound) {
		t.Fatalf("ledger record of the refused task: %v", err)
	}
	// At the limit it runs.
	fits := append([]byte(`{"x":"`), bytes.Repeat([]byte("x"), jobs.MaxPayloadBytes-8)...)
	fits = append(fits, `"}`...)
	if _, err := p.client.Enqueue(asynq.NewTask("big", fits), asynq.TaskID("big-2")); err != nil {
		t.Fatal(err)
	}
	if err := p.next(); err != nil || runs.Load() != 1 {
		t.Fatalf("payload of %d bytes: %v, %d runs", len(fits), err, runs.Load())
	}
}

// TestPointerArgsKindLabel: a typed worker for a pointer to args (its Kind
// a method of the value) registers under its kind and labels by it.
func TestPointerArgsKindLabel(t *testing.T) {
	b, err := asynqfence.New(redis.NewClient(&redis.Options{}), jobs.Config{}, asynqfence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w := jobs.WorkFunc[*transferArgs](func(context.Context, *jobs.Job[*transferArgs]) error { return nil })
	mux := asynq.NewServeMux()
	asynqfence.Handle(mux, w)
	for _, next := range []asynq.Handler{mux, asynqfence.Handler(w)} {
		if got := b.KindLabel(asynq.NewTask("transfer", nil), next); got != "transfer" {
			t.Errorf("label %q, want transfer", got)
		}
	}
}
