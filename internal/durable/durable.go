// Package durable makes Redis writes wait for replicas before they are
// acknowledged: one WAIT (or WAITAOF) appended to each pipeline a script
// batcher sends (package scriptbatch), on the same connection as the
// scripts, so a batch of calls pays for one wait.
//
// WAIT n t blocks until n replicas acknowledged every write made on the
// connection so far, or t passed; it returns how many did. Every call the
// ledger makes durable writes (each bumps its queue's write sequence), so
// the WAIT after a retried call also covers the writes of the earlier,
// unacknowledged try of the same call: replication is one ordered stream.
//
// WAITAOF 0 n t (Redis 7.2 and later) waits until n replicas have also
// written the writes to their append-only file and fsynced it. It is used
// when Options.AOF asks for it and the server has the command (detected
// once per Waiter with COMMAND INFO); on an older server the Waiter falls
// back to WAIT and logs it once.
//
// What this gives and what it does not: see "Durable acknowledgements" in
// ARCHITECTURE.md. In short, a write acknowledged in durable mode is on n
// replicas, so a failover to one of them keeps it; Redis replication is
// still asynchronous, WAIT is not consensus (a write that timed out may
// still be applied, and may be on a replica), and Sentinel may promote a
// replica that did not acknowledge it when the ones that did are down.
package durable

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultTimeout bounds the wait for replicas when Options.Timeout is 0.
const DefaultTimeout = time.Second

// roundTrip bounds a pipeline's round trip where the client applies its
// context's deadline to reads (scriptbatch.Timeout).
const roundTrip = 5 * time.Second

// ErrUnacknowledged means fewer replicas than required acknowledged a write
// in time. The write was applied on the primary (it may or may not survive
// a failover): its outcome is unknown to the caller.
var ErrUnacknowledged = errors.New("fencedq: too few replicas acknowledged the write in time")

// Options say how many replicas must hold a write before it is
// acknowledged.
type Options struct {
	// Replicas is how many replicas must acknowledge each write; 0 turns
	// durable acknowledgements off.
	Replicas int
	// Timeout bounds each wait (default DefaultTimeout).
	Timeout time.Duration
	// AOF asks for WAITAOF (the replicas also fsynced the writes to their
	// append-only file) where the server has it (Redis 7.2 and later); WAIT
	// otherwise.
	AOF bool
}

// Validate checks the options.
func (o Options) Validate() error {
	switch {
	case o.Replicas < 0:
		return fmt.Errorf("durability: replicas %d must not be negative", o.Replicas)
	case o.Replicas > 1000:
		return fmt.Errorf("durability: replicas %d is more than a Redis deployment has", o.Replicas)
	case o.Timeout < 0:
		return fmt.Errorf("durability: timeout %v must not be negative", o.Timeout)
	case o.Timeout > time.Hour:
		return fmt.Errorf("durability: timeout %v is longer than an hour", o.Timeout)
	}
	return nil
}

// CheckClient validates o and checks it against rdb's read timeout, where
// rdb is a client whose options say it (a *redis.Client, failover clients
// included, or a *redis.ClusterClient). The wait's reply is read with its
// pipeline's, under that timeout (go-redis sets no longer one for a
// command in a pipeline) and, with ContextTimeoutEnabled, under the
// pipeline's round-trip bound (5 s): the wait must end well within them
// (at most 80 %). One that runs out first fails the whole pipeline as a
// network error with its scripts' outcomes unknown (they ran, and are not
// sent again), where the wait's own timeout answers with the replicas it
// reached.
func CheckClient(rdb redis.UniversalClient, o Options) error {
	if err := o.Validate(); err != nil || !o.Enabled() {
		return err
	}
	var rt time.Duration
	ctxDeadline := false
	switch c := rdb.(type) {
	case *redis.Client:
		rt, ctxDeadline = c.Options().ReadTimeout, c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		rt, ctxDeadline = c.Options().ReadTimeout, c.Options().ContextTimeoutEnabled
	}
	if ctxDeadline && (rt <= 0 || rt > roundTrip) {
		rt = roundTrip
	}
	if limit := rt * 4 / 5; rt > 0 && o.timeout() > limit {
		return fmt.Errorf("durability: timeout %v is too long for the Redis client's read timeout %v (at most %v: the wait's reply is read under it; raise the client's ReadTimeout for a longer wait)",
			o.timeout(), rt, limit)
	}
	return nil
}

// Enabled reports whether writes wait for replicas.
func (o Options) Enabled() bool { return o.Replicas > 0 }

func (o Options) timeout() time.Duration {
	if o.Timeout <= 0 {
		return DefaultTimeout
	}
	return max(o.Timeout, time.Millisecond)
}

// Command names the wait command in use.
type Command string

// The wait commands.
const (
	Wait    Command = "WAIT"
	WaitAOF Command = "WAITAOF"
)

// Waiter appends the wait for replicas to pipelines. It is safe for
// concurrent use.
type Waiter struct {
	rdb redis.UniversalClient
	o   Options
	log *slog.Logger

	mu  sync.Mutex
	cmd Command // "" until detected
}

// New returns a Waiter for o over rdb (logging to log; nil: slog.Default()).
func New(rdb redis.UniversalClient, o Options, log *slog.Logger) *Waiter {
	if log == nil {
		log = slog.Default()
	}
	return &Waiter{rdb: rdb, o: o, log: log}
}

// Command returns the wait command the Waiter uses, detecting WAITAOF on
// first use when Options.AOF asks for it.
func (w *Waiter) Command(ctx context.Context) (Command, error) {
	if !w.o.AOF {
		return Wait, nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cmd != "" {
		return w.cmd, nil
	}
	has, err := HasWaitAOF(ctx, w.rdb)
	if err != nil {
		return "", err
	}
	w.cmd = Wait
	if has {
		w.cmd = WaitAOF
	} else {
		w.log.Warn("durability: the Redis server has no WAITAOF (Redis 7.2 and later); waiting for replicas with WAIT, which does not wait for their fsync")
	}
	return w.cmd, nil
}

// HasWaitAOF reports whether the server knows WAITAOF (COMMAND INFO
// answers an unknown command with a nil entry).
func HasWaitAOF(ctx context.Context, rdb redis.UniversalClient) (bool, error) {
	v, err := rdb.Do(ctx, "COMMAND", "INFO", "WAITAOF").Slice()
	if err != nil {
		return false, fmt.Errorf("durability: detect WAITAOF: %w", err)
	}
	return knows(v), nil
}

// knows reads COMMAND INFO's reply for one command.
func knows(v []any) bool { return len(v) == 1 && v[0] != nil }

// Append queues the wait on pipe (after the pipeline's script calls) and
// returns its check, run once the replies arrived: nil when enough
// replicas acknowledged, else an error matching ErrUnacknowledged. Its
// signature is scriptbatch.Options.Append's.
func (w *Waiter) Append(ctx context.Context, pipe redis.Pipeliner) func() error {
	cmd, err := w.Command(ctx)
	if err != nil {
		return func() error { return fmt.Errorf("%w: %v", ErrUnacknowledged, err) }
	}
	ms := w.o.timeout().Milliseconds()
	n := w.o.Replicas
	if cmd == WaitAOF {
		c := pipe.Do(ctx, "WAITAOF", 0, n, ms)
		return func() error {
			v, err := c.Int64Slice()
			if err == nil && len(v) != 2 {
				err = fmt.Errorf("malformed WAITAOF reply %v", v)
			}
			if err != nil {
				return fmt.Errorf("%w: WAITAOF: %v", ErrUnacknowledged, err)
			}
			return w.enough(v[1])
		}
	}
	c := pipe.Do(ctx, "WAIT", n, ms)
	return func() error {
		got, err := c.Int64()
		if err != nil {
			return fmt.Errorf("%w: WAIT: %v", ErrUnacknowledged, err)
		}
		return w.enough(got)
	}
}

func (w *Waiter) enough(got int64) error {
	if got >= int64(w.o.Replicas) {
		return nil
	}
	return fmt.Errorf("%w: %d of %d replicas within %v", ErrUnacknowledged, got, w.o.Replicas, w.o.timeout())
}

// Shortfall is a primary with fewer replicas online than Options.Replicas
// asks for: every durable write to it fails until enough replicas connect.
type Shortfall struct {
	Addr      string // the primary's address ("" when it could not be told)
	Connected int    // replicas online (INFO replication)
	Required  int    // Options.Replicas
}

// Shortfalls reads INFO replication of rdb's primary (each master of a
// Redis Cluster) once and returns those with fewer replicas online than
// o.Replicas; nil when durability is off. It writes nothing.
func Shortfalls(ctx context.Context, rdb redis.UniversalClient, o Options) ([]Shortfall, error) {
	if !o.Enabled() {
		return nil, nil
	}
	var (
		mu  sync.Mutex
		out []Shortfall
	)
	check := func(ctx context.Context, c redis.UniversalClient, addr string) error {
		info, err := c.Info(ctx, "replication").Result()
		if err != nil {
			return err
		}
		if n := onlineReplicas(info); n < o.Replicas {
			mu.Lock()
			out = append(out, Shortfall{Addr: addr, Connected: n, Required: o.Replicas})
			mu.Unlock()
		}
		return nil
	}
	var err error
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return check(ctx, c, c.Options().Addr) })
	} else if err = check(ctx, rdb, ""); len(out) == 1 {
		out[0].Addr = serverAddr(ctx, rdb)
	}
	return out, err
}

// serverAddr names rdb's server: the address its options give, else (a
// Sentinel failover client names none) the one its connection reached
// (CLIENT INFO's laddr); "" when neither is known.
func serverAddr(ctx context.Context, rdb redis.UniversalClient) string {
	if c, ok := rdb.(*redis.Client); ok {
		if _, _, err := net.SplitHostPort(c.Options().Addr); err == nil {
			return c.Options().Addr
		}
	}
	if ci, err := rdb.ClientInfo(ctx).Result(); err == nil {
		return ci.LAddr
	}
	return ""
}

// onlineReplicas counts the replicas an INFO replication reply lists as
// online (slaveN:...,state=online,...).
func onlineReplicas(info string) int {
	n := 0
	for line := range strings.SplitSeq(info, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		if strings.HasPrefix(k, "slave") && k != "slave_read_only" && strings.Contains(","+v+",", ",state=online,") {
			n++
		}
	}
	return n
}
