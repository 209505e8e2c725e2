package durable_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/durable"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/testsignal"
)

// run sends one write and the Waiter's wait in one pipeline and returns
// the check's verdict.
func run(ctx context.Context, c redis.UniversalClient, w *durable.Waiter) error {
	pipe := c.Pipeline()
	pipe.Incr(ctx, "durable-test")
	check := w.Append(ctx, pipe)
	if _, err := pipe.Exec(ctx); err != nil {
		return err
	}
	return check()
}

// The servers here are Redis 7.0: no WAITAOF. Detection says so, a Waiter
// asked for AOF falls back to WAIT and logs it once; without a replica the
// wait fails with ErrUnacknowledged, with a synced replica it passes.
func TestWaitAndWaitAOFDetection(t *testing.T) {
	ctx := context.Background()
	primary := redistest.Start(t, redistest.Options{})
	c := primary.Client()
	has, err := durable.HasWaitAOF(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	info, _ := c.Info(ctx, "server").Result()
	v72 := !strings.Contains(info, "redis_version:7.0") && !strings.Contains(info, "redis_version:6.")
	if has != v72 {
		t.Fatalf("HasWaitAOF = %v on a server whose INFO says %q", has, versionLine(info))
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	w := durable.New(c, durable.Options{Replicas: 1, Timeout: 20 * time.Millisecond, AOF: true}, log)
	want := durable.Wait
	if has {
		want = durable.WaitAOF
	}
	for range 2 {
		if got, err := w.Command(ctx); err != nil || got != want {
			t.Fatalf("Command() = %q, %v; want %q", got, err, want)
		}
	}
	if n := strings.Count(logs.String(), "no WAITAOF"); n != 1 && !has {
		t.Fatalf("fallback logged %d times, want once:\n%s", n, logs.String())
	}
	// No replica: the wait times out with 0 of 1.
	if err := run(ctx, c, w); !errors.Is(err, durable.ErrUnacknowledged) || !strings.Contains(err.Error(), "0 of 1") {
		t.Fatalf("no replica: got %v, want ErrUnacknowledged (0 of 1)", err)
	}
	// A synced replica: acknowledged.
	replica := redistest.Start(t, redistest.Options{})
	if err := replica.Client().ReplicaOf(ctx, "127.0.0.1", primary.Addr[strings.LastIndex(primary.Addr, ":")+1:]).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Wait(ctx, 1, testsignal.Timeout()).Result(); err != nil || n < 1 {
		t.Fatalf("replica did not come online: %d (%v)", n, err)
	}
	w = durable.New(c, durable.Options{Replicas: 1, Timeout: testsignal.Timeout()}, log)
	if err := run(ctx, c, w); err != nil {
		t.Fatalf("synced replica: %v", err)
	}
	if got := replica.Client().Get(ctx, "durable-test").Val(); got != "2" {
		t.Fatalf("replica holds %q after an acknowledged write, want 2", got)
	}
}

func versionLine(info string) string {
	for _, l := range strings.Split(info, "\n") {
		if strings.HasPrefix(l, "redis_version:") {
			return strings.TrimSpace(l)
		}
	}
	return "?"
}

func TestOptionsValidate(t *testing.T) {
	for _, o := range []durable.Options{{Replicas: -1}, {Replicas: 1, Timeout: -time.Second}, {Replicas: 1, Timeout: 2 * time.Hour}, {Replicas: 5000}} {
		if o.Validate() == nil {
			t.Errorf("%+v validated", o)
		}
	}
	for _, o := range []durable.Options{{}, {Replicas: 1}, {Replicas: 2, Timeout: time.Second, AOF: true}} {
		if err := o.Validate(); err != nil {
			t.Errorf("%+v: %v", o, err)
		}
	}
	if (durable.Options{}).Enabled() || !(durable.Options{Replicas: 1}).Enabled() {
		t.Error("Enabled wrong")
	}
}

// A wait must end within the Redis client's read timeout, which its reply
// is read under (at most 80 % of it), and within the pipeline's 5 s round
// trip where the client applies its context's deadline; a client without a
// read timeout takes any wait Validate takes.
func TestCheckClient(t *testing.T) {
	for _, tc := range []struct {
		read    time.Duration
		ctx     bool
		timeout time.Duration
		ok      bool
	}{
		{0, false, 4 * time.Second, true}, // go-redis's default: 5 s
		{0, false, 5 * time.Second, false},
		{time.Second, false, 800 * time.Millisecond, true},
		{time.Second, false, 0, false}, // the default wait, 1 s
		{time.Second, false, 900 * time.Millisecond, false},
		{15 * time.Second, false, 10 * time.Second, true},
		{15 * time.Second, true, 10 * time.Second, false},
		{-1, false, time.Minute, true}, // no read timeout
		{0, false, -time.Second, false},
	} {
		c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ReadTimeout: tc.read, ContextTimeoutEnabled: tc.ctx})
		cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}, ReadTimeout: tc.read, ContextTimeoutEnabled: tc.ctx})
		for _, rdb := range []redis.UniversalClient{c, cc} {
			err := durable.CheckClient(rdb, durable.Options{Replicas: 1, Timeout: tc.timeout})
			if (err == nil) != tc.ok {
				t.Errorf("%T read timeout %v (context deadline %v), wait %v: %v, want ok %v", rdb, tc.read, tc.ctx, tc.timeout, err, tc.ok)
			}
		}
		_ = c.Close()
		_ = cc.Close()
	}
	if err := durable.CheckClient(nil, durable.Options{}); err != nil {
		t.Errorf("durability off: %v", err)
	}
}
