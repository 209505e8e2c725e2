package jobs_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestFlowKeysFromUserData: limit and rate keys with hash-tag braces,
// unicode or the longest length allowed each name one limit of their own
// (a second job of a limit of 1 parks behind the first, a job of another
// such key does not); an empty key is no limit. Keys and group names that
// are too long, hold NUL or are empty where a name is needed are refused
// with ErrInvalid before anything is written.
func TestFlowKeysFromUserData(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	for _, tc := range []struct {
		name string
		opt  jobs.Option
	}{
		{"empty key", jobs.Limit("", 1)},
		{"empty rate key", jobs.Rate("", 1, time.Hour)},
		{"empty group", jobs.Group("")},
	} {
		for range 2 {
			if _, err := c.Enqueue(ctx, rangeArgs{N: 1}, tc.opt, jobs.Queue("none")); err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
		}
	}
	if st, err := c.Inspector().Limits(ctx, "none"); err != nil || len(st.Limits)+len(st.Rates) != 0 {
		t.Fatalf("jobs with empty keys are held back: %+v, %v", st, err)
	}

	keys := []string{"{q}", "}{", "export:{acct}:x", "ключ:数据:🔑", strings.Repeat("é", jobs.MaxFlowKeyLen/2)}
	for _, key := range keys {
		for range 2 {
			if _, err := c.Enqueue(ctx, rangeArgs{N: 1}, jobs.Limit(key, 1), jobs.Rate(key, 1, time.Hour)); err != nil {
				t.Fatalf("key %q: %v", key, err)
			}
		}
	}
	st, err := c.Inspector().Limits(ctx, jobs.DefaultQueue)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, l := range st.Limits {
		got[l.Key] = l.Waiting
	}
	for _, key := range keys {
		if got[key] != 1 {
			t.Errorf("key %q: %d parked, want 1 (its own limit): %+v", key, got[key], st.Limits)
		}
	}
	if len(got) != len(keys) {
		t.Errorf("limits %+v, want one per key", st.Limits)
	}

	before, err := rdb.Keys(ctx, ns+":*").Result()
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("k", 10<<10)
	for name, opt := range map[string]jobs.Option{
		"10 kB limit key": jobs.Limit(long, 1),
		"10 kB rate key":  jobs.Rate(long, 1, time.Second),
		"NUL limit key":   jobs.Limit("a\x00b", 1),
		"NUL rate key":    jobs.Rate("a\x00b", 1, time.Second),
		"10 kB group":     jobs.Group(long),
		"NUL group":       jobs.Group("a\x00b"),
		"brace group":     jobs.Group("{q}"),
		"unicode group":   jobs.Group("ключ"),
	} {
		if _, err := c.Enqueue(ctx, rangeArgs{N: 1}, opt); !errors.Is(err, jobs.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		} else if len(err.Error()) > 300 {
			t.Errorf("%s: the error quotes the whole name (%d bytes)", name, len(err.Error()))
		}
	}
	after, err := rdb.Keys(ctx, ns+":*").Result()
	if err != nil || len(after) != len(before) {
		t.Fatalf("refused enqueues wrote keys: %d before, %d after (%v)", len(before), len(after), err)
	}
}
