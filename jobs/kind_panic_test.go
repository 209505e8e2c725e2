package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// kindPanicArgs' Kind panics (a kind read from a field of a nil map, say).
type kindPanicArgs struct{ byName map[string]string }

func (a kindPanicArgs) Kind() string {
	if a.byName == nil {
		panic("no kind table")
	}
	return a.byName["kind"]
}

type kindOKArgs struct{}

func (kindOKArgs) Kind() string { return "kind_ok" }

// TestArgsKindPanicIsRefused: args whose Kind method panics fail the
// enqueue with ErrInvalid naming the method, as the kind's other methods
// do (TestArgsMethodPanicIsRefused): through Enqueue, EnqueueMany (the
// valid job beside it is not written either, and the error names the
// job's position) and a client with enqueue middleware; nothing is
// written and the caller does not panic. Params describing such args, or
// a nil pointer, print without panicking (fmt would show a PANIC= text,
// and a logger's LogValue the same).
func TestArgsKindPanicIsRefused(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t, redistest.Options{}).Client()
	ns := redistest.Namespace(t)
	plain := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	mw := jobs.NewClient(rdb, jobs.Config{Namespace: ns, EnqueueMiddleware: []jobs.EnqueueMiddleware{
		func(next jobs.EnqueueFunc) jobs.EnqueueFunc { return next },
	}})
	for name, c := range map[string]*jobs.Client{"plain": plain, "middleware": mw} {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s: the enqueue panicked: %v", name, r)
				}
			}()
			_, err := c.Enqueue(ctx, kindPanicArgs{})
			if !errors.Is(err, jobs.ErrInvalid) || !strings.Contains(err.Error(), "Kind method panicked") {
				t.Errorf("%s Enqueue: %v, want ErrInvalid naming the Kind method", name, err)
			}
			_, err = c.EnqueueMany(ctx, []jobs.Params{{Args: kindOKArgs{}}, {Args: kindPanicArgs{}}})
			if !errors.Is(err, jobs.ErrInvalid) || !strings.Contains(err.Error(), "Kind method panicked") || !strings.Contains(err.Error(), "job 1") {
				t.Errorf("%s EnqueueMany: %v, want ErrInvalid naming job 1's Kind method", name, err)
			}
		}()
	}
	if _, err := jobs.Prepare(kindPanicArgs{}); !errors.Is(err, jobs.ErrInvalid) {
		t.Errorf("Prepare: %v, want ErrInvalid", err)
	}
	if n, err := redistest.CountKeys(ctx, rdb); err != nil || n != 0 {
		t.Fatalf("refused enqueues wrote %d keys (%v)", n, err)
	}
	var nilArgs *kindOKArgs
	for _, p := range []jobs.Params{{Args: kindPanicArgs{}}, {Args: nilArgs}} {
		if s := fmt.Sprint(p); strings.Contains(s, "PANIC") {
			t.Errorf("Params printed as %q", s)
		}
		if s := p.LogValue().String(); strings.Contains(s, "PANIC") || s == "" {
			t.Errorf("Params logged as %q", s)
		}
	}
}
