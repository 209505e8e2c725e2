package asynqfence_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/hibiken/asynq"

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

// TestHandlerOfAKindThatPanics: Handler and Handle of a worker whose args'
// Kind method panics on the zero value panic at once, naming the method,
// as they do for a nil worker, instead of failing every delivery.
func TestHandlerOfAKindThatPanics(t *testing.T) {
	w := jobs.WorkFunc[kindPanicArgs](func(context.Context, *jobs.Job[kindPanicArgs]) error { return nil })
	for name, register := range map[string]func(){
		"Handler": func() { asynqfence.Handler(w) },
		"Handle":  func() { asynqfence.Handle(asynq.NewServeMux(), w) },
	} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "Kind method panicked") {
					t.Errorf("%s: recovered %v, want a panic naming the Kind method", name, r)
				}
			}()
			register()
		}()
	}
}
