package scriptbatch_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/scriptbatch"
)

// incrCalls returns n calls of incr, each on a key of its own, echoing
// its index.
func incrCalls(n int) []scriptbatch.Call {
	calls := make([]scriptbatch.Call, n)
	for i := range calls {
		calls[i] = scriptbatch.Call{Script: incr, Keys: []string{fmt.Sprintf("k%d", i)}, Args: []any{i}}
	}
	return calls
}

// checkReplies checks that every call's reply is its own index, and that
// each call ran once.
func checkReplies(t *testing.T, ctx context.Context, srv *redistest.Server, calls []scriptbatch.Call, got []string) {
	t.Helper()
	for i := range calls {
		if got[i] != fmt.Sprint(i) {
			t.Fatalf("reply %d = %q, want %q (replies out of order?)", i, got[i], fmt.Sprint(i))
		}
		if n, _ := srv.Client().Get(ctx, calls[i].Keys[0]).Int(); n != 1 {
			t.Fatalf("call %d ran %d times", i, n)
		}
	}
}

// TestRunAllSendsItsCallsInOnePipeline: calls made together go out as one
// pipeline, on a free slot or, when the budget is in flight, queued
// together; each caller gets its own call's reply.
func TestRunAllSendsItsCallsInOnePipeline(t *testing.T) {
	ctx := context.Background()
	for _, busy := range []bool{false, true} {
		t.Run(fmt.Sprintf("busy=%v", busy), func(t *testing.T) {
			srv := redistest.Start(t, redistest.Options{})
			rdb := client(t, srv)
			if err := incr.Load(ctx, rdb).Err(); err != nil {
				t.Fatal(err)
			}
			hook := &pipeSizes{}
			rdb.AddHook(hook)
			b := scriptbatch.New(rdb, one)
			direct, queued := scriptbatch.InitHooks(b, t)
			const n = 5
			calls := incrCalls(n)
			type result struct {
				replies []string
				err     error
			}
			out := make(chan result, 1)
			run := func() {
				var r result
				for _, cmd := range b.RunAll(ctx, calls) {
					s, err := cmd.Text()
					r.replies = append(r.replies, s)
					if err != nil && r.err == nil {
						r.err = err
					}
				}
				out <- r
			}
			if busy {
				resume, held := holdInFlight(t, ctx, b, srv, direct)
				go run()
				queued.WaitOrTimeout()
				resume()
				if err := <-held; err != nil {
					t.Fatal(err)
				}
			} else {
				go run()
			}
			r := <-out
			if r.err != nil {
				t.Fatal(r.err)
			}
			checkReplies(t, ctx, srv, calls, r.replies)
			if l := hook.largest(); l != n {
				t.Fatalf("pipelines %v: want the %d calls in one", hook.sizes, n)
			}
		})
	}
}
