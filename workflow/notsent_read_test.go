package workflow_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/workflow"
)

// TestWorkflowEnqueueFailedReadIsNotSent: a workflow enqueue whose reads
// before its first write fail (a timeout reading whether its operation id
// was enqueued before, or whether its steps' operation ids name other
// jobs) wrote nothing of the workflow: it fails with jobs.ErrNotSent and
// the read's error, not jobs.ErrEnqueueUnknown, and enqueueing it again
// writes it once.
func TestWorkflowEnqueueFailedReadIsNotSent(t *testing.T) {
	for _, c := range []struct{ name, match string }{
		{"operation id lookup", "wfop:order:9"},
		{"step operation ids", ":op:order:9/a"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			srv := redistest.Start(t, redistest.Options{})
			p := redistest.StartProxy(t, srv.Addr)
			// no retry of the timed-out read behind the caller's back
			rdb := p.Client(&redis.Options{ReadTimeout: 300 * time.Millisecond, MaxRetries: -1})
			ns := redistest.Namespace(t)
			cl := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
			w := workflow.New("order").Add("a", Step{Name: "a"}).Add("b", Step{Name: "b"}, workflow.After("a"))
			// the function library loaded, and the queue registered, first
			if _, err := workflow.Enqueue(ctx, cl, w, workflow.OperationID("order:1")); err != nil {
				t.Fatal(err)
			}
			held := p.HoldReply(c.match)
			res, err := workflow.Enqueue(ctx, cl, w, workflow.OperationID("order:9"))
			<-held
			var ne net.Error
			if !errors.Is(err, jobs.ErrNotSent) || errors.Is(err, jobs.ErrEnqueueUnknown) || !errors.As(err, &ne) || !ne.Timeout() {
				t.Fatalf("enqueue whose read timed out: %+v, %v; want jobs.ErrNotSent with the timeout, not an unknown outcome", res, err)
			}
			res, err = workflow.Enqueue(ctx, cl, w, workflow.OperationID("order:9"))
			if err != nil || res.Deduplicated {
				t.Fatalf("enqueue again: %+v, %v; want the workflow written now, nothing before", res, err)
			}
		})
	}
}
