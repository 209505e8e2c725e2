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
// a single Redis, Sentinel and Redis Cluster). It never expires, so it keeps
// the last token minted after the lease ends:
//
//	<ns>:lease:{<resource>}   "<token> <deadline µs, Redis clock> <owner>"
//
// Acquire runs one Lua script: if the deadline has not passed by Redis TIME,
// it returns the holder (the caller gets a [*HeldError] matching [ErrHeld]);
// otherwise it mints
//
//	token = max(stored + 1, Redis TIME in microseconds)
//
// records the holder and sets the deadline from Redis TIME. Renew extends the
// deadline only for the exact (owner, token) pair that holds a live lease
// and returns [ErrLost] otherwise. Release clears the deadline and owner
// (keeping the token) only for that pair; a stale release changes nothing
// and returns [ErrNotHeld].
//
// [Manager.KeepAlive] renews every TTL/3 and exposes a context that is
// cancelled (cause matching [ErrLost]) when a renew reports the lease lost,
// or when no renew was confirmed before the local deadline: the local send
// time of the last confirmed acquire or renew, plus the TTL, minus a safety
// margin (Config.SafetyMargin; by default a tenth of the TTL and at least
// 10ms, never more than half the TTL). Measuring from the send time with the
// monotonic clock means network delay only ever shortens the local view of
// the lease. Worker pools and the asynq bridge apply the same rule to their
// attempts.
//
// Concurrent calls on one [Manager] share round trips: a call made while
// another is in flight queues, and the queued calls go out together in one
// pipeline (without MinReplicas; a durable acquire waits for replicas on its
// own connection). An idle Manager sends each call at once.
//
// # Guarantees
//
//   - Tokens per resource strictly increase and are never handed to two owners.
//   - While Redis keeps its data, at most one owner holds a live lease.
//   - Deadlines use the Redis server's clock, so client clocks do not matter
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
//     second owner may acquire while the first still runs. Because new tokens
//     are at least the server's TIME in microseconds, they are still above
//     every token issued before (unless the server clock stepped back by more
//     than the outage lasted), and fencing keeps storage safe.
//   - Failover to a replica that missed the last writes: the same argument
//     applies. Set Config.MinReplicas to make Acquire wait (Redis WAIT) for
//     replicas to acknowledge the new token, failing with [ErrReplicas]
//     otherwise; this narrows, but (as WAIT is not consensus) cannot close,
//     the window in which a promoted replica forgets a lease.
//
// Leases give liveness; tokens give safety. Use both.
package lease
