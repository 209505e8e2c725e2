package fence_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/fencedq/fencedq/fence"
)

func ExampleFence_Accepts() {
	// Storage last accepted token 34 from worker-b.
	owner := "worker-b"
	for _, f := range []fence.Fence{
		{Resource: "account:42", Token: 35, Owner: "worker-c", OperationID: "op-1"},
		{Resource: "account:42", Token: 34, Owner: "worker-b", OperationID: "op-2"},
		{Resource: "account:42", Token: 34, Owner: "worker-x", OperationID: "op-3"},
		{Resource: "account:42", Token: 33, Owner: "worker-a", OperationID: "op-4"},
	} {
		fmt.Printf("token %d of %s: %v\n", f.Token, f.Owner, f.Accepts(34, owner))
	}
	// Output:
	// token 35 of worker-c: true
	// token 34 of worker-b: true
	// token 34 of worker-x: false
	// token 33 of worker-a: false
}

func ExampleNewContext() {
	// A worker pool puts each attempt's fence in the handler's context...
	ctx := fence.NewContext(context.Background(), fence.Fence{
		Resource: "account:42", Token: 35, Owner: "worker-c", OperationID: "job-9/debit",
	})
	// ...and the handler hands it to protected storage.
	f, ok := fence.FromContext(ctx)
	fmt.Println(ok, f.Resource, f.Token, f.OperationID)
	// Output: true account:42 35 job-9/debit
}

func ExampleStaleError() {
	var err error = &fence.StaleError{
		Fence:       fence.Fence{Resource: "account:42", Token: 33, Owner: "worker-a", OperationID: "op"},
		StoredToken: 34, StoredOwner: "worker-b",
	}
	fmt.Println(errors.Is(err, fence.ErrStale))
	fmt.Println(err)
	// Output:
	// true
	// fence: stale token 33 for "account:42" (storage has token 34)
}
