package jobs_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// replyCounter is a go-redis hook recording the largest sorted-set reply
// the client received.
type replyCounter struct {
	mu  sync.Mutex
	max int
}

func (*replyCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *replyCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.see(cmd)
		return err
	}
}

func (h *replyCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, c := range cmds {
			h.see(c)
		}
		return err
	}
}

func (h *replyCounter) see(cmd redis.Cmder) {
	n := 0
	switch c := cmd.(type) {
	case *redis.ZSliceCmd:
		n = len(c.Val())
	case *redis.StringSliceCmd:
		n = len(c.Val())
	case *redis.Cmd:
		if s, ok := c.Val().([]any); ok {
			n = len(s)
			for _, e := range s {
				if inner, ok := e.([]any); ok {
					n += len(inner)
				}
			}
		}
	}
	h.mu.Lock()
	h.max = max(h.max, n)
	h.mu.Unlock()
}

func (h *replyCounter) reset() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := h.max
	h.max = 0
	return n
}

// TestDeepPageReadsOnlyThePage: with 100 000 jobs in one state, the last
// page of Inspector.List (of the queue, and of every queue within a time
// range only it has jobs in) is the right
// jobs and no Redis reply read for it holds more than a page's worth of
// entries: a page costs the same wherever it is, not the offset's worth of
// index entries.
func TestDeepPageReadsOnlyThePage(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	const n, batch = 100_000, 5_000
	var ids []string // in enqueue order: the index's order
	for b := 0; b < n; b += batch {
		ps := make([]jobs.Params, batch)
		for i := range ps {
			ps[i] = jobs.Params{Args: noteArgs{}, Options: []jobs.Option{jobs.Queue("deep"), jobs.OperationID(fmt.Sprintf("op-%06d", b+i))}}
		}
		res, err := c.EnqueueMany(ctx, ps)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			ids = append(ids, r.JobID)
		}
	}
	if _, err := c.Enqueue(ctx, noteArgs{}, jobs.Queue("other"), jobs.Delay(48*time.Hour)); err != nil {
		t.Fatal(err)
	}

	hooked := redis.NewClient(rdb.Options())
	defer hooked.Close()
	counter := &replyCounter{}
	hooked.AddHook(counter)
	in := jobs.NewInspector(hooked, jobs.Config{Namespace: ns})
	const limit = 50
	bound := 4 * limit
	for _, q := range []string{"deep", ""} {
		counter.reset()
		// every queue's list, up to a time before the other queue's job
		p := jobs.ListParams{State: jobs.Pending, Queue: q, To: time.Now().Add(24 * time.Hour), Offset: n - limit, Limit: limit}
		page, err := in.List(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if got := counter.reset(); got > bound {
			t.Errorf("queue %q: a page of %d at offset %d read a reply of %d entries, want at most %d", q, limit, n-limit, got, bound)
		}
		if want := int64(n); page.Total != want {
			t.Errorf("queue %q: total %d, want %d", q, page.Total, want)
		}
		var got []string
		for _, j := range page.Jobs {
			got = append(got, j.ID)
		}
		if want := ids[n-limit:]; !slices.Equal(got, want) {
			t.Errorf("queue %q: last page %v, want %v", q, got, want)
		}
	}
	// newest first, the last page holds the oldest jobs
	page, err := in.List(ctx, jobs.ListParams{State: jobs.Pending, Queue: "deep", Desc: true, Offset: n - limit, Limit: limit})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, j := range page.Jobs {
		got = append(got, j.ID)
	}
	slices.Sort(got)
	if want := ids[:limit]; !slices.Equal(got, want) {
		t.Errorf("newest first: last page %v, want %v", got, want)
	}
}
