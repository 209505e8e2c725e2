package worker_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

type (
	intArgs    int
	sliceArgs  []string
	funcArgs   func()
	chanArgs   chan int
	textArgs   struct{ V string }
	hookArgs   struct{ Hook func() }
	deepArgs   struct{ Inner *hookArgs }
	mapKeyArgs map[[2]int]string
	okArgs     struct{ N int }
	okMapArgs  map[string]any
	okSkipArgs struct {
		N    int
		Hook func() `json:"-"`
	}
	okOwnArgs int // encodes itself as an object
)

func (intArgs) Kind() string    { return "int_args" }
func (sliceArgs) Kind() string  { return "slice_args" }
func (funcArgs) Kind() string   { return "func_args" }
func (chanArgs) Kind() string   { return "chan_args" }
func (textArgs) Kind() string   { return "text_args" }
func (hookArgs) Kind() string   { return "hook_args" }
func (deepArgs) Kind() string   { return "deep_args" }
func (mapKeyArgs) Kind() string { return "map_key_args" }
func (okArgs) Kind() string     { return "ok_args" }
func (okMapArgs) Kind() string  { return "ok_map_args" }
func (okSkipArgs) Kind() string { return "ok_skip_args" }
func (okOwnArgs) Kind() string  { return "ok_own_args" }

func (a textArgs) MarshalText() ([]byte, error) { return []byte(a.V), nil }
func (okOwnArgs) MarshalJSON() ([]byte, error)  { return []byte(`{"n":1}`), nil }

func registerOf[T jobs.JobArgs](p *worker.Pool) error {
	return worker.Register(p, jobs.WorkFunc[T](func(context.Context, *jobs.Job[T]) error { return nil }))
}

// TestRegisterRefusesArgsThatCannotBeAJSONObject: an args type whose values
// cannot encode as a JSON object (an int, a slice, a func, a channel, a
// MarshalText type, a struct reaching a func field, a map with struct
// keys) is refused by Register, with an error matching ErrConfig and
// jobs.ErrInvalid that names the kind, instead of at every Enqueue; a
// struct, a pointer to one, a string-keyed map, a func field the encoding
// skips and a type with its own MarshalJSON are accepted.
func TestRegisterRefusesArgsThatCannotBeAJSONObject(t *testing.T) {
	rdb, ns := redistest.New(t)
	p, err := worker.NewPool(rdb, worker.Config{Jobs: jobs.Config{Namespace: ns}})
	if err != nil {
		t.Fatal(err)
	}
	for kind, reg := range map[string]func(*worker.Pool) error{
		"int_args": registerOf[intArgs], "slice_args": registerOf[sliceArgs], "func_args": registerOf[funcArgs],
		"chan_args": registerOf[chanArgs], "text_args": registerOf[textArgs], "hook_args": registerOf[*hookArgs],
		"deep_args": registerOf[deepArgs], "map_key_args": registerOf[mapKeyArgs],
	} {
		err := reg(p)
		if !errors.Is(err, worker.ErrConfig) || !errors.Is(err, jobs.ErrInvalid) || !strings.Contains(err.Error(), kind) ||
			!strings.Contains(err.Error(), "JSON") {
			t.Errorf("%s: Register: %v; want an error matching ErrConfig and jobs.ErrInvalid naming the kind", kind, err)
		}
	}
	for kind, reg := range map[string]func(*worker.Pool) error{
		"ok_args": registerOf[okArgs], "ok_map_args": registerOf[okMapArgs], "ok_skip_args": registerOf[*okSkipArgs],
		"ok_own_args": registerOf[okOwnArgs],
	} {
		if err := reg(p); err != nil {
			t.Errorf("%s: Register: %v", kind, err)
		}
	}
}

type (
	badKindArgs   struct{}
	emptyKindArgs struct{}
	kindNamer     struct{ name string }
	// fieldKindArgs reads its kind through a field: on the zero value, a
	// nil pointer.
	fieldKindArgs struct{ Namer *kindNamer }
)

func (badKindArgs) Kind() string     { return "bad kind" }
func (emptyKindArgs) Kind() string   { return "" }
func (a fieldKindArgs) Kind() string { return a.Namer.name }

// TestRegisterRefusesAKindItCannotRead: an args type whose Kind method
// panics on the zero value (a kind read through a nil pointer), or gives
// an invalid kind, is refused by Register with an error matching ErrConfig
// and jobs.ErrInvalid naming the type, as an args type that cannot encode,
// instead of Register panicking or the error matching jobs.ErrInvalid
// alone; nothing is registered.
func TestRegisterRefusesAKindItCannotRead(t *testing.T) {
	rdb, ns := redistest.New(t)
	p, err := worker.NewPool(rdb, worker.Config{Jobs: jobs.Config{Namespace: ns}})
	if err != nil {
		t.Fatal(err)
	}
	for typ, reg := range map[string]func(*worker.Pool) error{
		"badKindArgs": registerOf[badKindArgs], "emptyKindArgs": registerOf[*emptyKindArgs],
		"fieldKindArgs": registerOf[fieldKindArgs],
	} {
		var err error
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s: Register panicked: %v", typ, r)
				}
			}()
			err = reg(p)
		}()
		if !errors.Is(err, worker.ErrConfig) || !errors.Is(err, jobs.ErrInvalid) || !strings.Contains(err.Error(), typ+".Kind()") {
			t.Errorf("%s: Register: %v; want an error matching ErrConfig and jobs.ErrInvalid naming the type's Kind", typ, err)
		}
	}
	if err := registerOf[okArgs](p); err != nil {
		t.Errorf("Register after the refusals: %v", err)
	}
}
