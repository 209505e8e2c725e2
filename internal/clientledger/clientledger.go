// Package clientledger hands the ledger behind a jobs.Client to the
// library's other public packages (workflow), without a public accessor.
package clientledger

import (
	"context"

	"github.com/fencedq/fencedq/internal/ledger"
)

// Of returns the ledger behind c, a *jobs.Client, or nil for anything
// else, and the error (matching jobs.ErrInvalid) every call of c returns
// when its namespace is invalid, so that nothing is read or written under
// it. Package jobs sets it when it is initialised.
var Of func(c any) (*ledger.Ledger, error)

// Operator checks an operator action's actor and note on queue as c, a
// *jobs.Client, does (an error matching jobs.ErrInvalid) and returns the
// actor as the ledger records it ("operator:<name>"). Package jobs sets it
// when it is initialised.
var Operator func(c any, queue, actor, note string) (string, error)

// Route moves each job of js whose queue is partitioned to its partition
// (by its PartitionKey, else its operation id), as c, a *jobs.Client,
// routes its enqueues. Package jobs sets it when it is initialised.
var Route func(ctx context.Context, c any, js []*ledger.NewJob) error

// Written is what the write handed to Through wrote for one job, or found
// (deduplicated).
type Written struct {
	JobID, OperationID string
	// Queue is the job's queue as the ledger holds it (a partition's name
	// for a partitioned queue).
	Queue        string
	Deduplicated bool
}

// Through runs the steps of a workflow, which the caller writes itself,
// through the enqueue middleware of c, a *jobs.Client
// (jobs.Config.EnqueueMiddleware), as one EnqueueMany call would: step
// steps[i], args[i] (a jobs.JobArgs) enqueued with opts[i] (a
// []jobs.Option), is one job (jobs.EnqueueRequest.WorkflowStep names it).
// write is the last link of the chain: it gets each job's options as the
// middleware left them (a []jobs.Option per job, to validate and prepare
// the job by, as Enqueue does after the last middleware), writes the jobs
// and returns one Written per job. Package jobs sets it when it is
// initialised.
var Through func(ctx context.Context, c any, steps []string, args []any, opts []any, write func(ctx context.Context, opts []any) ([]Written, error)) error
