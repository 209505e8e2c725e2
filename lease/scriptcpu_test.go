package lease_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/lease"
)

// BenchmarkPairInstructions runs acquire+release pairs against a
// redis-server run under valgrind's callgrind and has callgrind dump its
// counts after each phase: pairs one after another (every call alone), then
// pairs from 8 goroutines (calls batched and merged as fencedq-bench's lease
// section makes them). Instruction counts, unlike CPU time, do not depend on
// the machine's load. It is skipped unless FENCEDQ_CALLGRIND_ADDR (the
// server) and FENCEDQ_CALLGRIND_PID (valgrind's process) are set:
//
//	valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.out.%p redis-server --port 17392 --save '' &
//	FENCEDQ_CALLGRIND_ADDR=127.0.0.1:17392 FENCEDQ_CALLGRIND_PID=$! \
//	  go test -run '^$' -bench PairInstructions -benchtime 2000x ./lease/
//	callgrind_annotate --inclusive=yes /tmp/cg.out.<pid>.1 | grep -E 'processCommand|evalSha'  # ÷ N pairs
//
// Each phase reports the script calls (EVALSHA) it made per pair.
func BenchmarkPairInstructions(b *testing.B) {
	addr, pid := os.Getenv("FENCEDQ_CALLGRIND_ADDR"), os.Getenv("FENCEDQ_CALLGRIND_PID")
	if addr == "" || pid == "" {
		b.Skip("FENCEDQ_CALLGRIND_ADDR and FENCEDQ_CALLGRIND_PID not set")
	}
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	b.Cleanup(func() { _ = rdb.Close() })
	if err := rdb.ConfigSet(ctx, "notify-keyspace-events", "").Err(); err != nil {
		b.Fatal(err)
	}
	m := lease.NewManager(rdb, lease.Config{Namespace: "callgrind-" + uuid.NewString()[:8]})
	pair := func(res string) {
		l, err := m.Acquire(ctx, res, "bench", 10*time.Second)
		if err != nil {
			b.Fatal(err)
		}
		if err := m.Release(ctx, l); err != nil {
			b.Fatal(err)
		}
	}
	callgrind := func(arg string) {
		if out, err := exec.Command("callgrind_control", arg, pid).CombinedOutput(); err != nil {
			b.Fatalf("callgrind_control %s: %v: %s", arg, err, out)
		}
	}
	evalshas := func() int64 {
		s, err := rdb.Info(ctx, "commandstats").Result()
		if err != nil {
			b.Fatal(err)
		}
		var n int64
		if _, err := fmt.Sscanf(s[indexOf(s, "cmdstat_evalsha:calls="):], "cmdstat_evalsha:calls=%d", &n); err != nil {
			b.Fatal(err)
		}
		return n
	}
	pair("warm-up") // loads the scripts and the epoch
	b.ResetTimer()
	e0 := evalshas()
	callgrind("-z")
	for i := range b.N {
		pair(fmt.Sprintf("seq-%d", i%100))
	}
	callgrind("-d")
	e1 := evalshas()
	const workers = 8
	var wg sync.WaitGroup
	for g := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < b.N; i += workers {
				pair(fmt.Sprintf("par-%d-%d", g, i%100))
			}
		}()
	}
	wg.Wait()
	callgrind("-d")
	e2 := evalshas()
	// INFO commandstats itself is one command each time.
	b.ReportMetric(float64(e1-e0)/float64(b.N), "seq-evalsha/pair")
	b.ReportMetric(float64(e2-e1)/float64(b.N), "par-evalsha/pair")
}

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return len(s)
}
