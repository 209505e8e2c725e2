package attempt

import (
	"context"
	"fmt"
	"testing"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

type payArgs struct{}

func (payArgs) Kind() string { return "pay" }

func TestNameApplier(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	l := ledger.New(rdb, ledger.Config{Namespace: ns})
	a, err := c.Enqueue(ctx, payArgs{}, jobs.Queue("a"), jobs.OperationID("op-1"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Enqueue(ctx, payArgs{}, jobs.Queue("b"), jobs.OperationID("op-1"))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := c.Enqueue(ctx, payArgs{}, jobs.Queue("c")) // its id is its operation id
	if err != nil {
		t.Fatal(err)
	}
	refused := fence.Fence{Resource: "job:" + b.JobID, Token: 9, Owner: "w2/" + b.JobID, OperationID: "op-1"}
	applied := func(owner, op string) error {
		return fmt.Errorf("apply: %w", &fence.AlreadyAppliedError{
			Record: fence.Effect{OperationID: op, Resource: "job:x", Token: 7, Owner: owner}, Fence: refused})
	}
	for _, tc := range []struct {
		name, q, id string
		err         error
		want        string
	}{
		{"another queue's job", "b", b.JobID, applied("w1/"+a.JobID, "op-1"),
			"effect already applied by job " + a.JobID + " in queue a (token 7 on job:x)"},
		{"an earlier attempt", "b", b.JobID, applied("w1/"+b.JobID, "op-1"),
			"effect already applied by an earlier attempt of this job (token 7 on job:x)"},
		{"a job without an operation id of its own", "b", b.JobID, applied("w1/"+plain.JobID, plain.JobID),
			"effect already applied by job " + plain.JobID + " in queue c (token 7 on job:x)"},
		{"a writer outside the ledger", "b", b.JobID, applied("some-service", "op-1"), "effect already applied by another holder (token 7 on job:x)"},
		{"a job the ledger forgot", "b", b.JobID, applied("w1/gone", "op-1"), "effect already applied by another holder (token 7 on job:x)"},
		{"not elsewhere", "b", b.JobID, fence.ErrAlreadyApplied, "effect already applied"},
	} {
		got := NameApplier(ctx, l, tc.q, tc.id, tc.err, Decide(End{Err: tc.err}))
		if got.Reason != tc.want || got.To != jobs.Succeeded {
			t.Errorf("%s: %+v, want reason %q", tc.name, got, tc.want)
		}
	}
}
