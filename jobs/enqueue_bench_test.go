package jobs_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

type benchArgs struct {
	N int `json:"n"`
}

func (benchArgs) Kind() string { return "bench" }

// BenchmarkEnqueueParallel enqueues from 4 goroutines per CPU, with and
// without an operation id (go test -bench EnqueueParallel -benchmem).
func BenchmarkEnqueueParallel(b *testing.B) {
	srv := redistest.Start(b, redistest.Options{})
	for _, withOp := range []bool{false, true} {
		name := "plain"
		if withOp {
			name = "operation_id"
		}
		b.Run(name, func(b *testing.B) {
			c := jobs.NewClient(srv.Client(), jobs.Config{Namespace: redistest.Namespace(b)})
			ctx := context.Background()
			b.ReportAllocs()
			b.SetParallelism(4)
			var n atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := n.Add(1)
					var opts []jobs.Option
					if withOp {
						opts = append(opts, jobs.OperationID("op-"+strconv.FormatInt(i, 10)))
					}
					if _, err := c.Enqueue(ctx, benchArgs{N: int(i)}, opts...); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
