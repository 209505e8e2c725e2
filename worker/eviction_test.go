package worker_test

import (
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/redistest"
)

// A pool on a Redis that may evict keys (a maxmemory and a policy other
// than noeviction) logs it at error level and exports it; once the policy
// is noeviction again it says so and the gauge drops to 0.
func TestPoolWarnsOfAnEvictingRedis(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	rdb := srv.Client()
	ctx := t.Context()
	if err := rdb.ConfigSet(ctx, "maxmemory", "1gb").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ConfigSet(ctx, "maxmemory-policy", "volatile-lru").Err(); err != nil {
		t.Fatal(err)
	}
	e, reg, h := beating(t, rdb, 10*time.Millisecond)

	h.Clocked.WaitOrTimeout() // the first heartbeat's look came before it
	if v := metricSum(t, reg, "fencedq_redis_may_evict"); v != 1 {
		t.Fatalf("fencedq_redis_may_evict = %v on a volatile-lru Redis, want 1", v)
	}
	if !strings.Contains(e.logs.String(), `"level":"ERROR","msg":"Redis may evict keys`) ||
		!strings.Contains(e.logs.String(), `"maxmemory_policy":"volatile-lru"`) {
		t.Fatalf("the policy is not logged at error level:\n%s", e.logs.String())
	}

	if err := rdb.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	for !strings.Contains(e.logs.String(), "Redis no longer evicts keys") {
		h.Clocked.WaitOrTimeout() // a look every 12 heartbeats
	}
	if v := metricSum(t, reg, "fencedq_redis_may_evict"); v != 0 {
		t.Fatalf("fencedq_redis_may_evict = %v after noeviction, want 0", v)
	}
	if n := strings.Count(e.logs.String(), "Redis may evict keys"); n != 1 {
		t.Fatalf("the policy was logged %d times, want once", n)
	}
}

// A Redis without maxmemory (the default) is not reported.
func TestPoolQuietOnANonEvictingRedis(t *testing.T) {
	e, reg, h := beating(t, redistest.Start(t, redistest.Options{}).Client(), 10*time.Millisecond)
	h.Clocked.WaitOrTimeout()
	if v := metricSum(t, reg, "fencedq_redis_may_evict"); v != 0 {
		t.Fatalf("fencedq_redis_may_evict = %v, want 0", v)
	}
	if strings.Contains(e.logs.String(), "may evict") {
		t.Fatal("a non-evicting Redis was reported")
	}
}

// On a Redis Cluster every master is read: one evicting master is enough.
func TestPoolWarnsOfAnEvictingClusterMaster(t *testing.T) {
	cl := redistest.StartCluster(t)
	last := cl.Nodes[len(cl.Nodes)-1].Client()
	if err := last.ConfigSet(t.Context(), "maxmemory", "1gb").Err(); err != nil {
		t.Fatal(err)
	}
	if err := last.ConfigSet(t.Context(), "maxmemory-policy", "allkeys-lru").Err(); err != nil {
		t.Fatal(err)
	}
	e, reg, h := beating(t, cl.Client(), 10*time.Millisecond)
	h.Clocked.WaitOrTimeout()
	if v := metricSum(t, reg, "fencedq_redis_may_evict"); v != 1 {
		t.Fatalf("fencedq_redis_may_evict = %v with one allkeys-lru master, want 1", v)
	}
	if !strings.Contains(e.logs.String(), `"maxmemory_policy":"allkeys-lru"`) {
		t.Fatal("the master's policy is not logged")
	}
}
