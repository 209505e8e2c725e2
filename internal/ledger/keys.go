package ledger

import (
	"strconv"

	"github.com/fencedq/fencedq/internal/scriptbatch"
)

// Every Redis key of the queue is built here, and nowhere else. For
// namespace ns and queue q (ARCHITECTURE.md has the table, with what each
// key holds):
//
//	ns:{q}:job:<id>, ns:{q}:job:<id>:history, ns:{q}:op:<operation id>
//	ns:{q}:unique                   unique jobs' keys (unique.go)
//	ns:{q}:limit:*, :limits, :rate:*, :rate-held:*, :rates   flow control (flowread.go, flow.lua)
//	ns:{q}:groups, :group:<name>    fair groups (groupread.go)
//	ns:{q}:<state>                  one sorted set per state (pending is the queue)
//	ns:{q}:stats, :events, :reconciler, :paused, :idle, :notify, :series, :rewinds
//	ns:{q}:minute:<ms>              one minute's counts (expiring after MinuteKeep)
//	ns:epoch                        the fencing epochs (internal/epoch)
//	ns:queues, ns:reconciler:status, ns:pools, ns:pool:<id>
//	ns:partitions, ns:partitions:{ns:partitions}:changes:<q>   the partition registry, a queue's layout changes
//	ns:{periodic}:leader, :schedules, :schedule:<id>, :schedule:<id>:ticks, :removed
//
// Every key of a queue shares the hash slot {q}; the scripts derive the
// per-job and per-minute keys from the prefix (ARGV 1), so they stay in it.

func (l *Ledger) prefix(q string) string { return l.cfg.Namespace + ":{" + q + "}:" }

func (l *Ledger) queuesKey() string { return l.cfg.Namespace + ":queues" }

// JobKey returns the key of job id's hash (for memory accounting and tools;
// read jobs through Get).
func (l *Ledger) JobKey(q, id string) string { return l.prefix(q) + "job:" + id }

// StateKey returns the key of state s's index for queue q.
func (l *Ledger) StateKey(q string, s State) string { return l.prefix(q) + string(s) }

func (l *Ledger) statusKey() string { return l.cfg.Namespace + ":reconciler:status" }

func (l *Ledger) opKey(q, op string) string { return l.prefix(q) + "op:" + op }

// OperationKey returns the key that maps caller-given operation id op of
// queue q to its job id (for tools that search operation ids by prefix;
// look jobs up with FindByOperation).
func (l *Ledger) OperationKey(q, op string) string { return l.opKey(q, op) }

// NotifyChannel is the pub/sub channel on which queue q's idle pools are
// woken when a job becomes due.
func (l *Ledger) NotifyChannel(q string) string { return l.prefix(q) + "notify" }

// layout is a queue's key prefix and the KEYS every ledger script takes.
type layout struct {
	prefix string
	keys   []string // shared by every call: never modified
	// merge is how enqueue.lua calls of mode "" (plain, unique) merge
	// (enqueueMerge), built once.
	merge [2]*scriptbatch.Merge
}

// maxLayouts bounds how many queues' layouts a ledger keeps; past it (a
// client enqueueing into ever new queues) layouts are built per call.
const maxLayouts = 4096

// layoutOf returns queue q's layout, built on first use.
func (l *Ledger) layoutOf(q string) *layout {
	if v, ok := l.layouts.Load(q); ok {
		return v.(*layout)
	}
	p := l.prefix(q)
	lay := &layout{prefix: p, keys: l.keys(q), merge: [2]*scriptbatch.Merge{enqueueMerge(p, "", false), enqueueMerge(p, "", true)}}
	if l.nlayouts.Load() >= maxLayouts {
		return lay
	}
	if v, loaded := l.layouts.LoadOrStore(q, lay); loaded {
		return v.(*layout)
	}
	l.nlayouts.Add(1)
	return lay
}

// keys builds the KEYS layout every ledger script shares (see prelude.lua):
// the queue's pending index, which names its hash slot, and the clock
// record (clockKey). The scripts derive the queue's other keys from its
// prefix: deriving a key costs a call about 800 Redis instructions less
// than passing it.
func (l *Ledger) keys(q string) []string {
	return []string{l.prefix(q) + "pending", l.clockKey(q)}
}

// clockKey returns the record queue q's scripts keep the namespace's time
// in (internal/epoch's epoch_now): the namespace's epoch record, which
// minting scripts also check their epoch against; on Redis Cluster, where a
// script touches one hash slot, the queue's own <ns>:{q}:clock, which holds
// the queue's epochs and time the same way (internal/epoch's epoch_node).
func (l *Ledger) clockKey(q string) string {
	if l.epoch.Enabled() {
		return l.epoch.Key()
	}
	return l.prefix(q) + "clock"
}

func (l *Ledger) poolsKey() string { return l.cfg.Namespace + ":pools" }

func (l *Ledger) poolKey(id string) string { return l.cfg.Namespace + ":pool:" + id }

func (l *Ledger) periodicPrefix() string { return l.cfg.Namespace + ":{periodic}:" }

// scheduleRemovalsKey is the namespace's schedule removals, in the
// {periodic} slot of the schedules they record.
func (l *Ledger) scheduleRemovalsKey() string { return l.periodicPrefix() + "removed" }

// partitionChangesKey is queue q's layout changes: a list in the slot of
// the partition registry (its hash tag is the registry's key, which has
// none), so the change and its record are one script call.
func (l *Ledger) partitionChangesKey(q string) string {
	return l.partitionsKey() + ":{" + l.partitionsKey() + "}:changes:" + q
}

func (l *Ledger) scheduleKeys(id string) []string {
	p := l.periodicPrefix()
	return []string{p + "leader", p + "schedules", p + "schedule:" + id, p + "schedule:" + id + ":ticks"}
}

func (l *Ledger) seriesKey(q string) string { return l.prefix(q) + "series" }

// minuteKey is queue q's counts of the minute starting at ms (unix
// milliseconds); the scripts build the same name from the queue's prefix
// (prelude.lua's per_minute).
func (l *Ledger) minuteKey(q string, ms int64) string {
	return l.prefix(q) + "minute:" + strconv.FormatInt(ms, 10)
}

func (l *Ledger) rewindsKey(q string) string { return l.prefix(q) + "rewinds" }

// uniqueKey is queue q's unique index (unique jobs: unique.go).
func (l *Ledger) uniqueKey(q string) string { return l.prefix(q) + "unique" }

// Workflow keys (workflow.go): ns:{q}:wf:<id> (the record, in its home
// queue), ns:{q}:wfop:<operation id>, ns:{q}:workflows (zset by creation),
// ns:{q}:waiting (steps waiting for dependencies), ns:{q}:job:<id>:waits,
// ns:{q}:job:<id>:wf_failed (a cancelled step's failed dependencies),
// ns:{q}:handover (hand-over records to other queues), ns:{q}:wfhome:<op>
// (of a queue's own name: the queue name, its own or a partition's, the
// workflow of operation id op claimed for its home, ClaimWorkflowHome).

func (l *Ledger) workflowKey(q, id string) string { return l.prefix(q) + "wf:" + id }

func (l *Ledger) workflowsKey(q string) string { return l.prefix(q) + "workflows" }

func (l *Ledger) handoverKey(q string) string { return l.prefix(q) + "handover" }
