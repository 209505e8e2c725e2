package jobs_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// logRecords keeps every record logged through it.
type logRecords struct {
	mu      sync.Mutex
	records []slog.Record
}

func (l *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecords) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logRecords) WithGroup(string) slog.Handler            { return l }
func (l *logRecords) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records = append(l.records, r.Clone())
	return nil
}

// at returns the attributes of the records logged at level whose message
// starts with prefix.
func (l *logRecords) at(level slog.Level, prefix string) []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, r := range l.records {
		if r.Level != level || len(r.Message) < len(prefix) || r.Message[:len(prefix)] != prefix {
			continue
		}
		attrs := map[string]any{}
		r.Attrs(func(a slog.Attr) bool {
			attrs[a.Key] = a.Value.Any()
			return true
		})
		out = append(out, attrs)
	}
	return out
}

const tooFewReplicas = "fewer Redis replicas are connected"

// enqueueUnacknowledged enqueues through c n times, concurrently when
// together is set; each must fail as its wait for replicas does.
func enqueueUnacknowledged(t *testing.T, c *jobs.Client, n int, together bool) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		one := func() { _, errs[i] = c.Enqueue(t.Context(), countArgs{N: i}) }
		if together {
			wg.Go(one)
		} else {
			one()
		}
	}
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, jobs.ErrEnqueueUnknown) {
			t.Fatalf("enqueue %d with too few replicas: %v, want ErrEnqueueUnknown", i, err)
		}
	}
}

// A client whose Durability asks for more replicas than the primary has
// (here none) fails every enqueue; its first durable write says why, at
// error level, with both counts and the primary's address, and no later
// write says it again, concurrent ones included.
func TestClientSaysTooFewReplicasAreConnected(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	logs := &logRecords{}
	c := jobs.NewClient(srv.Client(), jobs.Config{Namespace: redistest.Namespace(t), Logger: slog.New(logs),
		Durability: jobs.Durability{Replicas: 1, Timeout: 10 * time.Millisecond}})
	enqueueUnacknowledged(t, c, 3, false)
	enqueueUnacknowledged(t, c, 4, true)
	got := logs.at(slog.LevelError, tooFewReplicas)
	if len(got) != 1 {
		t.Fatalf("%d error-level logs of too few replicas over 7 enqueues, want 1: %v", len(got), got)
	}
	if a := got[0]; a["primary"] != srv.Addr || a["replicas_connected"] != int64(0) || a["replicas_required"] != int64(1) {
		t.Fatalf("log attributes %v, want primary %s, 0 replicas connected of 1 required", a, srv.Addr)
	}
}

// Behind Sentinel (a client whose options name no address) the log names
// the primary the client reached.
func TestClientSaysTooFewReplicasBehindSentinel(t *testing.T) {
	if testing.Short() {
		t.Skip("failover tests skipped in -short mode")
	}
	f := redistest.StartFailover(t, redistest.FailoverOptions{})
	logs := &logRecords{}
	cfg := durableConfig(t, f)
	cfg.Logger = slog.New(logs)
	cfg.Durability = jobs.Durability{Replicas: 2, Timeout: 10 * time.Millisecond}
	enqueueUnacknowledged(t, jobs.NewClient(f.Client(), cfg), 2, false)
	got := logs.at(slog.LevelError, tooFewReplicas)
	if len(got) != 1 || got[0]["primary"] != f.Primary.Addr || got[0]["replicas_connected"] != int64(1) || got[0]["replicas_required"] != int64(2) {
		t.Fatalf("error-level logs of too few replicas: %v, want one naming primary %s, 1 replica connected of 2 required", got, f.Primary.Addr)
	}
}

// A Redis user the check may not run INFO for gets a warning, once, and
// its enqueues go on: the wait for replicas decides each (here it fails
// with ErrEnqueueUnknown, the job written on the primary).
func TestClientReplicaCheckRefusedLeavesTheEnqueueToItsWait(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ctx := t.Context()
	if err := srv.Client().Do(ctx, "ACL", "SETUSER", "noinfo", "on", ">pw", "~*", "&*", "+@all", "-info").Err(); err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, Username: "noinfo", Password: "pw"})
	t.Cleanup(func() { _ = rdb.Close() })
	logs := &logRecords{}
	c := jobs.NewClient(rdb, jobs.Config{Namespace: redistest.Namespace(t), Logger: slog.New(logs),
		Durability: jobs.Durability{Replicas: 1, Timeout: 10 * time.Millisecond}})
	enqueueUnacknowledged(t, c, 2, false)
	if got := logs.at(slog.LevelWarn, "could not read Redis's replicas"); len(got) != 1 {
		t.Fatalf("%d warnings of the refused check over 2 enqueues, want 1", len(got))
	}
	if got := logs.at(slog.LevelError, tooFewReplicas); len(got) != 0 {
		t.Fatalf("too few replicas logged from a check that read nothing: %v", got)
	}
	if n := pendingOn(t, c.Inspector(), jobs.DefaultQueue); n != 2 {
		t.Fatalf("%d pending jobs on the primary after 2 unacknowledged enqueues, want 2", n)
	}
}

// A client whose first durable write finds Redis down (its dial refused)
// has read nothing: it does not blame the Redis user's permissions, and
// its next write, once Redis is back, reads the replicas and says they
// are too few.
func TestClientReplicaCheckWithRedisDownIsLeftToTheNextWrite(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, DialerRetries: 1})
	t.Cleanup(func() { _ = rdb.Close() })
	logs := &logRecords{}
	c := jobs.NewClient(rdb, jobs.Config{Namespace: redistest.Namespace(t), Logger: slog.New(logs),
		Durability: jobs.Durability{Replicas: 1, Timeout: 10 * time.Millisecond}})
	srv.Kill()
	if _, err := c.Enqueue(t.Context(), countArgs{N: 1}); !errors.Is(err, jobs.ErrNotSent) {
		t.Fatalf("enqueue with Redis down: %v, want ErrNotSent", err)
	}
	if got := logs.at(slog.LevelWarn, "could not read Redis's replicas"); len(got) != 0 {
		t.Fatalf("a check that never reached Redis blamed the Redis user's permissions: %v", got)
	}
	srv.Restart()
	enqueueUnacknowledged(t, c, 2, false)
	if got := logs.at(slog.LevelError, tooFewReplicas); len(got) != 1 || got[0]["replicas_connected"] != int64(0) {
		t.Fatalf("error-level logs of too few replicas once Redis was back: %v, want one naming 0 replicas connected", got)
	}
}
