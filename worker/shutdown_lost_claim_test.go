package worker_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// TestShutdownDuringAClaimWhoseReplyIsLost: a pool stopped while a claim
// is in flight whose reply never comes (Redis ran it: its jobs are
// running in the ledger, under tokens the pool never read) cannot put
// those jobs back nor name them; it says so instead of stopping as if
// nothing were left: a warning naming the queue, and Run's error (a
// ShutdownError) holding the queue with UnsettledClaimUnknown. The jobs
// come back when their leases expire, uncertain.
func TestShutdownDuringAClaimWhoseReplyIsLost(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	p := redistest.StartProxy(t, srv.Addr)
	ns := redistest.Namespace(t)
	e := newEnvOn(t, p.Client(nil), ns)

	e.enqueue(lostClaimArgs{N: 1}, jobs.Queue("stopclaim"))
	cfg := e.config()
	cfg.Queues = map[string]int{"stopclaim": 1}
	cfg.Maintenance.Disabled = true
	pool := e.pool(cfg)
	if err := worker.Register(pool, jobs.WorkFunc[lostClaimArgs](func(context.Context, *jobs.Job[lostClaimArgs]) error {
		return errors.New("the handler must not run: the pool never read the claim")
	})); err != nil {
		t.Fatal(err)
	}
	held := p.HoldReply("_claim\r\n", "stopclaim")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- pool.Run(ctx) }()
	select {
	case <-held:
	case <-time.After(testsignal.Timeout()):
		cancel()
		t.Fatal("the claim was not sent")
	}
	cancel()
	var err error
	select {
	case err = <-done:
	case <-time.After(testsignal.Timeout()):
		t.Fatal("the pool did not stop")
	}
	var se *worker.ShutdownError
	if !errors.As(err, &se) || !errors.Is(err, worker.ErrUnsettled) {
		t.Fatalf("Run: %v, want a ShutdownError for the claim whose outcome is unknown", err)
	}
	found := false
	for _, u := range se.Jobs {
		found = found || u.Queue == "stopclaim" && u.Reason == worker.UnsettledClaimUnknown
	}
	if !found {
		t.Errorf("Run's error %v does not name queue stopclaim's claim", err)
	}
	logged := false
	for _, line := range strings.Split(e.logs.String(), "\n") {
		logged = logged || strings.Contains(line, `"level":"WARN"`) && strings.Contains(line, `"queue":"stopclaim"`) &&
			strings.Contains(line, "leases expire")
	}
	if !logged {
		t.Errorf("no warning names the claim of queue stopclaim; logs:\n%s", tail(e.logs.String(), 10))
	}
}
