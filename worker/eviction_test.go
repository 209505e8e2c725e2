package worker_test

import (
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/worker"
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

// A Redis user the eviction check may not run INFO for (an ACL without
// +info) leaves the policy unread: the pool says so once, at warning level,
// instead of leaving an evicting Redis unreported without a word.
func TestPoolWarnsWhenTheEvictionPolicyCannotBeRead(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	admin := srv.Client()
	ctx := t.Context()
	if err := admin.Do(ctx, "ACL", "SETUSER", "noinfo", "on", ">secret", "~*", "&*", "+@all", "-info").Err(); err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, Username: "noinfo", Password: "secret"})
	t.Cleanup(func() { _ = rdb.Close() })
	e, _, h := beating(t, rdb, 10*time.Millisecond)
	h.Clocked.WaitOrTimeout()
	h.Clocked.WaitOrTimeout()
	if !strings.Contains(e.logs.String(), `"level":"WARN","msg":"could not read Redis's eviction policy`) {
		t.Fatalf("an unreadable eviction policy is not reported:\n%s", e.logs.String())
	}
	for range worker.EvictionEvery {
		h.Clocked.WaitOrTimeout() // the next look
	}
	if n := strings.Count(e.logs.String(), "could not read Redis's eviction policy"); n != 1 {
		t.Fatalf("reported %d times, want once", n)
	}
}

// On a Redis Cluster a master whose INFO fails does not hide another
// master that evicts.
func TestPoolWarnsOfAnEvictingClusterMasterWhenAnotherRefusesInfo(t *testing.T) {
	cl := redistest.StartCluster(t)
	ctx := t.Context()
	for i, n := range cl.Nodes {
		perms := []any{"ACL", "SETUSER", "pool", "on", ">secret", "~*", "&*", "+@all"}
		if i == 0 {
			perms = append(perms, "-info")
		}
		if err := n.Client().Do(ctx, perms...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	last := cl.Nodes[len(cl.Nodes)-1].Client()
	if err := last.ConfigSet(ctx, "maxmemory", "1gb").Err(); err != nil {
		t.Fatal(err)
	}
	if err := last.ConfigSet(ctx, "maxmemory-policy", "allkeys-lru").Err(); err != nil {
		t.Fatal(err)
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), Username: "pool", Password: "secret"})
	t.Cleanup(func() { _ = cc.Close() })
	e, reg, h := beating(t, cc, 10*time.Millisecond)
	h.Clocked.WaitOrTimeout()
	if v := metricSum(t, reg, "fencedq_redis_may_evict"); v != 1 {
		t.Fatalf("fencedq_redis_may_evict = %v with one allkeys-lru master, want 1:\n%s", v, e.logs.String())
	}
}
