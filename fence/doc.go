// Package fence is the protected-storage side of fencedq: the contract that
// storage adapters implement so that a write from a paused, superseded lease
// holder is rejected instead of overwriting newer work.
//
// # The contract
//
// Every protected write carries a [Fence]:
//
//	fence.Fence{
//		Resource:    "account:42",      // what the write touches (the lease's resource)
//		Token:       l.Token,           // the lease token that authorises it
//		Owner:       "worker-7/att-3",  // the lease holder
//		OperationID: "job-81f3/debit",  // makes the write idempotent
//	}
//
// Storage keeps, per resource, a high-water mark (token, owner) and, per
// operation id, an effect record. In one atomic step with the write itself
// it:
//
//  1. accepts the fence if its token is higher than the stored one, or equal
//     with the same owner ([Fence.Accepts]), and raises the mark to it;
//     otherwise it rejects the write with a [*StaleError] (matching
//     [ErrStale]) and changes nothing;
//  2. records the operation id, or, if it is already recorded, rejects the
//     write with an [*AlreadyAppliedError] (matching [ErrAlreadyApplied])
//     that carries the record, and changes nothing;
//  3. applies the write.
//
// # Scope of an operation id
//
// An operation id names one effect across the whole store (one PostgreSQL
// effect table, one Redis namespace), not per resource and not per queue:
// every adapter keys its effect log by the operation id alone. A write that
// carries an operation id already applied is refused with an
// [*AlreadyAppliedError], whatever its resource, and whichever job sent it:
//
//   - a retry of the job that applied it (the usual case): the effect
//     happened exactly once, by an earlier attempt;
//   - another job carrying the same operation id, in the same queue after
//     the ledger forgot the first one, or in another queue (the ledger
//     deduplicates operation ids per queue only): its own write did not
//     happen, because the operation it names already did.
//
// The error carries both sides: Record is the fence that applied the
// operation (resource, token, owner; worker pools use "<worker id>/<job
// id>" as owner, so it names the job), Fence is the refused write, and
// [AlreadyAppliedError.Elsewhere] tells whether they differ. Worker pools
// and the asynq bridge treat the error as success and keep its text in
// the job's record, and the job's reason (its record, its history, fencedq
// inspect, the dashboard's job page) names the job and queue that applied
// the effect when the ledger still holds it: "effect already applied by
// job <id> in queue <queue> (token, resource)", or "by an earlier
// attempt of this job". These texts, and the error's own, name tokens
// but never the owners beside them: a token with its owner authorises
// writes as that holder. Give two effects two operation ids; an id reused
// for a different effect is reported as already applied, never applied
// twice.
//
// The fence is checked before the effect log: a stale write of an applied
// operation gets [ErrStale]. A write refused as stale or invalid does not
// claim its operation id, which stays free for a later write on any
// resource. While a write of an operation id is in flight, a write of the
// same id waits for it (PostgreSQL) or gets [ErrInProgress] (Redis, when
// the resources differ).
//
// A fence with an empty field or a zero token fails with [ErrInvalid] before
// storage is touched, as does one no lease can have issued (a resource over
// lease.MaxResourceLen or an owner over lease.MaxOwnerLen bytes, refused by
// Fence.Validate and so by every adapter) or one an adapter cannot carry
// faithfully (text PostgreSQL cannot hold, a value an HTTP header would
// alter).
//
// # Adapters
//
//   - fence/pgfence: PostgreSQL. Apply runs your function inside the
//     transaction that checks the fence and records the operation id;
//     ApplyMulti fences several resources (a transfer) in sorted lock order.
//   - fence/redisfence: Redis, single node, Sentinel or Cluster. Apply checks
//     the fence, records the operation and performs a small set of mutations
//     (SET, DEL, HSET, HINCRBY, INCRBY, RPUSH) in one Lua script, on keys in
//     the resource's hash slot.
//   - fence/httpfence: HTTP. A client Transport sends the fence of a
//     request's context as headers (Fencing-Token, Fencing-Resource,
//     Fencing-Owner, Idempotency-Key); a server Middleware, backed by either
//     store, answers 409 to stale tokens and does not re-run operations that
//     were applied.
//
// # Using a fence in a job
//
// Worker pools put each attempt's fence in the handler's context
// ([NewContext]); handlers read it with [FromContext] and pass it to the
// store. Right after acquiring a lease, call the store's FenceOnAcquire: it
// raises the high-water mark without recording an operation, so an older
// holder that wakes up is cut off before the new holder's first write.
//
// How a handler should treat the errors:
//
//   - nil: applied now.
//   - ErrAlreadyApplied: applied before, by this job's earlier attempt or
//     by another job carrying the same operation id (see above); treat as
//     success. The effect happened exactly once; the error says who made it.
//   - ErrStale: this attempt lost its lease to a newer one; stop and report
//     the loss, do not retry with the same token.
//   - ErrInProgress: the same operation is being applied by another request
//     right now (Redis, and the HTTP guards); retry later.
//   - ErrInvalid: a programming error; nothing was written.
//   - anything else (a network error, a failed commit): the outcome is
//     unknown. Report the job as uncertain; the reconciler resolves it.
//
// # Reconciling
//
// An [EffectLog] answers "was this operation applied?" from the operation
// id. The reconciler asks it for jobs left uncertain by a timeout or a
// crash, and marks them succeeded or re-runs them, so every job whose
// effects go through a fence store reconciles automatically. Before it
// asks a log that is also a [Fencer] (both stores are), it raises the mark
// of the uncertain attempt's resource past that attempt's token, so the
// attempt, should it still run, is refused as stale from then on and an
// answer "not applied" stays true. pgfence's
// Store implements EffectLog directly. redisfence's Store implements it
// through an index from operation id to resource (effect records live in
// the resource's hash slot); its AppliedOn takes the resource and skips the
// index. Effect records are kept for a configurable retention (Redis
// default: 7 days; PostgreSQL: until PruneEffects), which bounds how late an
// operation can be recognised as applied.
//
// # Guarantees and limits
//
//   - Per resource, accepted tokens never decrease, and an owner other than
//     the mark's cannot write with the mark's token.
//   - An operation id applies at most once, on one resource, while its
//     record is retained, also under concurrent duplicates on any resources.
//   - A rejected or invalid write leaves data, the mark and the effect log
//     unchanged.
//   - Fencing protects only writes that go through a store. A side effect
//     elsewhere (an e-mail, a call to an unfenced service) is not protected;
//     send it through httpfence to a service that checks the headers, or
//     make it idempotent by the operation id.
package fence
