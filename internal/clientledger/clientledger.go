// Package clientledger hands the ledger behind a jobs.Client to the
// library's other public packages (workflow), without a public accessor.
package clientledger

import "github.com/fencedq/fencedq/internal/ledger"

// Of returns the ledger behind c, a *jobs.Client, or nil for anything
// else. Package jobs sets it when it is initialised.
var Of func(c any) *ledger.Ledger
