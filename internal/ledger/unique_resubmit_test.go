package ledger_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
)

// TestResubmittedUniqueJobKeepsItsPeriod: a unique job of an hourly key,
// re-submitted an hour after its first enqueue, holds the key of that
// enqueue's period, not of the period it is sent in (where it would make
// the period's first job a duplicate).
func TestResubmittedUniqueJobKeepsItsPeriod(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{ClockShim: true})
	rdb := srv.Client()
	ctx := context.Background()
	now := time.Now()
	srv.SetClockOffset(now.Truncate(time.Hour).Add(30 * time.Minute).Sub(now)) // mid-hour
	l := ledger.New(rdb, ledger.Config{Namespace: "per"})
	states := []ledger.State{ledger.Pending, ledger.Running}
	j := &ledger.NewJob{ID: "j", Kind: "k", Queue: "q", Payload: []byte(`{}`), MaxRetries: 1,
		Unique: &ledger.Unique{Digest: "d", Period: time.Hour, States: states, Age: time.Hour}}
	ins, err := l.ResubmitForTest(ctx, []*ledger.NewJob{j})
	if err != nil || len(ins) != 1 || ins[0].Deduplicated {
		t.Fatalf("re-submission: %+v, %v", ins, err)
	}
	rt, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	hour := time.Hour.Milliseconds()
	first := fmt.Sprintf("d:%d:%d", hour, rt.UnixMilli()/hour-1)
	keys, err := rdb.HGetAll(ctx, "per:{q}:unique").Result()
	if err != nil || len(keys) != 1 || keys[first] != "j" {
		t.Fatalf("unique index %v (%v), want %s held by j", keys, err, first)
	}
	// The current period's first job is not a duplicate of it.
	fresh := &ledger.NewJob{ID: "fresh", Kind: "k", Queue: "q", Payload: []byte(`{}`), MaxRetries: 1,
		Unique: &ledger.Unique{Digest: "d", Period: time.Hour, States: states}}
	if ins, err = l.Insert(ctx, []*ledger.NewJob{fresh}); err != nil || ins[0].Deduplicated {
		t.Fatalf("the current period's first job: %+v, %v", ins[0], err)
	}
}
