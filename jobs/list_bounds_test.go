package jobs_test

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestListRefusesPagesPastAnyIndex: Inspector.List takes a page past
// anything an index can hold (an offset plus a limit that overflows an
// int) as a bad request, not a panic or an unbounded read.
func TestListRefusesPagesPastAnyIndex(t *testing.T) {
	rdb, ns := redistest.New(t)
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	ctx := context.Background()
	if _, err := c.Enqueue(ctx, noteArgs{}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []jobs.ListParams{
		{State: jobs.Pending, Offset: math.MaxInt, Limit: 1},
		{State: jobs.Pending, Offset: 1, Limit: math.MaxInt},
		{State: jobs.Pending, Select: math.MaxInt},
	} {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("List(%+v) panicked: %v", p, r)
				}
			}()
			if _, err := c.Inspector().List(ctx, p); !errors.Is(err, jobs.ErrInvalid) {
				t.Errorf("List(%+v): %v, want ErrInvalid", p, err)
			}
		}()
	}
}

// TestListDefaultLimitCountsInTheWindow: a List with Limit 0 takes the
// default of 50, which counts in Offset+Limit's bound (MaxListWindow) as a
// limit given would: an offset at the bound is refused, one 50 below it
// is taken.
func TestListDefaultLimitCountsInTheWindow(t *testing.T) {
	rdb, ns := redistest.New(t)
	in := jobs.NewClient(rdb, jobs.Config{Namespace: ns}).Inspector()
	ctx := context.Background()
	if _, err := in.List(ctx, jobs.ListParams{State: jobs.Pending, Offset: jobs.MaxListWindow}); !errors.Is(err, jobs.ErrInvalid) {
		t.Errorf("offset %d with the default limit: %v, want ErrInvalid", jobs.MaxListWindow, err)
	}
	if _, err := in.List(ctx, jobs.ListParams{State: jobs.Pending, Offset: jobs.MaxListWindow - 50}); err != nil {
		t.Errorf("offset %d with the default limit: %v", jobs.MaxListWindow-50, err)
	}
}
