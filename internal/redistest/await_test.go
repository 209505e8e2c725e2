package redistest_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/testsignal"
)

// writeOnSecondLook returns a condition that is false on its first call and
// then writes key from another goroutine: only a notification can make
// Await look again, so a passing Await proves it was woken by one. The
// writer is waited for before the test's client closes: the write can be
// seen (and the test end) before its reply has reached the writer.
func writeOnSecondLook(t *testing.T, c redis.UniversalClient, key string) (cond func() bool, calls *int) {
	n := 0
	var writer sync.WaitGroup
	t.Cleanup(writer.Wait)
	return func() bool {
		n++
		if n == 1 {
			writer.Add(1)
			go func() {
				defer writer.Done()
				if err := c.Set(context.Background(), key, "done", 0).Err(); err != nil {
					t.Errorf("set %s: %v", key, err)
				}
			}()
			return false
		}
		return c.Get(context.Background(), key).Val() == "done"
	}, &n
}

func TestAwaitIsWokenByAWrite(t *testing.T) {
	c, ns := redistest.New(t)
	cond, calls := writeOnSecondLook(t, c, ns+":flag")
	redistest.Await(t, c, ns+":", "the flag", cond)
	if *calls < 2 {
		t.Fatalf("condition evaluated %d times", *calls)
	}
}

func TestAwaitIsWokenByAnExpiry(t *testing.T) {
	c, ns := redistest.New(t)
	ctx := context.Background()
	key := ns + ":lease"
	if err := c.Set(ctx, key, "x", 50*time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	redistest.Await(t, c, key, "the key to expire", func() bool { return c.Exists(ctx, key).Val() == 0 })
}

// TestAwaitEnablesEventsOnAGivenServer: a server started without keyspace
// events (one given through REDIS_ADDR) gets them from Await, and keeps the
// classes it had.
func TestAwaitEnablesEventsOnAGivenServer(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	c := srv.Client()
	ctx := context.Background()
	if err := c.ConfigSet(ctx, "notify-keyspace-events", "Eg").Err(); err != nil {
		t.Fatal(err)
	}
	cond, _ := writeOnSecondLook(t, c, "k")
	redistest.Await(t, c, "k", "k", cond)
	flags := c.ConfigGet(ctx, "notify-keyspace-events").Val()["notify-keyspace-events"]
	for _, f := range "KAE" {
		if !strings.ContainsRune(flags, f) {
			t.Fatalf("notify-keyspace-events %q lacks %c", flags, f)
		}
	}
}

// TestAwaitEscapesThePrefix: glob characters in the prefix match only
// themselves.
func TestAwaitEscapesThePrefix(t *testing.T) {
	c, ns := redistest.New(t)
	prefix := ns + ":{q}:job:[a*]?"
	cond, _ := writeOnSecondLook(t, c, prefix+"x")
	redistest.Await(t, c, prefix, "the escaped key", cond)
}

func TestAwaitOnACluster(t *testing.T) {
	c := redistest.StartCluster(t).Client()
	for _, k := range []string{"a", "b", "c"} { // spread over the masters
		cond, _ := writeOnSecondLook(t, c, "{"+k+"}:x")
		redistest.Await(t, c, "{"+k+"}:", "key "+k, cond)
	}
}

func TestAwaitFailureNamesWhatWasAwaited(t *testing.T) {
	t.Setenv(testsignal.ScaleEnv, "0.02") // 200 ms: this wait is meant to fail
	c, ns := redistest.New(t)
	f := redistest.NewFatalCatcher(t)
	go redistest.Await(f, c, ns, "the answer", func() bool { return false })
	if msg := <-f.Msg; !strings.Contains(msg, "the answer") || !strings.Contains(msg, "not reached within") {
		t.Fatalf("failure message %q", msg)
	}
	// A condition that turns true without any write to the watched keys is
	// reported as such.
	start := time.Now()
	go redistest.Await(f, c, ns, "the clock", func() bool { return time.Since(start) > 50*time.Millisecond })
	if msg := <-f.Msg; !strings.Contains(msg, "without a keyspace notification") {
		t.Fatalf("failure message %q", msg)
	}
}

func TestWatchDeliversEachChange(t *testing.T) {
	c, ns := redistest.New(t)
	ctx := context.Background()
	w := redistest.Watch(t, c, ns+":counter")
	for i := range 3 {
		if err := c.Incr(ctx, ns+":counter").Err(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-w.C():
		case <-time.After(testsignal.Timeout()):
			t.Fatalf("no notification for write %d", i+1)
		}
	}
}
