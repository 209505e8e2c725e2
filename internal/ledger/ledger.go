package ledger

import (
	"context"
	"crypto/sha1"
	_ "embed"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/durable"
	"github.com/fencedq/fencedq/internal/epoch"
	"github.com/fencedq/fencedq/internal/luafunc"
	"github.com/fencedq/fencedq/internal/namespace"
	"github.com/fencedq/fencedq/internal/scriptbatch"
	"github.com/fencedq/fencedq/lease"
)

// DefaultNamespace is the key prefix used when none is given.
const DefaultNamespace = "fq"

// DefaultRetention is how long finished jobs are kept when no Retention is given.
const DefaultRetention = 7 * 24 * time.Hour

// Config names the namespace and retention of a ledger. The zero value is
// usable.
type Config struct {
	// Namespace prefixes every key (default DefaultNamespace), so tenants
	// and tests sharing a Redis never collide.
	Namespace string
	// Retention is how long succeeded, dead and cancelled jobs (and their
	// operation ids, which deduplicate enqueues) are kept (default
	// DefaultRetention).
	Retention time.Duration
	// Sentinel, for a client made by redis.NewFailoverClient, is the same
	// options: job tokens (and the leases the ledger reads) take their
	// fencing epoch from the Sentinels' config epoch for the master; without
	// it the epoch is counted in Redis (see package internal/epoch).
	Sentinel *redis.FailoverOptions
	// Logger receives the epoch tracker's and the rewind detector's logs
	// (default slog.Default()).
	Logger *slog.Logger
	// Name names this process in recorded rewinds (a pool's worker id;
	// default "client").
	Name string
	// Recent is how many acknowledged enqueues the ledger records for
	// Resubmit (0: none).
	Recent int
	// OnRewind, when set, is called with each rewind this ledger detects,
	// after it was logged and recorded (see rewind.go).
	OnRewind func(Rewind)
	// Durability, when enabled, makes enqueues, claims, completions and
	// operator actions wait for replicas before they are acknowledged
	// (package internal/durable): a call too few replicas acknowledged in
	// time fails with an error matching durable.ErrUnacknowledged (and
	// ErrEnqueueUnknown for an enqueue, ErrActionUnknown for an operator's
	// action); a claim's error comes with the jobs it claimed, which the
	// caller must not start.
	Durability durable.Options
}

// Validate checks the configuration (the namespace's characters, the
// durability, the Sentinel options).
func (c Config) Validate() error {
	if err := c.Durability.Validate(); err != nil {
		return invalid("%v", err)
	}
	if err := epoch.ValidateSentinel(c.Sentinel); err != nil {
		return invalid("%v", err)
	}
	return ValidateNamespace(c.WithDefaults().Namespace)
}

// WithDefaults fills in the defaults.
func (c Config) WithDefaults() Config {
	if c.Namespace == "" {
		c.Namespace = DefaultNamespace
	}
	if c.Retention <= 0 {
		c.Retention = DefaultRetention
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Name == "" {
		c.Name = "client"
	}
	return c
}

// Ledger is the queue and the source of truth for every job's state. Each
// transition is one Lua script that checks the caller's token; every script
// touches only the keys of one queue, hash-tagged {<queue>}, so it runs on
// Redis Cluster. keys.go builds every key; ARCHITECTURE.md describes the
// layout and every script.
//
// Job tokens are minted in fencing epochs (package internal/epoch): a
// token minted after a failover is above every token minted before it,
// whatever the promoted node's clock says. Due times and deadlines are in
// the namespace's time (internal/epoch's epoch_now: Redis TIME plus the
// primary tenure's offset), which continues from the old primary's after a
// failover, whatever the promoted node's clock says.
type Ledger struct {
	rdb    redis.UniversalClient
	cfg    Config
	lanes  lanes
	leases *lease.Manager // reads the maintenance leader's lease
	epoch  *epoch.Tracker // the epoch claims mint job tokens in
	watch  watch          // the write sequences seen, for rewind detection
	recent *recent        // acknowledged enqueues, for Resubmit (nil: none recorded)
	// unregistered holds queues an enqueue wrote to, or may have written
	// to (an unknown outcome), whose registration failed or is pending; the
	// next Insert registers them (see decodeInsert).
	unregistered sync.Map
	// layouts maps a queue to its *layout, built once (nlayouts of them).
	layouts  sync.Map
	nlayouts atomic.Int64
	defs     defCache // workflow definitions StepOf read (workflow.go)
	// appendWait appends the wait for replicas to a pipeline (nil: not
	// durable), for writes made outside the lanes (durableWrite).
	appendWait func(context.Context, redis.Pipeliner) func() error
}

// lanes are the ledger's batchers, one per kind of call: concurrent calls
// of one kind share pipelines, and calls of different kinds never wait for
// each other, so a pool's claims never wait behind its completions. Within
// a lane, calls made one after another are never reordered (see package
// scriptbatch); a job's calls (claim, renewals, completion) are each made
// after the previous one's reply.
type lanes struct {
	claim, renew, complete, enqueue, other *scriptbatch.Batcher
	// ops carries operator actions (cancel, run now, an operator's
	// decision, pause and resume): durable like the enqueue lane.
	ops *scriptbatch.Batcher
}

// New returns a Ledger over rdb.
func New(rdb redis.UniversalClient, cfg Config) *Ledger {
	cfg = cfg.WithDefaults()
	lane := func() *scriptbatch.Batcher { return scriptbatch.New(rdb, scriptbatch.Options{}) }
	// Durable lanes: enqueues, claims, completions and operator actions
	// wait for replicas, one WAIT per pipeline. Renewals, expiries and
	// reads do not (a lost one is redone or fenced: see ARCHITECTURE.md).
	// The enqueue lane keeps its pipelines in flight of like size, so
	// concurrent Enqueue calls merge into few script calls (see
	// enqueueMerge).
	var appendWait func(context.Context, redis.Pipeliner) func() error
	if cfg.Durability.Enabled() {
		appendWait = durable.New(rdb, cfg.Durability, cfg.Logger).Append
	}
	durableLane := func() *scriptbatch.Batcher {
		return scriptbatch.New(rdb, scriptbatch.Options{Append: appendWait})
	}
	enqueueLane := scriptbatch.New(rdb, scriptbatch.Options{Append: appendWait, Balance: true})
	ledgerLib.SetLogger(cfg.Logger) // the first ledger's logger hears of a refused library
	return &Ledger{rdb: rdb, cfg: cfg,
		lanes: lanes{claim: durableLane(), renew: lane(), complete: durableLane(), enqueue: enqueueLane,
			other: lane(), ops: durableLane()},
		leases: lease.NewManager(rdb, lease.Config{Namespace: cfg.Namespace, Sentinel: cfg.Sentinel, Logger: cfg.Logger}),
		epoch:  epoch.New(rdb, cfg.Namespace, epoch.Options{Sentinel: cfg.Sentinel, Logger: cfg.Logger}),
		recent: newRecent(cfg.Recent), appendWait: appendWait}
}

// run executes a ledger script in lane; concurrent calls (a pool's
// completions, enqueues from many goroutines) share pipelines.
func (l *Ledger) run(ctx context.Context, lane *scriptbatch.Batcher, script scriptbatch.Script, q string, args ...any) *redis.Cmd {
	lay := l.layoutOf(q)
	return lane.Run(ctx, script, lay.keys, append([]any{lay.prefix}, args...)...)
}

// Namespace returns the key prefix in use.
func (l *Ledger) Namespace() string { return l.cfg.Namespace }

// Durable reports whether enqueues, claims and completions wait for
// replicas (Config.Durability).
func (l *Ledger) Durable() bool { return l.cfg.Durability.Enabled() }

// Durability returns how the ledger's writes wait for replicas
// (Config.Durability), for a client that must write as durably.
func (l *Ledger) Durability() durable.Options { return l.cfg.Durability }

// Retention returns how long finished jobs are kept.
func (l *Ledger) Retention() time.Duration { return l.cfg.Retention }

// Redis returns the client the ledger uses.
func (l *Ledger) Redis() redis.UniversalClient { return l.rdb }

// ValidateQueue checks a queue name: 1-100 of letters, digits and ._:-
// (a byte loop: every enqueue checks its queue), other than "." and "..",
// which a URL path or a file path would clean to another name.
func ValidateQueue(q string) error {
	if q == "." || q == ".." {
		return invalid("queue name %q is a path element, not a name", q)
	}
	if !namespace.IsName(q, 100) {
		return invalid("queue name %q must be 1-100 letters, digits or ._:-", Clip(q))
	}
	return nil
}

// RegisterQueues adds queue names to the namespace's queue registry, which
// the reconciler, the dashboard and the CLI read. Pools call it as they run
// and clients when a queue's counters were empty, so the registry heals
// after Redis lost its keys.
func (l *Ledger) RegisterQueues(ctx context.Context, qs ...string) error {
	if len(qs) == 0 {
		return nil
	}
	members := make([]any, len(qs))
	for i, q := range qs {
		members[i] = q
	}
	if err := l.rdb.SAdd(ctx, l.queuesKey(), members...).Err(); err != nil {
		if refused := refusedWrite(err); refused != nil { // nothing written: a pause says so
			err = refused
		}
		return wrap("register queues", err)
	}
	return nil
}

var (
	//go:embed lua/prelude.lua
	prelude string
	//go:embed lua/enqueue.lua
	enqueueSrc string
	//go:embed lua/claim.lua
	claimSrc string
	//go:embed lua/renew.lua
	renewSrc string
	//go:embed lua/complete.lua
	completeSrc string
	//go:embed lua/expire.lua
	expireSrc string
	//go:embed lua/resolve.lua
	resolveSrc string
	//go:embed lua/lead.lua
	leadSrc string
	//go:embed lua/cancel.lua
	cancelSrc string
	//go:embed lua/pause.lua
	pauseSrc string
	//go:embed lua/run_now.lua
	runNowSrc string
	//go:embed lua/bridge_claim.lua
	bridgeClaimSrc string
	//go:embed lua/bridge_redeliver.lua
	bridgeRedeliverSrc string
	//go:embed lua/raise.lua
	raiseSrc string
	//go:embed lua/rewind.lua
	rewindSrc string
	//go:embed lua/enqueue_unique.lua
	enqueueUniqueSrc string
	//go:embed lua/unique_prune.lua
	uniquePruneSrc string
	//go:embed lua/progress.lua
	progressSrc string
	//go:embed lua/flow.lua
	flowLib string
	//go:embed lua/group.lua
	groupLib string

	enqueueScript  = script("enqueue", enqueueSrc)
	claimScript    = mintingScript("claim", claimSrc, 5)
	renewScript    = script("renew", renewSrc)
	completeScript = script("complete", completeSrc)
	expireScript   = script("expire", expireSrc)
	resolveScript  = script("resolve", resolveSrc)
	leadScript     = script("lead", leadSrc)
	cancelScript   = script("cancel", cancelSrc)
	pauseScript    = script("pause", pauseSrc)
	runNowScript   = script("run_now", runNowSrc)
	raiseScript    = script("raise", raiseSrc)
	rewindScript   = script("rewind", rewindSrc)
	progressScript = script("progress", progressSrc)

	bridgeClaimScript     = mintingScript("bridge_claim", bridgeClaimSrc, 11)
	bridgeRedeliverScript = script("bridge_redeliver", bridgeRedeliverSrc)

	// flow control (see unique.go)
	enqueueUniqueScript = script("enqueue_unique", enqueueUniqueSrc)
	uniquePruneScript   = script("unique_prune", uniquePruneSrc)
)

// ledgerLib is the Redis function library of the ledger's scripts (see
// internal/luafunc): each script a function over the shared definitions of
// internal/epoch's library (token minting and comparison of decimal uint64
// tokens), the prelude, the workflow definitions, flow.lua (concurrency and
// rate limits) and group.lua (fair groups), defined once per load instead
// of once per call. Its name is a hash of its scripts, so each version of
// the ledger has its own.
var ledgerLib = luafunc.NewLibrary(func() (string, string) {
	h := sha1.New()
	io.WriteString(h, sharedLua)
	for _, s := range libScripts {
		io.WriteString(h, s.fn+"\x00"+s.rid+"\x00"+s.src+"\x00")
	}
	name := fmt.Sprintf("fencedq_%x", h.Sum(nil)[:6])
	scripts := make([]libScript, len(libScripts))
	for i, s := range libScripts {
		scripts[i] = libScript{fn: name + "_" + s.fn, rid: s.rid, src: s.src}
	}
	return name, library(name, sharedLua, scripts)
})

// libScripts are the scripts of ledgerLib, keyed by their short names.
var libScripts []libScript

// sharedLua is the Lua every ledger script may use (see ledgerLib); the
// EPOCH_RID line is each script's own.
var sharedLua = epoch.Lua + "local EPOCH_RID = nil\n" + prelude + workflowLib + flowLib + groupLib

// script builds the ledger script key: a function of ledgerLib and, as its
// plain form, the definitions src uses of sharedLua (see link), then src.
func script(key, src string) *luafunc.Script {
	return register(key, "nil", src)
}

// mintingScript builds a script that mints job tokens, whose caller passes
// the replication id its epoch is for in ARGV[ridArg]: the prelude's clock
// read (epoch_now) then also reads the epoch recorded for that id, so
// epoch_check needs no read of its own.
func mintingScript(key, src string, ridArg int) *luafunc.Script {
	return register(key, fmt.Sprintf("ARGV[%d]", ridArg), src)
}

func register(key, rid, src string) *luafunc.Script {
	libScripts = append(libScripts, libScript{fn: key, rid: rid, src: src})
	return luafunc.NewScript(ledgerLib, key, linkUnits(sharedUnits(rid), src))
}

// sharedUnits returns the units of sharedLua with EPOCH_RID set to rid:
// sharedLua is cut once, and only EPOCH_RID's unit differs between scripts.
func sharedUnits(rid string) []luaUnit {
	units := slices.Clone(sharedCut)
	for i, u := range units {
		if len(u.names) == 1 && u.names[0] == "EPOCH_RID" {
			units[i] = newUnit(strings.Replace(u.text, "local EPOCH_RID = nil\n", "local EPOCH_RID = "+rid+"\n", 1))
		}
	}
	return units
}

// sharedCut is sharedLua cut into its units.
var sharedCut = splitUnits(sharedLua)

func ms(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}
