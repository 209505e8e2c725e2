// Package redisfence fences writes to Redis: one Lua script compares the
// fence with the resource's stored (token, owner), records it, records the
// operation id and applies the caller's mutations, atomically. It runs on a
// single Redis, Sentinel and Redis Cluster (any redis.UniversalClient).
//
// # Keys
//
// Every key of one resource is hash-tagged by the resource, so one script
// touches one slot:
//
//	<ns>:fence:{<resource>}:hw               hash token, owner, updated_us         no TTL
//	<ns>:fence:{<resource>}:op:<op id>       hash state, resource, operation_id,   Config.EffectTTL
//	                                              token, owner, applied_us        (default 7 days)
//	<ns>:fence:opindex:{<op id>}             string: the resource the operation     EffectTTL + 1h
//	                                              id is bound to
//	<ns>:fence:opclaims:{<op id>}            integer: writes of it in flight or    EffectTTL + 1h
//	                                              applied on that resource
//
// An operation id's two keys are hash-tagged by the operation id, which
// may hold any character: one starting with "}" (which would leave an
// empty tag, and Redis would hash each whole key into its own slot) is
// tagged by a digest instead, <ns>:fence:opindex:#{<16 hex digits of its
// SHA-256>}:<op id> and likewise for opclaims, so the two keys always
// share a slot. (Before, such an id failed with CROSSSLOT on Cluster; a
// binding a single Redis holds under the old key, <ns>:fence:opindex:{<op
// id>}, is still read by Apply, Guard and Applied until it expires.)
//
// The data keys a write mutates must carry the resource as their hash tag
// (so they share its slot): include "{<resource>}" in them as their first
// braces, or use [Store.DataKey] (<ns>:data:{<resource>}:<name>). Apply
// rejects other keys with fence.ErrInvalid, on every deployment, so code
// that works on one Redis also works on Cluster; a key of another resource
// is refused even when the two resources hash to the same slot, since a
// fence authorises writes to its own resource only. It rejects as well
// fencedq's own keys in the store's namespace, which may
// carry the tag but which no mutation may write: the store's
// (<ns>:fence:...), the leases' and their epoch records (<ns>:lease:...,
// where the resource's lease key is always in its slot), the namespace's
// epoch record (<ns>:epoch), the queues' (<ns>:{<queue>}:...) and the
// namespace's other keys (<ns>:partitions..., <ns>:queues, <ns>:pools,
// <ns>:pool:..., <ns>:reconciler:...). The check knows only the store's
// namespace: give the Store the namespace of the lease.Manager and pools
// whose keys share the Redis (all default to "fq").
// Resource names must not contain "{" or "}": a write with one is refused
// with fence.ErrInvalid before anything is written.
//
// # Writing
//
//	err := store.Apply(ctx, f,
//		redisfence.HIncrBy(store.DataKey(f.Resource, "balance"), "cents", -500),
//		redisfence.RPush(store.DataKey(f.Resource, "history"), "debit:500"))
//
// Supported mutations: [Set], [Del], [HSet], [HIncrBy], [IncrBy], [RPush],
// each key at most once per call. The script reads everything it needs
// (fence, effect record, the type and integer-ness of every mutated key,
// whether a sum overflows 64 bits) before its first write, so a stale
// fence, a repeated operation or a mutation that cannot apply (error
// matching [ErrMutation]) writes nothing.
//
// # Effect log and retention
//
// Effect records live in the resource's slot, so [Store.AppliedOn] needs the
// resource. An operation id names one effect across the namespace, as in
// package pgfence (see package fence, "Scope of an operation id"): before
// its script runs, every Apply or Guard binds the operation id to its
// resource (the index key, in the operation id's own slot). A write whose
// operation id is bound to another resource does not run: it gets a
// *fence.StaleError if its own fence is stale, a *fence.AlreadyAppliedError
// with the other resource's record if the operation applied there, and
// fence.ErrInProgress while a write of it there is still in flight. A write
// refused as stale (or with ErrMutation, or a Guard whose callback failed)
// gives the binding up again, so the operation id stays free; an applied
// operation keeps it. [Store.Applied], the fence.EffectLog, follows the
// binding, so an applied operation is never missed.
//
// A write whose outcome is unknown (a network error during its script)
// keeps its binding: the same operation id on another resource then gets
// fence.ErrInProgress until the binding expires (EffectTTL + 1h), while a
// retry on the same resource, or the reconciler's Applied, proceeds as
// usual.
//
// Records expire after Config.EffectTTL (default 7 days; negative keeps them
// forever). Within that window a repeated operation id is reported as
// already applied; after it, the operation would apply again. Keep the
// retention longer than jobs can be retried or left for reconciliation.
// High-water marks never expire.
//
// Run the Redis with maxmemory-policy noeviction (or without maxmemory):
// an eviction is a deletion the scripts cannot see. Under a volatile-*
// policy (the default of some managed Redis services) memory pressure
// evicts effect records, which carry a TTL, and a repeated operation id
// then applies again; under an allkeys-* policy it may evict high-water
// marks too, and a lower token is then accepted after a higher one.
//
// # Losing writes
//
// High-water marks and effect records are only as durable as the Redis
// that holds them. What its persistence keeps they keep: with append-only
// persistence (appendfsync always) a restart loses none; with RDB
// snapshots or appendfsync everysec a crash loses the writes since the last
// save or second; without persistence a restart, and a FLUSHALL or
// FLUSHDB anywhere, loses them all. A failover to a replica loses what it
// had not received yet (use WAIT, or min-replicas-to-write, to bound it).
// A lost mark lets a write with a lower token than the lost one apply (a
// zombie's, after a failover or restart), and a lost effect record lets a
// repeated operation id apply again: the data the marks guard was lost
// with them when they share the Redis, but a fenced write to data kept
// elsewhere is not. Tokens minted after the loss stay above the lost ones
// (fencing epochs, see package lease), so it is the stored mark, not the
// token order, that is gone. Where that matters, keep the fenced data in
// storage whose durability matches it (package pgfence), or run this Redis
// with appendfsync always and replicas acknowledging writes.
//
// # Guard
//
// [Store.Guard] serves package httpfence: it checks the fence and marks the
// operation pending, runs a callback, and records the operation only if the
// callback succeeded. Read its documentation for the trade-offs against
// pgfence's transactional Guard.
package redisfence
