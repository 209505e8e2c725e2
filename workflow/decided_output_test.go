package workflow_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
	"github.com/fencedq/fencedq/workflow"
)

// ReadDep is a step that reads its dependency Dep's output, hands the
// error to the test, and records no output of its own.
type ReadDep struct{ Dep string }

// Kind names ReadDep's handler.
func (ReadDep) Kind() string { return "wf_read_dep" }

// TestOutputOfAStepDecidedSucceeded: a step whose outcome was unknown and
// that an operator marked succeeded recorded no output; its dependent's
// DependencyOutput, and Client.Output, say so with an error matching
// jobs.ErrDecidedWithoutOutput (and jobs.ErrNoOutput) that names who
// decided, while a step that succeeded without recording one still gets
// a plain jobs.ErrNoOutput.
func TestOutputOfAStepDecidedSucceeded(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	res, err := workflow.Enqueue(ctx, e.client, workflow.New("decided").
		Add("charge", Step{Name: "charge", Unknown: true}).
		Add("ship", ReadDep{Dep: "charge"}, workflow.After("charge")))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	e.run(true, nil, func(p *worker.Pool) error {
		if err := worker.Register(p, jobs.WorkFunc[Step](e.work)); err != nil {
			return err
		}
		return worker.Register(p, jobs.WorkFunc[ReadDep](func(ctx context.Context, j *jobs.Job[ReadDep]) error {
			var out StepOut
			got <- j.DependencyOutput(ctx, j.Args.Dep, &out)
			return nil
		}))
	})
	e.wait(res, "charge", jobs.Review)
	ref := res.Steps["charge"]
	if _, err := e.client.Resolve(ctx, ref.Queue, ref.JobID, jobs.DecideSucceeded, "ada", "the bank says it was charged"); err != nil {
		t.Fatal(err)
	}
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, jobs.ErrDecidedWithoutOutput) || !errors.Is(err, jobs.ErrNoOutput) ||
			!strings.Contains(err.Error(), "operator:ada") {
			t.Fatalf("%s of a step an operator marked succeeded: %v, want jobs.ErrDecidedWithoutOutput naming operator:ada", what, err)
		}
	}
	check("DependencyOutput", <-got)
	e.wait(res, "ship", jobs.Succeeded)
	var out StepOut
	check("Client.Output", e.client.Output(ctx, ref.Queue, ref.JobID, &out))
	ship := res.Steps["ship"]
	if err := e.client.Output(ctx, ship.Queue, ship.JobID, &out); !errors.Is(err, jobs.ErrNoOutput) || errors.Is(err, jobs.ErrDecidedWithoutOutput) {
		t.Fatalf("Client.Output of a step that recorded none: %v, want a plain jobs.ErrNoOutput", err)
	}
}
