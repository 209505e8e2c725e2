package asynqfence_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/asynqfence"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestNilRedisClientIsRefused: New refuses a nil Redis client, a typed nil
// pointer included (for the ledger or for asynq's Redis), with ErrOptions
// naming it, instead of panicking on the first delivery.
func TestNilRedisClientIsRefused(t *testing.T) {
	rdb, ns := redistest.New(t)
	var unset *redis.Client
	cases := map[string]func() error{
		"nil": func() error {
			_, err := asynqfence.New(nil, jobs.Config{Namespace: ns}, asynqfence.Options{})
			return err
		},
		"typed nil": func() error {
			_, err := asynqfence.New(unset, jobs.Config{Namespace: ns}, asynqfence.Options{})
			return err
		},
		"typed nil asynq": func() error {
			_, err := asynqfence.New(rdb, jobs.Config{Namespace: ns}, asynqfence.Options{Asynq: unset})
			return err
		},
	}
	for name, f := range cases {
		if err := f(); !errors.Is(err, asynqfence.ErrOptions) || !strings.Contains(err.Error(), "nil") {
			t.Errorf("%s: %v, want ErrOptions naming the nil client", name, err)
		}
	}
}

// TestNilOrZeroBridgeIsRefused: a Bridge New did not make (a nil pointer,
// such as an unset field, or a zero value) returns ErrOptions saying to use
// New from Run, Redeliver and each delivery through its middleware, which
// runs nothing, instead of panicking; New's Bridge over the same Redis
// redelivers.
func TestNilOrZeroBridgeIsRefused(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := t.Context()
	var unset *asynqfence.Bridge
	for name, b := range map[string]*asynqfence.Bridge{"nil": unset, "zero": {}} {
		ran := false
		handler := b.Middleware()(asynq.HandlerFunc(func(context.Context, *asynq.Task) error { ran = true; return nil }))
		calls := map[string]func() error{
			"Run":       func() error { return b.Run(ctx) },
			"Redeliver": func() error { _, err := b.Redeliver(ctx); return err },
			"delivery":  func() error { return handler.ProcessTask(ctx, asynq.NewTask("t", nil)) },
		}
		for call, f := range calls {
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Errorf("%s bridge: %s panicked: %v", name, call, r)
					}
				}()
				if err := f(); !errors.Is(err, asynqfence.ErrOptions) || !strings.Contains(err.Error(), "New") {
					t.Errorf("%s bridge: %s: %v, want ErrOptions saying to use New", name, call, err)
				}
			}()
		}
		if ran {
			t.Errorf("%s bridge: the handler ran", name)
		}
	}
	b, err := asynqfence.New(rdb, jobs.Config{Namespace: ns}, asynqfence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Redeliver(ctx); err != nil {
		t.Fatalf("New's bridge: Redeliver: %v", err)
	}
}

// TestHandlerOfANilWorkerPanics: Handler (and Handle) given a nil worker,
// or a nil function or pointer in one, panic when built, as asynq's
// ServeMux.Handle does on a nil handler, instead of failing every delivery.
func TestHandlerOfANilWorkerPanics(t *testing.T) {
	var fn jobs.WorkFunc[transferArgs]
	var ptr *transferWorker
	for name, build := range map[string]func(){
		"nil":          func() { asynqfence.Handler[transferArgs](nil) },
		"nil function": func() { asynqfence.Handler[transferArgs](fn) },
		"nil pointer":  func() { asynqfence.Handle[transferArgs](asynq.NewServeMux(), ptr) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "nil worker") {
					t.Fatalf("recovered %v, want a panic naming the nil worker", r)
				}
			}()
			build()
		})
	}
	if asynqfence.Handler[transferArgs](&transferWorker{}) == nil {
		t.Fatal("a worker's handler is nil")
	}
}
