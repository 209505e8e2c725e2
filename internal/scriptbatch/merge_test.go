package scriptbatch_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/scriptbatch"
)

// appendAll appends each argument after the head (ARGV[1], a tag) to the
// list KEYS[1], counts its calls in KEYS[2] and replies with the list's
// length after each argument.
var appendAll = redis.NewScript(`
redis.call('INCR', KEYS[2])
local out = {}
for i = 2, #ARGV do out[#out + 1] = redis.call('RPUSH', KEYS[1], ARGV[1] .. ARGV[i]) end
return out`)

// splitLengths gives each merged call its own lengths.
func splitLengths(v any, n []int) ([]any, error) {
	r, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("reply %v", v)
	}
	out := make([]any, len(n))
	for i, k := range n {
		out[i], r = r[:k], r[k:]
	}
	return out, nil
}

// TestQueuedMergeableCallsShareOneScriptCall: calls queued behind one in
// flight that share a Merge key run as one script call (bounded by Max),
// in the order they were made, and each caller gets its own part of the
// reply; a call with another key runs on its own.
func TestQueuedMergeableCallsShareOneScriptCall(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Options{})
	rdb := client(t, srv)
	b := scriptbatch.New(rdb, one)
	direct, queued := scriptbatch.InitHooks(b, t)
	if err := appendAll.Load(ctx, rdb).Err(); err != nil {
		t.Fatal(err)
	}
	resume, held := holdInFlight(t, ctx, b, srv, direct)

	m := &scriptbatch.Merge{Key: "a", Head: 1, Max: 6, Split: splitLengths}
	other := &scriptbatch.Merge{Key: "b", Head: 1, Split: splitLengths}
	const n = 6 // 2 arguments each: Max 6 makes two merged calls of 3
	type result struct {
		reply []any
		err   error
	}
	results := make([]result, n+1)
	var wg sync.WaitGroup
	for i := range n + 1 {
		mg, tag := m, "a:"
		if i == n {
			mg, tag = other, "b:"
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := b.RunMerged(ctx, mg, appendAll, []string{"list", "calls"}, tag, fmt.Sprintf("%d.0", i), fmt.Sprintf("%d.1", i)).Slice()
			results[i] = result{v, err}
		}()
		queued.WaitOrTimeout() // one at a time: the order the calls are made in
	}
	resume()
	wg.Wait()
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	list, err := rdb.LRange(ctx, "list", 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	pos := map[string]int64{}
	for i, v := range list {
		pos[v] = int64(i + 1)
	}
	for i, r := range results {
		tag := "a:"
		if i == n {
			tag = "b:"
		}
		want := []any{pos[fmt.Sprintf("%s%d.0", tag, i)], pos[fmt.Sprintf("%s%d.1", tag, i)]}
		if r.err != nil || fmt.Sprint(r.reply) != fmt.Sprint(want) {
			t.Fatalf("call %d: reply %v, error %v; want %v (list %v)", i, r.reply, r.err, want, list)
		}
	}
	if got := strings.Join(list[:2*n], " "); got != "a:0.0 a:0.1 a:1.0 a:1.1 a:2.0 a:2.1 a:3.0 a:3.1 a:4.0 a:4.1 a:5.0 a:5.1" {
		t.Fatalf("merged calls ran as %s, want in the order made", got)
	}
	// the held call, two merged calls of 3, and the call with its own key
	if calls, _ := rdb.Get(ctx, "calls").Int(); calls != 3 {
		t.Fatalf("%d script calls ran, want 3 (2 merged + 1 unmerged)", calls)
	}
}

// TestMergedCallFailsEveryCaller: a merged call that fails fails each of
// its callers with its error.
func TestMergedCallFailsEveryCaller(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Options{})
	rdb := client(t, srv)
	b := scriptbatch.New(rdb, one)
	direct, queued := scriptbatch.InitHooks(b, t)
	fail := redis.NewScript(`return redis.error_reply('FAILS ' .. #ARGV)`)
	if err := fail.Load(ctx, rdb).Err(); err != nil {
		t.Fatal(err)
	}
	resume, held := holdInFlight(t, ctx, b, srv, direct)
	m := &scriptbatch.Merge{Key: "a", Head: 1, Split: splitLengths}
	const n = 4
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = b.RunMerged(ctx, m, fail, []string{"k"}, "h", i).Err()
		}()
	}
	queued.WaitOrTimeoutN(n)
	resume()
	wg.Wait()
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	for i, err := range errs {
		if err == nil || err.Error() != fmt.Sprintf("FAILS %d", n+1) {
			t.Fatalf("call %d: error %v, want the merged call's (FAILS %d)", i, err, n+1)
		}
	}
}

// TestMergedCallsCarryTheirOwnKeys: with KeyTail, a merged call's KEYS are
// every part's own keys in the order the calls were made, then the shared
// tail once, and each caller gets the reply of its own key.
func TestMergedCallsCarryTheirOwnKeys(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Options{})
	rdb := client(t, srv)
	b := scriptbatch.New(rdb, one)
	direct, queued := scriptbatch.InitHooks(b, t)
	// replies, per argument after the head, the key at that argument's
	// place and the last key (the shared tail)
	keysOf := redis.NewScript(`
redis.call('INCR', KEYS[#KEYS])
local out = {}
for i = 2, #ARGV do out[#out + 1] = KEYS[i - 1] .. '/' .. ARGV[i] .. '/' .. KEYS[#KEYS] end
return out`)
	if err := keysOf.Load(ctx, rdb).Err(); err != nil {
		t.Fatal(err)
	}
	resume, held := holdInFlight(t, ctx, b, srv, direct)
	m := &scriptbatch.Merge{Key: "a", Head: 1, KeyTail: 1, Split: splitLengths}
	const n = 4
	replies := make([][]any, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			replies[i], errs[i] = b.RunMerged(ctx, m, keysOf, []string{fmt.Sprintf("own%d", i), "calls"}, "h", i).Slice()
		}()
		queued.WaitOrTimeout() // one at a time: the order the calls are made in
	}
	resume()
	wg.Wait()
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	for i := range n {
		want := fmt.Sprintf("[own%d/%d/calls]", i, i)
		if errs[i] != nil || fmt.Sprint(replies[i]) != want {
			t.Fatalf("call %d: reply %v, error %v; want %s", i, replies[i], errs[i], want)
		}
	}
	if calls, _ := rdb.Get(ctx, "calls").Int(); calls != 1 {
		t.Fatalf("%d script calls ran on the shared key, want 1 (merged)", calls)
	}
}
