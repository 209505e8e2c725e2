package redistest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/testsignal"
)

// KeyspaceEvents is the notify-keyspace-events setting [Await] relies on:
// keyspace events (K) for every class of write (A: generic commands,
// strings, lists, sets, hashes, sorted sets, streams, expirations and
// evictions). Servers started by [Start] run with it.
const KeyspaceEvents = "KA"

// EnableKeyspaceEvents makes every server behind c publish the keyspace
// events [Await] needs (CONFIG SET), keeping any event classes already on.
// Servers started by [Start] have them; a server given through REDIS_ADDR
// gets them from here.
func EnableKeyspaceEvents(ctx context.Context, c redis.UniversalClient) error {
	return eachNode(ctx, c, func(ctx context.Context, n *redis.Client) error {
		cur, err := n.ConfigGet(ctx, "notify-keyspace-events").Result()
		if err != nil {
			return fmt.Errorf("redistest: CONFIG GET notify-keyspace-events on %s: %w", n.Options().Addr, err)
		}
		flags := cur["notify-keyspace-events"]
		if strings.ContainsRune(flags, 'K') && strings.ContainsRune(flags, 'A') {
			return nil
		}
		if err := n.ConfigSet(ctx, "notify-keyspace-events", flags+KeyspaceEvents).Err(); err != nil {
			return fmt.Errorf("redistest: CONFIG SET notify-keyspace-events on %s: %w", n.Options().Addr, err)
		}
		return nil
	})
}

// Await waits until cond holds, failing the test with what in the message
// if it does not within [testsignal.Timeout]. cond should read Redis state
// under the keys starting with prefix (a namespace, or one key): Await
// subscribes to the keyspace notifications of those keys first, then
// evaluates cond, and evaluates it again after each notification (and after
// a dropped subscription is restored), never on a timer. cond runs on the
// caller's goroutine, so it may call t.Fatal.
func Await(tb testing.TB, c redis.UniversalClient, prefix, what string, cond func() bool) {
	tb.Helper()
	AwaitWithin(tb, c, prefix, what, testsignal.DefaultTimeout, cond)
}

// AwaitWithin is [Await] with bound (scaled by [testsignal.Scale]) instead
// of the default, for a path that is known to take longer; the caller says
// why.
func AwaitWithin(tb testing.TB, c redis.UniversalClient, prefix, what string, bound time.Duration, cond func() bool) {
	tb.Helper()
	if err := Wait(c, prefix, bound, cond); err != nil {
		tb.Fatalf("redistest: %s: %v", what, err)
	}
}

// ErrNotified is wrapped by Wait's error when the condition held at the end
// of the wait although no notification had come: a write under another
// prefix, or keyspace events turned off.
var ErrNotified = errors.New("the condition became true without a keyspace notification")

// Wait is Await for a caller that reports the failure itself: it returns
// nil once cond holds, or an error once bound (scaled by
// [testsignal.Scale]) has passed.
func Wait(c redis.UniversalClient, prefix string, bound time.Duration, cond func() bool) error {
	bound = testsignal.Scale(bound)
	w, err := watch(c, prefix, bound)
	if err != nil {
		return err
	}
	defer w.Close()
	if cond() {
		return nil
	}
	timer := time.NewTimer(bound)
	defer timer.Stop()
	for {
		select {
		case <-w.wake:
			if cond() {
				return nil
			}
		case <-timer.C:
			if cond() {
				return fmt.Errorf("%w under %q (is notify-keyspace-events %q on?)", ErrNotified, prefix, KeyspaceEvents)
			}
			return fmt.Errorf("not reached within %v (keys under %q)", bound, prefix)
		}
	}
}

// Watcher holds keyspace subscriptions on every server behind a client and
// signals wake (coalesced) on each notification.
type Watcher struct {
	cancel context.CancelFunc
	subs   []*redis.PubSub
	wake   chan struct{}
	wg     sync.WaitGroup
}

// Watch subscribes to the keyspace notifications of the keys starting with
// prefix on every server behind c, for a check that runs on each change
// for as long as the test does (an invariant watched in the background).
// It returns once the subscriptions are confirmed: a later write is never
// missed. The watcher is closed when the test ends.
func Watch(tb testing.TB, c redis.UniversalClient, prefix string) *Watcher {
	tb.Helper()
	w, err := watch(c, prefix, testsignal.Timeout())
	if err != nil {
		tb.Fatalf("redistest: watch %q: %v", prefix, err)
	}
	tb.Cleanup(w.Close)
	return w
}

// C delivers a wake-up after notifications under the watched prefix (or a
// restored subscription); wake-ups are coalesced: one pending at most.
func (w *Watcher) C() <-chan struct{} { return w.wake }

// watch enables keyspace events, subscribes to those of the keys starting
// with prefix on every node, and returns once every subscription is
// confirmed: a write after watch returns is never missed.
func watch(c redis.UniversalClient, prefix string, bound time.Duration) (*Watcher, error) {
	ctx, cancelWatch := context.WithCancel(context.Background())
	w := &Watcher{cancel: cancelWatch, wake: make(chan struct{}, 1)}
	sctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	if err := EnableKeyspaceEvents(sctx, c); err != nil {
		w.Close()
		return nil, err
	}
	var mu sync.Mutex
	err := eachNode(sctx, c, func(sctx context.Context, n *redis.Client) error {
		pattern := fmt.Sprintf("__keyspace@%d__:%s*", n.Options().DB, globEscape(prefix))
		ps := n.PSubscribe(ctx, pattern)
		mu.Lock()
		w.subs = append(w.subs, ps)
		mu.Unlock()
		// The confirmation: from here on the server delivers every event.
		msg, err := ps.Receive(sctx)
		if err != nil {
			return fmt.Errorf("psubscribe %s on %s: %w", pattern, n.Options().Addr, err)
		}
		if _, ok := msg.(*redis.Subscription); !ok {
			return fmt.Errorf("psubscribe %s on %s: unexpected reply %T", pattern, n.Options().Addr, msg)
		}
		return nil
	})
	if err != nil {
		w.Close()
		return nil, err
	}
	for _, ps := range w.subs {
		w.wg.Go(func() { w.receive(ctx, ps) })
	}
	return w, nil
}

// receive turns everything a subscription delivers into a wake-up: an event,
// or the confirmation of a subscription go-redis restored after a dropped
// connection (events meanwhile were lost, so the condition is looked at
// again). A failed read (the server is down) is retried after a short,
// growing pause: that is reconnecting, not looking at the condition.
func (w *Watcher) receive(ctx context.Context, ps *redis.PubSub) {
	pause := 10 * time.Millisecond
	for ctx.Err() == nil {
		msg, err := ps.Receive(ctx)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, redis.ErrClosed) {
				return // closed by close
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(pause):
			}
			pause = min(2*pause, 500*time.Millisecond)
			continue
		}
		pause = 10 * time.Millisecond
		switch msg.(type) {
		case *redis.Message, *redis.Subscription:
			select {
			case w.wake <- struct{}{}:
			default: // a wake-up is pending already
			}
		}
	}
}

// Close ends the subscriptions; C delivers nothing more.
func (w *Watcher) Close() {
	w.cancel()
	for _, ps := range w.subs {
		_ = ps.Close()
	}
	w.wg.Wait()
}

// eachNode runs f on every master behind c: the masters of a cluster, else
// c's one server.
func eachNode(ctx context.Context, c redis.UniversalClient, f func(context.Context, *redis.Client) error) error {
	switch c := c.(type) {
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, f)
	case *redis.Client:
		return f(ctx, c)
	default:
		return fmt.Errorf("redistest: keyspace notifications on a %T are not supported", c)
	}
}

// globEscape quotes the characters Redis glob patterns treat specially.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '*', '?', '[', ']', '\\':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// WaitAnswer blocks until c's server answers PING or ctx ends. It is for
// clients that outlive a fault (a restarted or paused server, as in the
// linearizability tests): nothing but an answer tells a client its server
// is back, so this asks again every few milliseconds. That is a client's
// reconnect back-off, not a test waiting for an event.
func WaitAnswer(ctx context.Context, c redis.UniversalClient) error {
	for {
		err := c.Ping(ctx).Err()
		if err == nil || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}
