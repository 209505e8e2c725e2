package lease

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/redistest"
)

// TestOpsMergedCall runs ops.lua as a merged call of several callers does:
// the operations apply in order, each on its own resource, a release
// frees a lease for an acquisition later in the same call, an operation
// that fails (no token left to mint, a stale epoch) changes nothing and
// leaves the others applied.
func TestOpsMergedCall(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t, redistest.Options{}).Client()
	m := NewManager(rdb, Config{Namespace: redistest.Namespace(t)})
	if !m.epoch.Enabled() {
		t.Fatal("epochs are off on a single Redis")
	}
	first, err := m.Acquire(ctx, "a", "o1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	st := m.epoch.Last()
	if st.ReplID == "" {
		t.Fatal("no epoch state after an acquisition")
	}
	full := "18446744073709551615" // 2^64 - 1: no token above it
	if err := rdb.Set(ctx, m.Key("c"), full+" 0 ", 0).Err(); err != nil {
		t.Fatal(err)
	}
	run := func(rid string, ops ...[4]string) []any {
		t.Helper()
		var keys []string
		args := []any{rid, st.Epoch, st.Born}
		for _, op := range ops {
			keys = append(keys, m.Key(op[0]))
			args = append(args, op[1], op[2], op[3])
		}
		keys = append(keys, m.epoch.Key())
		r, err := opsScript.Run(ctx, rdb, keys, args...).Slice()
		if err != nil {
			t.Fatal(err)
		}
		if len(r) != len(ops) {
			t.Fatalf("%d values for %d operations: %v", len(r), len(ops), r)
		}
		return r
	}
	r := run(st.ReplID,
		[4]string{"a", "a", "o2", "60000"},              // held by o1
		[4]string{"a", "r", "o1", first.Token.String()}, // released
		[4]string{"a", "a", "o2", "60000"},              // now o2's
		[4]string{"b", "a", "o3", "60000"},              // free
		[4]string{"c", "a", "o4", "60000"},              // no token left
		[4]string{"a", "r", "o1", first.Token.String()}, // o1 no longer holds it
	)
	if got := fmt.Sprint(r[0]); got != fmt.Sprintf("[0 o1 %d %d]", first.Token, first.Deadline.UnixMicro()) {
		t.Fatalf("acquire of a held lease: %s", got)
	}
	if r[1] != int64(1) || r[5] != int64(0) {
		t.Fatalf("releases: %v then %v, want 1 then 0", r[1], r[5])
	}
	tok := func(v any) uint64 {
		t.Helper()
		a, ok := v.(string)
		ts, _, cut := strings.Cut(a, " ")
		if !ok || !cut {
			t.Fatalf("acquisition %v, want '<token> <deadline>'", v)
		}
		n, err := strconv.ParseUint(ts, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if got := tok(r[2]); got <= uint64(first.Token) {
		t.Fatalf("token %d minted after %d", got, first.Token)
	}
	tok(r[3])
	if got := fmt.Sprint(r[4]); got != "[-2 FENCEDQ token space exhausted]" {
		t.Fatalf("acquire with no token left: %s", got)
	}
	if v, _ := rdb.Get(ctx, m.Key("c")).Result(); v != full+" 0 " {
		t.Fatalf("the exhausted lease key became %q", v)
	}
	h, err := m.Holder(ctx, "b")
	if err != nil || h == nil || h.Owner != "o3" {
		t.Fatalf("holder of b: %+v, %v; want o3", h, err)
	}

	// A stale epoch state: the acquisition is refused, the release applies.
	h, err = m.Holder(ctx, "a")
	if err != nil || h == nil {
		t.Fatalf("holder of a: %+v, %v", h, err)
	}
	r = run("another-primary",
		[4]string{"a", "r", "o2", h.Token.String()},
		[4]string{"d", "a", "o5", "60000"},
	)
	if r[0] != int64(1) {
		t.Fatalf("release beside a stale acquisition: %v, want 1", r[0])
	}
	if a, ok := r[1].([]any); !ok || len(a) != 3 || a[0] != int64(-1) || a[1] != st.ReplID {
		t.Fatalf("stale acquisition: %v, want {-1, %s, epoch}", r[1], st.ReplID)
	}
	if n, _ := rdb.Exists(ctx, m.Key("d")).Result(); n != 0 {
		t.Fatal("a stale acquisition wrote its lease key")
	}
	if h, err := m.Holder(ctx, "a"); err != nil || h != nil {
		t.Fatalf("a after its release: %+v, %v; want free", h, err)
	}
}
