// Package lease implements fenced leases on Redis: mutual exclusion for
// liveness, fencing tokens for safety.
//
// A lease is a time-bounded claim by one owner on one resource (a job, an
// account, a leader role). Every acquisition mints a fencing [Token] that is
// strictly greater than every token issued before for that resource. The
// holder passes the token along with its side effects, and protected storage
// (see package fence) rejects any write carrying a token lower than the
// highest it has seen. A lease alone cannot stop a paused process from
// acting after it expired; the token can.
//
// # Protocol
//
// Each resource has one key, hash-tagged by resource (the same code runs on
// a single Redis, Sentinel and Redis Cluster). It keeps the last token
// minted after the lease ends, until it is no longer needed (see Keys):
//
//	<ns>:lease:{<resource>}   "<token> <deadline µs, namespace time> <owner>"
//
// Acquire runs one Lua script: if the deadline has not passed by the
// namespace's time (below),
// it returns the holder (the caller gets a [*HeldError] matching [ErrHeld]);
// otherwise it mints
//
//	token = max(stored + 1, (epoch << 52) + Redis TIME in microseconds)
//
// records the holder and sets the deadline from the namespace's time. The epoch is 0
// until the first failover (so tokens are exactly max(stored + 1, TIME µs)
// then) and grows with every failover; see Failover below. Renew extends the
// deadline only for the exact (owner, token) pair that holds a live lease
// and returns [ErrLost] otherwise. Release clears the deadline and owner
// (keeping the token) only for that pair, expired or not; a stale release
// (another token, or the lease already released) changes nothing and
// returns [ErrNotHeld].
//
// Acquire is not idempotent by owner: an Acquire that failed after its
// request was sent may have taken the lease, and the same owner's retry
// then gets a [*HeldError] naming itself. Release [HeldError.Lease] and
// acquire again (a higher token), or wait for its deadline; see
// [Manager.Acquire].
//
// [Manager.KeepAlive] renews every TTL/3 and exposes a context that is
// cancelled (cause matching [ErrLost]) when a renew reports the lease lost,
// or when no renew was confirmed before the local deadline: the local send
// time of the last confirmed acquire or renew, plus the TTL, minus a safety
// margin (Config.SafetyMargin; by default a tenth of the TTL and at least
// 10ms, never more than half the TTL; KeepAlive refuses a configured margin
// above half its TTL with ErrInvalid). Measuring from the send time with the
// monotonic clock means network delay only ever shortens the local view of
// the lease. Worker pools and the asynq bridge apply the same rule to their
// attempts.
//
// Concurrent calls on one [Manager] share round trips: a call made while
// another is in flight queues, and the queued calls go out together in one
// pipeline. On a single primary (or Sentinel), queued acquisitions and
// releases run as one script call (each on its own resource, in the order
// they were made; the time and the epoch checked once for all), so the
// script's fixed cost is paid once per batch. An idle Manager sends each
// call at once. With
// Config.Durability, Acquire's pipelines end with one WAIT (or WAITAOF) for
// replicas, on the connection that ran the acquisitions, so a batch of
// acquisitions pays for one wait; renewals and releases do not wait.
//
// # Failover
//
// A failover to a replica that missed the last writes loses the last
// tokens, and the promoted node's clock may be behind: with the clock
// alone, new tokens would fall below tokens already handed out, storage
// would refuse every live holder until that clock caught up, and a zombie
// from before the failover would out-rank them. Epochs prevent that. Each
// primary's tenure has its own replication id; the Manager holds the epoch
// of the primary it writes to, and the acquire script compares the
// replication id with the node's own: on a new primary it mints nothing,
// the Manager learns the new primary's epoch (one round trip, once per
// failover), and the acquire runs again. Every token of the new epoch is
// above every token of the old one, whatever either clock says. The epoch
// comes from the Sentinels' config epoch when Config.Sentinel is set
// (agreed by election, raised by every failover, so nothing the failover
// lost is needed), and is otherwise counted in the namespace's epoch record
// <ns>:epoch, which every replica holds from the start of each primary's
// tenure. internal/epoch documents the rules and what they do not cover
// (mainly: without Sentinel, a chain of failovers that lost the record).
// On Redis Cluster each resource keeps its own epoch record in its slot,
// <ns>:lease:{<resource>}:clock (a resource starting with "}", whose tag
// would be empty, is tagged by a digest instead: see [Manager.Key]), and the slot's master decides the epoch in
// the acquire script itself: the first acquire of a master's tenure (a
// promoted replica) records its config epoch, which the cluster raised
// above every other master's when it elected it (or one more than the
// highest recorded, when that is not above), so nothing the failover lost
// and no round trip is needed.
//
// Storage feedback is the second line: a refused write's *fence.StaleError
// carries storage's mark (StoredToken), and [Manager.Raise] lifts the
// resource's counter above it, so the next Acquire mints above the mark at
// once:
//
//	var stale *fence.StaleError
//	if errors.As(err, &stale) {
//		err = m.Raise(ctx, stale.Fence.Resource, stale.StoredToken) // ends l if its token is below
//	}
//
// Tokens of epoch 2 and up are above 2^53, where floating point (Lua
// numbers, JSON numbers in JavaScript) is no longer exact, and from epoch
// 2048 above 2^63, beyond a signed 64-bit integer: storage must compare
// them as unsigned 64-bit integers (pgfence stores numeric(20,0),
// redisfence compares decimal strings, httpfence parses uint64).
//
// Deadlines are in the namespace's time: Redis TIME plus an offset per
// primary tenure, never below the last time a script read, kept in the
// epoch record <ns>:epoch (internal/epoch's epoch_now; ARCHITECTURE.md, "The
// clock"). After a failover to a node whose clock is behind, the time
// continues from the old primary's (at most the replication lag behind), so
// a lease held across it ends on time, not that much later; failing back to
// a node with a true clock does not end live leases early. On Redis Cluster
// the resource's record <ns>:lease:{<resource>}:clock keeps that time, by
// the same rule, for the master of its slot.
//
// # Keys
//
// A released lease's key (and a raised one's) expires 2 minutes past the
// time part of its token (its low 52 bits, a Redis time in µs), so
// resources named after user data (one per customer) do not keep a key
// each for ever. That is when it is no longer needed: a key gone mints
// (epoch << 52) + the namespace's time, which never goes back and is never
// more than a minute behind the Redis clock that expires the key, so every
// token minted afresh is above every token the key held (ARCHITECTURE.md,
// "Lease keys linger out", names the one case it does not cover: a clock
// run ahead and stepped back while no script read the time). A key stays (no
// expiry) on Redis Cluster, where each resource also keeps its epoch
// record, without the namespace's time (a client that is not a
// *redis.Client nor a *redis.ClusterClient), and while it holds a token of
// an epoch above the releasing Manager's (a mark storage fed back). The
// key of a lease that was never released stays until it is acquired and
// released again. Redis must not evict keys (maxmemory-policy noeviction):
// an evicted key loses its counter.
//
// # Guarantees
//
//   - Tokens per resource strictly increase and are never handed to two
//     owners, across failovers too, as far as the epochs reach (see Failover).
//   - While Redis keeps its data, at most one owner holds a live lease.
//   - Deadlines use the namespace's time in Redis, so client clocks do not matter
//     for expiry; only the local monotonic clock bounds KeepAlive's view.
//
// # Failure modes
//
//   - Pauses (GC, SIGSTOP, a slow network): a paused holder may believe it
//     still holds an expired lease. Mutual exclusion is lost for that moment;
//     safety is not, because storage fences on the token and the new holder's
//     token is higher.
//   - Expiry: a holder that cannot renew in time sees its KeepAlive context
//     cancelled before the server-side deadline (by the safety margin), so
//     well-behaved work stops before anyone else can start.
//   - Redis restart without persistence: holders and counters are gone, so a
//     second owner may acquire while the first still runs. The restarted
//     server has a new replication id: without Sentinel, a Manager that
//     minted before moves to the next epoch, so its tokens are above every
//     token issued before; with Sentinel (no failover happened) the epoch
//     stays and new tokens are at least the server's TIME in microseconds,
//     still above the old ones unless the server clock stepped back by more
//     than the outage lasted. Fencing keeps storage safe either way.
//   - Failover to a replica that missed the last writes: the holder of a
//     lost lease may still run while a second owner acquires (mutual
//     exclusion is lost for that moment), but the new token is of a higher
//     epoch, so storage takes the new owner's writes and refuses the old
//     one's. Set Config.Durability to make Acquire wait (Redis WAIT) for
//     replicas to acknowledge the new token, failing with [ErrReplicas]
//     (the acquisition undone) otherwise; this narrows, but (as WAIT is not
//     consensus) cannot close, the window in which a promoted replica
//     forgets a lease. A renewal is not waited for: one lost in a failover
//     makes the lease end earlier on the new primary, which epochs and
//     fencing make safe.
//
// Leases give liveness; tokens give safety. Use both.
package lease
