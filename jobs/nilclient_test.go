package jobs_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestNilRedisClientIsRefusedClearly: a client or inspector built over a
// nil Redis client (a nil interface, or a typed nil pointer such as an
// unset *redis.Client field) refuses every call with an error matching
// jobs.ErrInvalid that names the mistake, instead of panicking on first
// use.
func TestNilRedisClientIsRefusedClearly(t *testing.T) {
	ctx := context.Background()
	var unset *redis.Client
	for name, rdb := range map[string]redis.UniversalClient{"nil": nil, "typed nil": unset} {
		c := jobs.NewClient(rdb, jobs.Config{})
		in := jobs.NewInspector(rdb, jobs.Config{})
		calls := map[string]func() error{
			"Enqueue": func() error { _, err := c.Enqueue(ctx, rangeArgs{N: 1}); return err },
			"EnqueueRaw": func() error {
				_, err := c.EnqueueRaw(ctx, "range", []byte(`{}`), jobs.Unchecked())
				return err
			},
			"EnqueueMany":         func() error { _, err := c.EnqueueMany(ctx, []jobs.Params{{Args: rangeArgs{}}}); return err },
			"Cancel":              func() error { _, err := c.Cancel(ctx, "default", "id", "ada", ""); return err },
			"Pause":               func() error { _, err := c.Pause(ctx, "default", "ada", ""); return err },
			"Output":              func() error { var v any; return c.Output(ctx, "default", "id", &v) },
			"SetPartitions":       func() error { _, err := c.SetPartitions(ctx, "default", 2, "test", ""); return err },
			"Resubmit":            func() error { _, err := c.Resubmit(ctx); return err },
			"Inspector().Queues":  func() error { _, err := c.Inspector().Queues(ctx); return err },
			"NewInspector.Queues": func() error { _, err := in.Queues(ctx); return err },
		}
		for call, f := range calls {
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Errorf("%s client: %s panicked: %v", name, call, r)
					}
				}()
				err := f()
				if !errors.Is(err, jobs.ErrInvalid) || !strings.Contains(err.Error(), "nil") || !strings.Contains(err.Error(), "Redis client") && !strings.Contains(err.Error(), "redis.Client") {
					t.Errorf("%s client: %s: %v, want ErrInvalid naming the nil Redis client", name, call, err)
				}
			}()
		}
	}
}

// TestNilOrZeroClientAndInspectorAreRefused calls every exported method of
// a Client and an Inspector that NewClient or NewInspector did not make (a
// nil pointer, such as an unset field, or a zero value) and of ones built
// over a nil Redis client: each returns an error matching jobs.ErrInvalid
// instead of panicking. The same calls on a client over a real Redis get
// past that check.
func TestNilOrZeroClientAndInspectorAreRefused(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	var nilClient *jobs.Client
	var nilInspector *jobs.Inspector
	receivers := map[string]any{
		"nil *Client":                nilClient,
		"zero Client":                &jobs.Client{},
		"nil *Client's Inspector":    nilClient.Inspector(),
		"nil *Inspector":             nilInspector,
		"zero Inspector":             &jobs.Inspector{},
		"NewInspector over nil":      jobs.NewInspector(nil, jobs.Config{}),
		"NewClient over nil":         jobs.NewClient(nil, jobs.Config{}),
		"NewClient over nil's Insp.": jobs.NewClient(nil, jobs.Config{}).Inspector(),
	}
	ctxType := reflect.TypeFor[context.Context]()
	errType := reflect.TypeFor[error]()
	for name, recv := range receivers {
		v := reflect.ValueOf(recv)
		for i := range v.NumMethod() {
			m, mt := v.Method(i), v.Type().Method(i)
			ft := m.Type()
			if ft.NumOut() == 0 || ft.Out(ft.NumOut()-1) != errType || mt.Name == "Close" {
				continue // Close has nothing to release; Inspector and Namespace return no error
			}
			in := make([]reflect.Value, ft.NumIn())
			for j := range in {
				in[j] = reflect.Zero(ft.In(j))
				if ft.In(j) == ctxType {
					in[j] = reflect.ValueOf(ctx)
				}
			}
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Errorf("%s: %s panicked: %v", name, mt.Name, r)
					}
				}()
				var out []reflect.Value
				if ft.IsVariadic() {
					out = m.CallSlice(in)
				} else {
					out = m.Call(in)
				}
				err, _ := out[len(out)-1].Interface().(error)
				if !errors.Is(err, jobs.ErrInvalid) {
					t.Errorf("%s: %s: %v, want an error matching ErrInvalid", name, mt.Name, err)
				}
			}()
		}
	}
	for _, recv := range []any{nilClient, &jobs.Client{}} {
		_, err := recv.(*jobs.Client).Enqueue(ctx, rangeArgs{N: 1})
		if err == nil || !strings.Contains(err.Error(), "NewClient") {
			t.Errorf("Enqueue on a client NewClient did not make: %v, want an error saying to use NewClient", err)
		}
	}
	if got := nilInspector.Namespace(); got != "" {
		t.Errorf("nil Inspector's Namespace: %q", got)
	}
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	if err := c.Inspector().Ping(ctx); err != nil {
		t.Fatalf("a client NewClient made: Ping: %v", err)
	}
	if _, err := c.Enqueue(ctx, rangeArgs{N: 1}); err != nil {
		t.Fatalf("a client NewClient made: Enqueue: %v", err)
	}
}
