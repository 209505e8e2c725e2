package redistest_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/redistest"
)

// serverTime reads Redis TIME.
func serverTime(t *testing.T, c *redis.Client) time.Time {
	t.Helper()
	tm, err := c.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

// skew returns how far the server's clock is from the local one.
func skew(t *testing.T, c *redis.Client) time.Duration {
	return time.Until(serverTime(t, c))
}

// near reports whether a measured skew is the offset set: the two clocks
// are read a round trip apart, and the offsets tested are minutes, so a
// few seconds of slack tells them apart on any machine.
func near(d, off time.Duration) bool {
	return d > off-3*time.Second && d < off+3*time.Second
}

// The shim moves Redis TIME (and a script's TIME) by the offset written to
// its file, at once, in both directions, and back.
func TestClockShim(t *testing.T) {
	ctx := context.Background()
	s := redistest.Start(t, redistest.Options{ClockShim: true})
	c := s.Client()
	if d := skew(t, c); !near(d, 0) {
		t.Fatalf("no offset set, clock off by %v", d)
	}
	for _, off := range []time.Duration{-10 * time.Minute, 10 * time.Minute, 0} {
		s.SetClockOffset(off)
		if d := skew(t, c); !near(d, off) {
			t.Fatalf("offset %v: TIME is off by %v", off, d)
		}
		v, err := c.Eval(ctx, "return redis.call('TIME')[1]", nil).Int64()
		if err != nil {
			t.Fatal(err)
		}
		if d := time.Until(time.Unix(v, 0)); !near(d, off) {
			t.Fatalf("offset %v: a script's TIME is off by %v", off, d)
		}
	}
}

// The failover harness: writes after the cut are lost when the primary is
// killed; the Sentinel promotes the replica, whose own clock offset holds;
// a failover client follows it.
func TestFailoverHarness(t *testing.T) {
	ctx := context.Background()
	f := redistest.StartFailover(t, redistest.FailoverOptions{ClockShim: true})
	c := f.Client()
	if err := c.Set(ctx, "before", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	f.Sync()
	f.CutReplication()
	if err := c.Set(ctx, "after", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	f.Replica.SetClockOffset(-10 * time.Minute)
	replica := f.Replica.Client()
	if d := skew(t, replica); !near(d, -10*time.Minute) {
		t.Fatalf("replica clock off by %v, want -10m", d)
	}
	f.KillPrimary()

	// The client's pooled connections went to the dead primary; go-redis
	// redials through the Sentinel, which now names the replica.
	var role string
	for attempt := 0; ; attempt++ {
		info, err := c.Info(ctx, "replication").Result()
		if err == nil {
			role = info
			break
		}
		if attempt == 5 {
			t.Fatalf("failover client after promotion: %v", err)
		}
	}
	if !strings.Contains(role, "role:master") {
		t.Fatalf("failover client reaches a non-master: %s", role)
	}
	if v, err := c.Get(ctx, "before").Result(); err != nil || v != "1" {
		t.Fatalf("write before the cut: %q, %v", v, err)
	}
	if err := c.Get(ctx, "after").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("write after the cut survived the failover (err %v): the cut did not cut", err)
	}
	if d := skew(t, c); !near(d, -10*time.Minute) {
		t.Fatalf("promoted node's clock off by %v, want -10m", d)
	}
}

// A healed replica resynchronises: what the primary took during the cut
// reaches it.
func TestCutAndHeal(t *testing.T) {
	ctx := context.Background()
	f := redistest.StartFailover(t, redistest.FailoverOptions{})
	c := f.Primary.Client()
	f.CutReplication()
	if err := c.Set(ctx, "during", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	// (TestFailoverHarness shows the write never arrives; here: the link is down.)
	if info, err := f.Replica.Client().Info(ctx, "replication").Result(); err != nil ||
		!strings.Contains(info, "master_link_status:down") {
		t.Fatalf("replica after the cut: %v %s", err, info)
	}
	f.HealReplication()
	f.Sync()
	if v, err := f.Replica.Client().Get(ctx, "during").Result(); err != nil || v != "1" {
		t.Fatalf("after the heal the replica has %q, %v", v, err)
	}
}
