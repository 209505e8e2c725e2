package jobs_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// kindOnceArgs' Kind answers once, then panics (a kind read from a
// one-shot source): the enqueue reads it once, inside its guard.
type kindOnceArgs struct {
	Customer string `json:"customer"`
	calls    *int
}

func (a kindOnceArgs) Kind() string {
	*a.calls++
	if *a.calls > 1 {
		panic("kind read twice")
	}
	return "kind_once"
}

// TestUniqueFieldRefusalReadsKindOnce: a unique field the args' type
// cannot encode is refused with ErrInvalid naming the kind the enqueue
// read, without calling Kind again outside the guard that turns its
// panic into an error (the refusal used to call it a second time, and a
// Kind that panicked then crashed the caller).
func TestUniqueFieldRefusalReadsKindOnce(t *testing.T) {
	rdb := redistest.Start(t, redistest.Options{}).Client()
	c := jobs.NewClient(rdb, jobs.Config{Namespace: redistest.Namespace(t)})
	var calls int
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("the enqueue panicked: %v", r)
		}
	}()
	_, err := c.Enqueue(context.Background(), kindOnceArgs{Customer: "acme", calls: &calls},
		jobs.Unique(jobs.UniqueOpts{ByFields: []string{"Customer"}}))
	if !errors.Is(err, jobs.ErrInvalid) || !strings.Contains(err.Error(), `kind_once: unique field "Customer"`) {
		t.Fatalf("Enqueue: %v, want ErrInvalid naming kind_once's unique field", err)
	}
	if calls != 1 {
		t.Errorf("Kind called %d times, want 1", calls)
	}
}
