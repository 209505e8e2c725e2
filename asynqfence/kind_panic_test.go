package asynqfence_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/asynqfence"
	"github.com/fencedq/fencedq/jobs"
)

// kindPanicArgs' Kind panics (a kind read from a nil map, say).
type kindPanicArgs struct{ byName map[string]string }

func (a kindPanicArgs) Kind() string {
	if a.byName == nil {
		panic("no kind table")
	}
	return a.byName["kind"]
}

// TestNewTaskKindPanicIsRefused: NewTask of args whose Kind method panics
// returns an error matching jobs.ErrInvalid naming the method, as
// jobs.Client.Enqueue does, instead of panicking in the producer.
func TestNewTaskKindPanicIsRefused(t *testing.T) {
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("NewTask panicked: %v", r)
		}
	}()
	if _, err := asynqfence.NewTask(kindPanicArgs{}, "op-1"); !errors.Is(err, jobs.ErrInvalid) || !strings.Contains(err.Error(), "Kind method panicked") {
		t.Fatalf("NewTask: %v, want ErrInvalid naming the Kind method", err)
	}
}
