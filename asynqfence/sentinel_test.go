package asynqfence_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/asynqfence"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
)

// TestNewRefusesWrongSentinelOptions: a bridge whose jobs.Config.Sentinel
// names a master no Sentinel monitors, or gives a Redis server's address
// for a Sentinel's, could never claim a delivery; New says so, with
// ErrOptions naming the mistake, as a pool's Run does.
func TestNewRefusesWrongSentinelOptions(t *testing.T) {
	if testing.Short() {
		t.Skip("failover tests skipped in -short mode")
	}
	f := redistest.StartFailover(t, redistest.FailoverOptions{})
	for name, c := range map[string]struct {
		fo   *redis.FailoverOptions
		want error
		text string
	}{
		"unknown master":    {&redis.FailoverOptions{MasterName: "no-such-master", SentinelAddrs: []string{f.Sentinel.Addr}}, lease.ErrUnknownMaster, `"no-such-master"`},
		"server a Sentinel": {&redis.FailoverOptions{MasterName: redistest.MasterName, SentinelAddrs: []string{f.Primary.Addr}}, lease.ErrNotSentinel, f.Primary.Addr},
	} {
		b, err := asynqfence.New(f.Client(), jobs.Config{Namespace: redistest.Namespace(t), Sentinel: c.fo}, asynqfence.Options{})
		if b != nil || !errors.Is(err, asynqfence.ErrOptions) || !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.text) {
			t.Errorf("%s: New: %v, %v; want ErrOptions matching %v naming %s", name, b, err, c.want, c.text)
		}
	}
	if _, err := asynqfence.New(f.Client(), jobs.Config{Namespace: redistest.Namespace(t), Sentinel: f.ClientOptions()}, asynqfence.Options{}); err != nil {
		t.Fatalf("New with the right Sentinel options: %v", err)
	}
}
