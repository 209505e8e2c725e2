package cli

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/epoch"
	"github.com/fencedq/fencedq/internal/redistest"
)

// TestRedisTakesASentinelURL: --redis redis-sentinel://host:port/master
// connects to the primary the Sentinel names, and the client follows the
// Sentinel to the promoted replica after a failover (a host:port of the
// primary would keep dialling the dead one). SentinelOptions gives the
// same Sentinels and master for jobs.Config.Sentinel.
func TestRedisTakesASentinelURL(t *testing.T) {
	if testing.Short() {
		t.Skip("failover tests skipped in -short mode")
	}
	ctx := context.Background()
	f := redistest.StartFailover(t, redistest.FailoverOptions{})
	addr := "redis-sentinel://" + f.Sentinel.Addr + "/" + redistest.MasterName
	rdb, err := ConnectRedis(ctx, addr)
	if err != nil {
		t.Fatalf("ConnectRedis(%q): %v", addr, err)
	}
	defer rdb.Close()
	if _, ok := rdb.(*redis.Client); !ok {
		t.Fatalf("ConnectRedis(%q) made a %T, want a failover client", addr, rdb)
	}
	key := redistest.Namespace(t) + ":k"
	if err := rdb.Set(ctx, key, "before", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := f.Primary.Client().Get(ctx, key).Result(); err != nil || v != "before" {
		t.Fatalf("the write through the Sentinel URL is not on the primary: %q, %v", v, err)
	}
	fo := SentinelOptions(addr)
	if fo == nil || fo.MasterName != redistest.MasterName || len(fo.SentinelAddrs) != 1 || fo.SentinelAddrs[0] != f.Sentinel.Addr {
		t.Fatalf("SentinelOptions(%q) = %+v", addr, fo)
	}
	if SentinelOptions("redis://"+f.Primary.Addr) != nil || SentinelOptions(f.Primary.Addr) != nil {
		t.Fatal("SentinelOptions of a plain address is not nil")
	}

	f.Sync()
	f.KillPrimary()
	var werr error
	for range 20 { // the first calls may still meet the old primary's connections
		if werr = rdb.Set(ctx, key, "after", time.Minute).Err(); werr == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if werr != nil {
		t.Fatalf("write through the Sentinel URL after the failover: %v", werr)
	}
	if v, err := f.Replica.Client().Get(ctx, key).Result(); err != nil || v != "after" {
		t.Fatalf("the write after the failover is not on the promoted replica: %q, %v", v, err)
	}
}

// TestParseSentinelURL: the Sentinels (default port 26379), the master
// name, the database and the servers' credentials; TLS with
// rediss-sentinel://; a malformed address is a usage error that names the
// flag and hides the password.
func TestParseSentinelURL(t *testing.T) {
	fo, err := ParseSentinelURL(" redis-sentinel://alice:p%40ss@s1:26380,s2,[::1]:5000/my%2Fmaster/3 ")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(fo.SentinelAddrs, " "); got != "s1:26380 s2:26379 [::1]:5000" {
		t.Errorf("sentinels %q", got)
	}
	if fo.MasterName != "my/master" || fo.DB != 3 || fo.Username != "alice" || fo.Password != "p@ss" || fo.TLSConfig != nil {
		t.Errorf("options %+v", fo)
	}
	if fo.SentinelUsername != "" || fo.SentinelPassword != "" {
		t.Errorf("the servers' credentials sent to the Sentinels: %+v", fo)
	}
	fo, err = ParseSentinelURL("rediss-sentinel://s1:1,s2:2/fq")
	if err != nil || fo.TLSConfig == nil || fo.DB != 0 || fo.MasterName != "fq" {
		t.Errorf("rediss-sentinel: %+v, %v", fo, err)
	}
	for _, bad := range []string{
		"redis-sentinel://:secret@s1:26379",            // no master
		"redis-sentinel://:secret@s1:26379/",           // empty master
		"redis-sentinel://:secret@s1:26379,/fq",        // empty address
		"redis-sentinel://:secret@s1:x/fq",             // bad port
		"redis-sentinel://:secret@s1:1:2/fq",           // too many colons
		"redis-sentinel://:secret@s1:26379/fq/db",      // bad database
		"redis-sentinel://:secret@s1:26379/fq?db=1",    // query not read
		"redis-sentinel://:secret@s1:26379/fq/1/extra", // bad database
	} {
		_, err := ParseSentinelURL(bad)
		if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "--redis") || strings.Contains(err.Error(), "secret") {
			t.Errorf("ParseSentinelURL(%q): %v", bad, err)
		}
		if _, err := ConnectRedis(context.Background(), bad); !errors.Is(err, ErrUsage) {
			t.Errorf("ConnectRedis(%q): %v, want a usage error", bad, err)
		}
	}
	port := strconv.Itoa(redistest.FreePort(t))
	_, err = ConnectRedis(context.Background(), "redis-sentinel://user:secret@127.0.0.1:"+port+"/fq")
	if err == nil || strings.Contains(err.Error(), "secret") || !strings.Contains(err.Error(), "redis redis-sentinel://***@127.0.0.1:"+port+"/fq does not answer") {
		t.Errorf("unreachable Sentinel: %v", err)
	}
}

// TestSentinelURLNamesAWrongMasterOrDownSentinels: a master name the
// Sentinels do not monitor is named as such (not as a refused password or
// unreachable Sentinels), Sentinels that are all down are named, at
// once, not after the ping's timeout, and so is the primary they name when
// it does not answer.
func TestSentinelURLNamesAWrongMasterOrDownSentinels(t *testing.T) {
	if testing.Short() {
		t.Skip("failover tests skipped in -short mode")
	}
	ctx := context.Background()
	f := redistest.StartFailover(t, redistest.FailoverOptions{})
	down := "127.0.0.1:" + strconv.Itoa(redistest.FreePort(t))

	addr := "redis-sentinel://" + down + "," + f.Sentinel.Addr + "/nope"
	_, err := ConnectRedis(ctx, addr)
	if !errors.Is(err, ErrSentinelMaster) || !strings.Contains(err.Error(), `master named "nope"`) ||
		strings.Contains(err.Error(), "password") || strings.Contains(err.Error(), "unreachable") {
		t.Fatalf("ConnectRedis(%q) = %v, want it to name the unknown master", addr, err)
	}

	addr = "redis-sentinel://" + down + "/" + redistest.MasterName
	start := time.Now()
	_, err = ConnectRedis(ctx, addr)
	if err == nil || !strings.Contains(err.Error(), "no Sentinel answers") || !strings.Contains(err.Error(), down) ||
		errors.Is(err, ErrSentinelMaster) {
		t.Fatalf("ConnectRedis(%q) = %v, want it to name the Sentinel that does not answer", addr, err)
	}
	if d := time.Since(start); d >= PingTimeout {
		t.Fatalf("ConnectRedis(%q) took %v: a refused Sentinel is reported at once", addr, d)
	}

	// A Redis server's address given for a Sentinel's is named as such.
	for _, sentinels := range []string{f.Replica.Addr, f.Replica.Addr + "," + down} {
		addr = "redis-sentinel://" + sentinels + "/" + redistest.MasterName
		if rdb, err := ConnectRedis(ctx, addr); rdb != nil || !errors.Is(err, epoch.ErrNotSentinel) || !strings.Contains(err.Error(), f.Replica.Addr) {
			t.Fatalf("ConnectRedis(%q) = %v, %v, want ErrNotSentinel naming %s", addr, rdb, err, f.Replica.Addr)
		}
	}

	// No replica to promote: the Sentinel keeps naming the frozen primary.
	f.Replica.Kill()
	f.Primary.Pause()
	t.Cleanup(f.Primary.Resume)
	addr = "redis-sentinel://" + f.Sentinel.Addr + "/" + redistest.MasterName
	_, err = ConnectRedis(ctx, addr)
	if err == nil || !strings.Contains(err.Error(), "does not answer: the primary the Sentinels name, "+f.Primary.Addr+": ") {
		t.Fatalf("ConnectRedis(%q) with the primary frozen = %v, want it to name the primary", addr, err)
	}
}
