package lease_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/lease"
)

// Released and raised lease keys expire once every token minted afresh is
// above every token they held, so resources named after user data leave
// no key behind; after they are gone, and after the clock stepped back,
// new tokens are still above every earlier one (a mark above the clock
// included). A key holding a token of a later epoch stays. With epochs,
// and with epochs off (a Redis user that may not run INFO: epoch 0, the
// clock record still kept).
func TestReleasedLeaseKeysLingerOut(t *testing.T) {
	t.Run("Epochs", func(t *testing.T) {
		srv := redistest.Start(t, redistest.Options{ClockShim: true})
		testLingerOut(t, srv, srv.Client())
	})
	t.Run("EpochsOff", func(t *testing.T) {
		ctx := context.Background()
		srv := redistest.Start(t, redistest.Options{ClockShim: true})
		if err := srv.Client().Do(ctx, "ACL", "SETUSER", "noinfo", "on", ">pw", "~*", "&*", "+@all", "-info").Err(); err != nil {
			t.Fatal(err)
		}
		c := redis.NewClient(&redis.Options{Addr: srv.Addr, Username: "noinfo", Password: "pw"})
		t.Cleanup(func() { _ = c.Close() })
		testLingerOut(t, srv, c)
	})
}

func testLingerOut(t *testing.T, srv *redistest.Server, c *redis.Client) {
	ctx := context.Background()
	m := newManager(t, c)
	exists := func(res string) bool {
		t.Helper()
		n, err := c.Exists(ctx, m.Key(res)).Result() // an expired key is deleted when read
		if err != nil {
			t.Fatal(err)
		}
		return n == 1
	}
	var last lease.Token
	var released []string
	for i := range 20 {
		res := fmt.Sprintf("customer:%d", i)
		l, err := m.Acquire(ctx, res, "w", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if ttl := c.PTTL(ctx, m.Key(res)).Val(); ttl != -1 {
			t.Fatalf("a live lease's key expires: %v", ttl)
		}
		if err := m.Release(ctx, l); err != nil {
			t.Fatal(err)
		}
		last = max(last, l.Token)
		released = append(released, res)
	}
	// Storage's mark, an hour above the clock: the key holding it lasts
	// until the clock is past it.
	mark := last + lease.Token(time.Hour.Microseconds())
	if err := m.Raise(ctx, "customer:raised", mark); err != nil {
		t.Fatal(err)
	}
	// A mark of a later epoch than the manager's stays for ever.
	if err := m.Raise(ctx, "customer:far", 1<<62); err != nil {
		t.Fatal(err)
	}
	if ttl := c.PTTL(ctx, m.Key("customer:far")).Val(); ttl != -1 {
		t.Fatalf("a key holding a token of a later epoch expires: %v", ttl)
	}
	for _, res := range released {
		if !exists(res) {
			t.Fatalf("%s gone right after its release", res)
		}
	}

	srv.SetClockOffset(5 * time.Minute)
	for _, res := range released {
		if exists(res) {
			t.Fatalf("%s still there 5 minutes after its release", res)
		}
	}
	if !exists("customer:raised") {
		t.Fatal("the key raised to a mark an hour ahead is gone after 5 minutes")
	}
	// The clock steps back after the keys are gone: the namespace's time
	// does not, so a fresh token is still above every earlier one.
	srv.SetClockOffset(0)
	l, err := m.Acquire(ctx, released[0], "w", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if l.Token <= last {
		t.Fatalf("token after the key expired %d, not above the earlier %d", l.Token, last)
	}
	if err := m.Release(ctx, l); err != nil {
		t.Fatal(err)
	}

	srv.SetClockOffset(2 * time.Hour)
	if exists("customer:raised") || exists(released[0]) {
		t.Fatal("keys still there 2 hours on")
	}
	if !exists("customer:far") {
		t.Fatal("the key holding a token of a later epoch expired")
	}
	// The namespace reads its time (a pool does every few seconds), then
	// the clock steps back: the time does not.
	if _, err := m.Acquire(ctx, "customer:other", "w", time.Minute); err != nil {
		t.Fatal(err)
	}
	srv.SetClockOffset(0)
	l, err = m.Acquire(ctx, "customer:raised", "w", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if l.Token <= mark {
		t.Fatalf("token after the raised key expired %d, not above the mark %d", l.Token, mark)
	}
}
