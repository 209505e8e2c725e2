package ledger_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
)

// removals records the count each command's reply reports, so a test can
// see how much one call to Redis removed.
type removals struct {
	mu   sync.Mutex
	most int64
}

func (r *removals) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *removals) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		var n int64
		switch c := cmd.(type) {
		case *redis.IntCmd:
			n = c.Val()
		case *redis.Cmd:
			n, _ = c.Int64()
		}
		r.mu.Lock()
		r.most = max(r.most, n)
		r.mu.Unlock()
		return err
	}
}

func (r *removals) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// Pruning a queue where many finished jobs expired at once removes them in
// bounded calls, never all in one command that holds Redis for as long as
// it takes, and keeps the entries still within retention.
func TestPruneRemovesExpiredEntriesInBoundedCalls(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := t.Context()
	l := ledger.New(rdb, ledger.Config{Namespace: ns, Retention: time.Hour})
	now := time.Now()
	old := now.Add(-2 * time.Hour).UnixMilli()
	expired := 3*ledger.PruneBatch + 7
	for s, n := range map[ledger.State]int{ledger.Succeeded: expired, ledger.Dead: ledger.PruneBatch, ledger.Cancelled: 5} {
		zs := make([]redis.Z, 0, n+1)
		for i := range n {
			zs = append(zs, redis.Z{Score: float64(old + int64(i)), Member: fmt.Sprintf("%s-%d", s, i)})
		}
		zs = append(zs, redis.Z{Score: float64(now.UnixMilli()), Member: "kept"})
		if err := rdb.ZAdd(ctx, l.StateKey("default", s), zs...).Err(); err != nil {
			t.Fatal(err)
		}
	}

	hooked := redis.NewClient(rdb.Options())
	defer hooked.Close()
	r := &removals{}
	hooked.AddHook(r)
	n, err := ledger.New(hooked, ledger.Config{Namespace: ns, Retention: time.Hour}).Prune(ctx, "default", now)
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(expired + ledger.PruneBatch + 5); n != want {
		t.Fatalf("pruned %d entries, want %d", n, want)
	}
	if r.most > ledger.PruneBatch {
		t.Fatalf("one call removed %d entries, want at most %d", r.most, ledger.PruneBatch)
	}
	for _, s := range []ledger.State{ledger.Succeeded, ledger.Dead, ledger.Cancelled} {
		left, err := rdb.ZRange(ctx, l.StateKey("default", s), 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(left) != 1 || left[0] != "kept" {
			t.Fatalf("%s index after the prune: %d entries (%.40v), want only the one within retention", s, len(left), left)
		}
	}
}
