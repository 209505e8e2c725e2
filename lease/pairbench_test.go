package lease_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/lease"
)

func BenchmarkPairs8(b *testing.B) {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	m := lease.NewManager(rdb, lease.Config{Namespace: "pb-" + uuid.NewString()[:8]})
	b.ResetTimer()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < b.N; i += 8 {
				l, err := m.Acquire(ctx, fmt.Sprintf("r-%d-%d", g, i%100), "bench", 10*time.Second)
				if err != nil {
					b.Error(err)
					return
				}
				if err := m.Release(ctx, l); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}
