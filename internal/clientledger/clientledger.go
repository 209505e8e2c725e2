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

// Route moves each job of js whose queue is partitioned to its partition
// (by its PartitionKey, else its operation id), as c, a *jobs.Client,
// routes its enqueues. Package jobs sets it when it is initialised.
var Route func(ctx context.Context, c any, js []*ledger.NewJob) error
