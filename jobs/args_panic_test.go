package jobs_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// panicArgs' method named by Panic panics.
type panicArgs struct {
	Panic string `json:"panic"`
}

func (panicArgs) Kind() string { return "panic_args" }

func (a panicArgs) boom(method string) {
	if a.Panic == method {
		panic(method + " failed")
	}
}

func (a panicArgs) Limit() (string, int) { a.boom("Limit"); return "export:x", 1 }
func (a panicArgs) RateLimit() (string, int, time.Duration) {
	a.boom("RateLimit")
	return "provider", 10, time.Second
}
func (a panicArgs) Group() string        { a.boom("Group"); return "acme" }
func (a panicArgs) PartitionKey() string { a.boom("PartitionKey"); return "" }
func (a panicArgs) Resource() string     { a.boom("Resource"); return "res" }
func (a panicArgs) Validate() error      { a.boom("Validate"); return nil }

// TestArgsMethodPanicIsRefused: a kind's Limit, RateLimit, Group,
// PartitionKey, Resource or Validate method that panics fails the enqueue
// with ErrInvalid naming the method, through Enqueue, EnqueueMany (a valid
// job before it is not written either) and a client with enqueue
// middleware; nothing is written, and the caller does not panic.
func TestArgsMethodPanicIsRefused(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	plain := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	mw := jobs.NewClient(rdb, jobs.Config{Namespace: ns, EnqueueMiddleware: []jobs.EnqueueMiddleware{
		func(next jobs.EnqueueFunc) jobs.EnqueueFunc { return next },
	}})
	for _, method := range []string{"Limit", "RateLimit", "Group", "PartitionKey", "Resource", "Validate"} {
		for name, c := range map[string]*jobs.Client{"plain": plain, "middleware": mw} {
			check := func(call string, err error) {
				t.Helper()
				if !errors.Is(err, jobs.ErrInvalid) || !strings.Contains(err.Error(), method+" method panicked") {
					t.Errorf("%s %s, %s panics: err %v, want ErrInvalid naming the method", name, call, method, err)
				}
			}
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Errorf("%s, %s panics: the enqueue panicked: %v", name, method, r)
					}
				}()
				_, err := c.Enqueue(ctx, panicArgs{Panic: method})
				check("Enqueue", err)
				_, err = c.EnqueueMany(ctx, []jobs.Params{{Args: panicArgs{}}, {Args: panicArgs{Panic: method}}})
				check("EnqueueMany", err)
			}()
		}
	}
	if keys, err := rdb.Keys(ctx, ns+":*").Result(); err != nil || len(keys) != 0 {
		t.Fatalf("refused enqueues wrote %v (%v)", keys, err)
	}
	if _, err := plain.Enqueue(ctx, panicArgs{}); err != nil {
		t.Fatalf("args whose methods return: %v", err)
	}
}

// TestRequestResourcePanicIsRefused: enqueue middleware reading the
// request's Resource, whose args' Resource method panics, gets "" and the
// enqueue fails with ErrInvalid naming the method, nothing written, as
// without middleware; the caller does not panic.
func TestRequestResourcePanicIsRefused(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	var seen []string
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns, EnqueueMiddleware: []jobs.EnqueueMiddleware{
		func(next jobs.EnqueueFunc) jobs.EnqueueFunc {
			return func(ctx context.Context, reqs []*jobs.EnqueueRequest) ([]*jobs.Result, error) {
				for _, r := range reqs {
					seen = append(seen, r.Resource())
				}
				return next(ctx, reqs)
			}
		},
	}})
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("the enqueue panicked: %v", r)
			}
		}()
		_, err := c.Enqueue(ctx, panicArgs{Panic: "Resource"})
		if !errors.Is(err, jobs.ErrInvalid) || !strings.Contains(err.Error(), "Resource method panicked") {
			t.Errorf("Enqueue: err %v, want ErrInvalid naming the Resource method", err)
		}
		_, err = c.EnqueueMany(ctx, []jobs.Params{{Args: panicArgs{}}, {Args: panicArgs{Panic: "Resource"}}})
		if !errors.Is(err, jobs.ErrInvalid) || !strings.Contains(err.Error(), "Resource method panicked") {
			t.Errorf("EnqueueMany: err %v, want ErrInvalid naming the Resource method", err)
		}
	}()
	if want := []string{"", "res", ""}; !slices.Equal(seen, want) {
		t.Errorf("the middleware read resources %q, want %q", seen, want)
	}
	if keys, err := rdb.Keys(ctx, ns+":*").Result(); err != nil || len(keys) != 0 {
		t.Fatalf("refused enqueues wrote %v (%v)", keys, err)
	}
	seen = nil
	if _, err := c.Enqueue(ctx, panicArgs{}); err != nil || !slices.Equal(seen, []string{"res"}) {
		t.Fatalf("args whose methods return: %v, resources read %q", err, seen)
	}
}
