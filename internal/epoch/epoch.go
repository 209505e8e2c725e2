// Package epoch orders fencing tokens across Redis failovers without
// trusting any clock.
//
// A token minted by a script that uses this package is
//
//	token = max(last + 1, (epoch << Shift) + Redis TIME in µs)
//
// where last is the resource's (or job's) last token and epoch is a small
// counter (0 to [Max]) that grows with every failover. Redis TIME in µs stays
// below 2^52 until 2112, so every token of epoch e+1 is above every token of
// epoch e whatever the clocks said and whichever increments a failover lost:
// a zombie holding a token from before a failover can never out-rank a live
// holder after it. Epoch 0 gives exactly the tokens minted before epochs
// existed, max(last + 1, TIME µs), which stay as a second line of defence
// within an epoch (a restart without persistence that keeps the epoch).
//
// # Where the epoch comes from
//
// Each primary's tenure has its own replication id (master_replid in INFO
// replication): a promoted replica and a restarted primary get a new one.
// A [Tracker] holds (replication id, epoch) for the primary its client
// writes to. Minting scripts get both as arguments, and the library [Lua]
// (prepended to them) compares the replication id with the node's own
// inside the script: a script on another primary than the epoch is for
// mints nothing and tells the caller to [Tracker.Refresh], then run again.
// So no token is ever minted on a new primary with the epoch of an old one,
// and no connection hook or timing is involved.
//
// Refresh runs advance.lua on the primary, which records epochs per
// replication id in the namespace's epoch record (see [Key]) and assigns
// one to a replication id it has not seen:
//
//   - With Sentinel (Options.Sentinel), the master's config epoch, the
//     highest over every Sentinel that answers. Sentinels agree on it by
//     election and raise it on every failover, so it needs nothing the
//     failover could have lost. It is taken only when it is above every
//     epoch known (the record's, the caller's); otherwise (a restart
//     without failover, Sentinels redeployed with fresh state) the epoch
//     is one more than the highest known.
//     The Sentinels are asked again after a first assignment, which is
//     raised if their answer rose meanwhile; otherwise a Sentinel epoch
//     never raises a primary's recorded epoch, since the node may be an
//     old primary cut off from the Sentinels whose tokens must stay below
//     the new primary's.
//   - Without Sentinel, one more than the highest epoch in the record, or
//     than the caller's own highest when the record lost it (a chain of
//     failovers to replicas that never saw the latest record). The record
//     is written at the start of each tenure, so a replica that lags by
//     seconds has it. A caller that minted on another primary with an
//     epoch at least the recorded one raises the record above it.
//
// Scripts mint only when the record holds exactly the caller's epoch, and
// the birth of the record it was learned from (the record's 'born', set
// when it is created); otherwise they write nothing and the caller
// refreshes, so one stale caller cannot mint below the epoch others use on
// the same primary.
//
// # A lost record
//
// FLUSHALL, FLUSHDB or a restart without persistence (and without
// failover) loses the record, and the namespace's time with it, while the
// primary may keep its replication id: minting would restart in the same
// epoch at a time that may be below a zombie's token. A caller that minted
// finds its epoch or the record's birth gone and refreshes; advance.lua
// then moves the primary to one above every epoch the caller knows, or
// keeps the epoch another caller that found the same loss moved it to
// when that is the highest recorded and above every epoch this caller
// minted in: one loss moves it once, however many trackers (a pool's
// ledger, its lease manager) find it. The loss is logged at error level
// once per process and record, at debug level by the process's other
// trackers. A new primary is likewise logged at info level once per
// process and replication id. A process that never minted cannot tell a
// flushed namespace from a new one: it starts at 0 (or the Sentinels'
// epoch) until a process that minted before the loss moves the record
// above, and tokens it minted meanwhile may be below a zombie's (storage
// marks still fence them).
//
// # What it does not guarantee
//
// Without Sentinel, a replica promoted without the record of the epoch its
// old primary used, reached first by clients that never talked to that
// primary, gets the same epoch again; order is then the clock's, as before
// epochs. With Sentinel, epochs are consensus-backed only while Sentinels
// keep their state, and a Sentinel that has not yet heard of a failover
// can report the previous epoch (the highest answer of all is used, and
// asked again after an assignment). Without Sentinel, during a split brain
// (an old primary still taking writes from some clients), a client that
// minted on the new primary and is then served by the old one raises the
// old one above it. Epochs above [Max] are capped (logged at error level):
// past that point order across failovers is the clock's again. A Redis user
// that may not run INFO (ACL) turns epochs off, logged at error level:
// grant it +info (a server without replication, such as an in-process test
// server, turns them off with a warning). The epoch says nothing about lost data; it only keeps the
// order of tokens.
//
// # Redis Cluster
//
// A cluster has a primary per slot range, and a script touches one slot,
// so the epochs (and the time, below) are kept per slot: each queue's and
// each lease resource's own record, in its slot (the caller names it; same
// fields as Key's). A Tracker over a *redis.ClusterClient mints with [Node],
// and lib.lua's epoch_node decides inside the minting script, on the slot's
// master: the epoch recorded for its replication id, or, on the first mint
// of a tenure, the master's config epoch (CLUSTER INFO cluster_my_epoch)
// when it is above every epoch in the record, else one more than the
// highest. A replica is promoted by an election of the masters that gives
// it a config epoch above every one they know (or, by CLUSTER FAILOVER
// TAKEOVER, above every one it knows), so the new tenure's epoch is above
// the old master's whichever writes, the record included, the failover
// lost; nothing is asked of the caller and no refresh round trip is made.
// It does not cover a record that had gone above the old master's config
// epoch (a slot moved from a master with a higher one) and was then lost:
// the new tenure may get that epoch again, ordered by the clock as before
// epochs. Epochs are capped at [Max] without a log line there.
//
// # The namespace's time
//
// lib.lua's epoch_now gives every ledger and lease script the time it
// writes and reads due times and deadlines in: Redis TIME plus an offset per
// primary tenure, never below a high-water mark. The record Key holds it too
// ('clk' the mark in µs, raised once per millisecond to its last µs, so
// one write serves every call of that millisecond; 'coff' the offset in µs;
// 'crid' the replication id it was computed for; 'cat' the TIME a negative
// offset was set at). The first script on a primary whose replication id
// differs from 'crid' sets the offset to clk − TIME, once, so the time goes
// on from where the old primary left it (at most the replication lag, and
// the time since the last call, behind) whichever way the new node's clock
// is off. A node behind keeps its positive offset. A node ahead (failing
// back to a true clock, after a tenure that started behind it by the
// failover's time) gets a negative offset that shrinks to 0 at 1 %
// ([CatchUpDiv]), at most [CatchUpMax] of it (a longer gap is jumped): the
// time never jumps forward by a failover, so leases and due times set
// before it do not end early, by more than 1 % while it catches up. INFO is
// asked only while the offset is not 0 or TIME falls more than a second
// below the mark (a new tenure behind, or a clock stepped back on the same
// primary, which raises the offset alike). A positive offset absorbs a
// step forward of the node's clock (its clock set right while below the
// mark): a call finding the time more than [CatchUpMax] past the mark, a
// gap no live pool leaves between calls, lowers the offset (down to 0) so
// the time goes on from the mark, late rather than early; a real idle spell
// that long makes due times set before it come late by up to the spell
// (not on Redis Cluster, where a quiet queue's record leaves such gaps).
// It needs no state from callers:
// a client that has not refreshed its epoch since the failover reads the
// same time. It assumes the record replicates like the data it dates (a
// replica without it starts from its own TIME).
// On Redis Cluster each record keeps the time of its slot's
// master tenures by the same rule.
package epoch

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/luafunc"
)

// Shift is the bit position of the epoch in a token.
const Shift = 52

// Max is the highest epoch: 12 bits above the 52 of Redis time in µs.
const Max = 1<<(64-Shift) - 1

// MaxAhead is how far past a clock the time part of a token may lie. A
// token is (epoch << Shift) + Redis time in µs, or a few increments past an
// earlier token: its low Shift bits are a time, at most the clock skew
// between Redis and the reader past now, whatever its epoch.
const MaxAhead = 366 * 24 * time.Hour

// Plausible reports whether token's time part lies at most MaxAhead past
// now, as every token a fencedq counter mints does, in any epoch. A token
// further ahead (near 2^64, say) is made up: stored as a resource's mark,
// no minted token could ever exceed it.
func Plausible(token uint64, now time.Time) bool {
	return token&(1<<Shift-1) <= uint64(now.Add(MaxAhead).UnixMicro())
}

// CatchUpDiv is lib.lua's CATCH_UP_DIV: while the namespace's time is
// behind the primary's clock it gains 1 µs per CatchUpDiv µs (1 %).
const CatchUpDiv = 100

// CatchUpMax is lib.lua's CATCH_UP_MAX_US: the most a new tenure's time
// starts behind its clock (a larger gap is jumped), and the longest gap
// between calls taken for real time while a positive offset is carried (a
// longer one is a step forward of the node's clock, absorbed).
const CatchUpMax = 60 * time.Second

// MaxAttempts bounds how many times [Tracker.Mint] runs a minting script
// that keeps reporting a stale epoch (the primary changing under it).
const MaxAttempts = 5

// ErrUnsettled means the primary changed on every attempt of a mint.
var ErrUnsettled = errors.New("epoch: the primary kept changing")

var (
	// Lua is the script library minting scripts start with. It defines
	// epoch_check(key, rid, ep, born), which returns the epoch to mint with
	// or nil and {replication id, recorded epoch} when the caller must
	// refresh, and token_mint(last, ep, now_us), which returns the token
	// as a decimal string; epoch_now(key), the namespace's time in µs
	// (see the package doc); plus u64_norm, u64_cmp and u64_add for decimal
	// uint64 strings. See lib.lua.
	//go:embed lib.lua
	Lua string
	//go:embed advance.lua
	advanceSrc    string
	advanceScript = luafunc.NewPlain(Lua + advanceSrc)
)

// Of returns the epoch token was minted in.
func Of(token uint64) uint64 { return token >> Shift }

// Floor returns the lowest token epoch e mints at Redis time unixMicro:
// (e << Shift) + unixMicro.
func Floor(e uint64, unixMicro int64) uint64 { return e<<Shift + uint64(unixMicro) }

// Key returns the epoch record of namespace ns: a hash holding the epoch of
// each recent primary ("r:<replication id>") and the highest ("max").
func Key(ns string) string { return ns + ":epoch" }

// State is what a minting script is given: the replication id of the
// primary the epoch is for, and the epoch. The zero State turns the
// script's check off (epoch 0).
type State struct {
	ReplID string
	Epoch  uint64
	// Born is the birth of the record the epoch was learned from (its
	// 'born' field): a record created again (a flush, a restart without
	// persistence) has another, and refuses the state.
	Born string
}

// Source reports an epoch agreed outside the data nodes that grows with
// every failover (Sentinel's config epoch).
type Source interface {
	Epoch(ctx context.Context) (uint64, error)
}

// Options configures a Tracker.
type Options struct {
	// Sentinel, for a client made by redis.NewFailoverClient, is the same
	// options: the tracker asks its Sentinels for the master's config
	// epoch. Without it epochs are counted in the record.
	Sentinel *redis.FailoverOptions
	// Source replaces the Sentinel source (tests).
	Source Source
	// Logger receives a new primary's epoch (info, once per process and
	// primary), a lost record (error, once per process and record) and a
	// capped epoch (error); other trackers of the process log the first
	// two at debug level;
	// default slog.Default().
	Logger *slog.Logger
}

// Node is the State a Tracker over a Redis Cluster client mints with: its
// ReplID tells lib.lua's epoch_check that the slot's master decides the
// epoch itself, from the epoch record in the slot the script mints in
// (epoch_node: the epoch recorded for the master's replication id, or a
// new tenure's from the master's config epoch). No real replication id
// looks like it.
var Node = State{ReplID: "@node"}

// Tracker holds the epoch a client mints with. It is safe for concurrent
// use. Components sharing a client and namespace may each have their own:
// the record keeps them in step.
type Tracker struct {
	client  *redis.Client // nil: tracking off, or a cluster
	cluster bool          // a Redis Cluster client: every mint uses Node
	key     string
	source  Source
	log     *slog.Logger

	state atomic.Pointer[State]
	mu    sync.Mutex // serialises refreshes; guards max
	max   uint64     // the highest epoch handed out
}

// New returns a tracker for namespace ns over client. Tracking is on for a
// *redis.Client (a single server, or a failover client); a
// *redis.ClusterClient mints with [Node] (the slot's master decides); any
// other client (Ring) has the zero State: epochs off.
func New(client redis.UniversalClient, ns string, opts Options) *Tracker {
	t := &Tracker{key: Key(ns), source: opts.Source, log: opts.Logger}
	switch c := client.(type) {
	case *redis.Client:
		t.client = c
	case *redis.ClusterClient:
		t.cluster = true
	}
	if t.source == nil && opts.Sentinel != nil {
		t.source = sentinelSource{opts.Sentinel}
	}
	if t.log == nil {
		t.log = slog.Default()
	}
	return t
}

// Enabled reports whether the tracker checks epochs on a single primary
// (see New): the namespace's record Key is then the one every script of
// the namespace keeps its epochs and time in.
func (t *Tracker) Enabled() bool { return t.client != nil }

// Cluster reports whether the tracker is for a Redis Cluster: each script
// then keeps the epochs and time in a record of its own slot, and mints
// with [Node].
func (t *Tracker) Cluster() bool { return t.cluster }

// Key returns the epoch record minting scripts pass to epoch_check.
func (t *Tracker) Key() string { return t.key }

// Current returns the state to mint with, learning it first if the
// tracker has none yet.
func (t *Tracker) Current(ctx context.Context) (State, error) {
	if t.cluster {
		return Node, nil
	}
	if !t.Enabled() {
		return State{}, nil
	}
	if st := t.state.Load(); st != nil {
		return *st, nil
	}
	return t.Refresh(ctx, State{})
}

// CheckSource asks the tracker's source (the Sentinels) for the epoch,
// changing nothing; nil without a source. With Sentinels, any address that
// is not a Sentinel fails it (ErrNotSentinel), even when another Sentinel
// gave the epoch.
func (t *Tracker) CheckSource(ctx context.Context) error {
	if t.source == nil {
		return nil
	}
	if c, ok := t.source.(interface{ Check(context.Context) error }); ok {
		if err := c.Check(ctx); err != nil {
			return fmt.Errorf("epoch: %w", err)
		}
		return nil
	}
	if _, err := t.source.Epoch(ctx); err != nil {
		return fmt.Errorf("epoch: %w", err)
	}
	return nil
}

// Last returns the state the tracker last learned (Node on a cluster),
// or the zero State when it has none yet; it never asks Redis. Scripts that
// mint nothing but share a call with minting ones pass it.
func (t *Tracker) Last() State {
	if t.cluster {
		return Node
	}
	if st := t.state.Load(); st != nil {
		return *st
	}
	return State{}
}

// Refresh learns the epoch of the primary the client now writes to, after
// a script refused stale (the state it minted with). When another caller
// already refreshed past stale, it returns that state without asking again.
func (t *Tracker) Refresh(ctx context.Context, stale State) (State, error) {
	if t.cluster {
		return Node, nil
	}
	if !t.Enabled() {
		return State{}, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	cur := t.state.Load()
	if cur != nil && *cur != stale {
		return *cur, nil
	}
	var last State
	if cur != nil {
		last = *cur
	}
	st, err := t.advance(ctx, last)
	if err != nil {
		return State{}, err
	}
	switch {
	case last.ReplID == "":
		t.log.Debug("fencing epoch", "key", t.key, "replication_id", st.ReplID, "epoch", st.Epoch)
	case st != last:
		lvl := slog.LevelInfo
		if prev, seen := primariesLogged.Swap(t.key, st.ReplID); seen && prev == st.ReplID {
			lvl = slog.LevelDebug
		}
		t.log.Log(ctx, lvl, "fencing epoch: new primary", "key", t.key, "replication_id", st.ReplID,
			"epoch", st.Epoch, "previous_replication_id", last.ReplID, "previous_epoch", last.Epoch)
	}
	t.max = max(t.max, st.Epoch)
	t.state.Store(&st)
	return st, nil
}

// advance runs advance.lua. With a source, the source is asked again
// after a run that gave the primary its first epoch: if it rose meanwhile
// (a failover, or a Sentinel that had not heard of it), that answer may
// have been for the previous primary, so the assignment is raised to it.
func (t *Tracker) advance(ctx context.Context, last State) (State, error) {
	src, raise := "", ""
	if t.source != nil {
		e, err := t.source.Epoch(ctx)
		if err != nil {
			return State{}, fmt.Errorf("epoch: %w", err)
		}
		src = strconv.FormatUint(e, 10)
	}
	for attempt := 1; ; attempt++ {
		reply, err := advanceScript.Run(ctx, t.client, []string{t.key},
			src, t.max, last.ReplID, last.Epoch, raise, last.Born).StringSlice()
		if err != nil {
			return State{}, fmt.Errorf("epoch: advance: %w", err)
		}
		if len(reply) < 4 {
			return State{}, fmt.Errorf("epoch: advance: malformed reply %q", reply)
		}
		e, err := strconv.ParseUint(reply[1], 10, 64)
		if err != nil {
			return State{}, fmt.Errorf("epoch: advance: malformed reply %q", reply)
		}
		if reply[0] == "" {
			t.logEpochsOff(reply[4:])
			return State{}, nil
		}
		if len(reply) < 6 {
			return State{}, fmt.Errorf("epoch: advance: malformed reply %q", reply)
		}
		if reply[5] == "1" && attempt == 1 {
			t.logLost(ctx, reply[0], e, reply[4])
		}
		if reply[2] == "1" {
			t.log.Error("fencing epoch capped: tokens are ordered by the clock across failovers from now on",
				"key", t.key, "max", Max)
		}
		st := State{ReplID: reply[0], Epoch: e, Born: reply[4]}
		if t.source == nil || (reply[3] != "1" && raise == "") || attempt == MaxAttempts {
			return st, nil
		}
		after, err := t.source.Epoch(ctx)
		if err != nil {
			return State{}, fmt.Errorf("epoch: %w", err)
		}
		if after <= e {
			return st, nil
		}
		src, raise = strconv.FormatUint(after, 10), reply[1]
	}
}

// primariesLogged holds, per epoch record key, the replication id of the
// last new primary logged at info level in this process: the process's
// other trackers (a pool's ledger, its lease manager, a client, the
// bridge) each learn the same primary and log it at debug level.
var primariesLogged sync.Map

// lossesLogged holds, per epoch record key, the birth of the record the
// last loss logged in this process was found on.
var lossesLogged sync.Map

// logLost logs a lost record found on the record born at born: at error
// level once per process, at debug level for the process's other trackers
// (a pool's ledger, its lease manager, its leader's client), which each
// find the same loss (advance.lua moves the primary once for them all).
func (t *Tracker) logLost(ctx context.Context, replID string, e uint64, born string) {
	lvl := slog.LevelError
	if prev, seen := lossesLogged.Swap(t.key, born); seen && prev == born {
		lvl = slog.LevelDebug
	}
	t.log.Log(ctx, lvl, "fencing epoch record lost (a flush, or a restart without persistence or failover): moved above every epoch this process minted in",
		"key", t.key, "replication_id", replID, "epoch", e, "previous_epoch", t.max)
}

// Mint runs mint with the state to mint with and, while mint reports it
// stale (the script's epoch_check refused it), refreshes and runs it again,
// at most MaxAttempts times in all; then it fails with ErrUnsettled. An
// error from mint ends it at once.
func (t *Tracker) Mint(ctx context.Context, mint func(State) (stale bool, err error)) error {
	st, err := t.Current(ctx)
	if err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		stale, err := mint(st)
		if err != nil || !stale {
			return err
		}
		if attempt == MaxAttempts {
			return fmt.Errorf("%w (%d attempts)", ErrUnsettled, attempt)
		}
		if st, err = t.Refresh(ctx, st); err != nil {
			return err
		}
	}
}

// logEpochsOff says why epochs are off: at error level when the Redis user
// may not run INFO (an operator can grant it), at warning level when the
// server has no replication section (an in-process test server, which has
// no failover either).
func (t *Tracker) logEpochsOff(why []string) {
	reason := "unknown"
	if len(why) > 0 {
		reason = why[0]
	}
	if strings.Contains(reason, "NOPERM") || strings.Contains(reason, "can't run this command") {
		t.log.Error("fencing epochs off: the Redis user may not run INFO (grant +info), so tokens are ordered by the clock across failovers",
			"key", t.key, "reason", reason)
		return
	}
	t.log.Warn("fencing epochs off: this server gives no replication id (INFO replication), so tokens are ordered by the clock across failovers",
		"key", t.key, "reason", reason)
}
