// Package model holds executable specifications of fencedq's two safety
// mechanisms, written in plain Go with no Redis in them:
//
//   - [Ledger]: the job ledger's state table as pure functions, one per
//     input kind (enqueue, claim, renew, complete, expire, resolve, cancel,
//     pause, restart), each taking the state and an input and returning the
//     new state and the evidence the real ledger must show;
//   - [LeaseModel] and [LedgerModel]: sequential specifications of the lease
//     and of the ledger's fencing, for checking recorded concurrent
//     histories ([Op]) for linearizability;
//   - [CheckHistory] and [Invariants]: properties every history must keep
//     (one state index per job, final states change only by operator
//     action, tokens never go down, no token shared by two owners).
//
// The tests of package jobs and package lease run the real scripts against
// a real redis-server beside these models and compare.
package model
