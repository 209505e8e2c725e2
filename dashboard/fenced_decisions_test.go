package dashboard_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fence/redisfence"
	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// stallArgs is a job whose handler stalls (it ignores its context, as a
// paused process does) until the test wakes it, then writes through the
// store with its attempt's fence.
type stallArgs struct {
	N int `json:"n"`
}

func (stallArgs) Kind() string { return "dash_stall" }

// TestDashboardDecisionsFenceOutTheAttempt: two jobs' attempts stall and
// their leases expire, so both go to review. A dashboard built on a client
// given Config.Fencer answers a re-run, alone or in bulk, whose fence-out
// fails (the store unreachable) 503 not_fenced_out naming the store and
// saying nothing was decided (in bulk, each job listed so), and the jobs
// stay in review; a bulk re-run through the reachable store fences both
// attempts out before deciding, so each one's write when it wakes is
// refused as stale.
func TestDashboardDecisionsFenceOutTheAttempt(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	store, err := redisfence.New(rdb, redisfence.Config{Namespace: ns})
	must(t, err)
	started, resume, wrote := make(chan struct{}, 2), make(chan struct{}), make(chan error, 2)
	var wake sync.Once
	release := func() { wake.Do(func() { close(resume) }) }
	p, err := worker.NewPool(rdb, worker.Config{
		Jobs: jobs.Config{Namespace: ns}, Concurrency: 2, LeaseTTL: time.Second,
		HandlerTimeout: 5 * time.Second, ShutdownTimeout: time.Second, Logger: slog.New(slog.DiscardHandler),
		Maintenance: worker.MaintenanceConfig{Interval: 100 * time.Millisecond},
	})
	must(t, err)
	must(t, worker.Register(p, jobs.WorkFunc[stallArgs](func(ctx context.Context, _ *jobs.Job[stallArgs]) error {
		started <- struct{}{}
		<-resume
		f, _ := fence.FromContext(ctx)
		err := store.Apply(context.WithoutCancel(ctx), f, redisfence.Set("{"+f.Resource+"}:charged", "1"))
		wrote <- err
		return err
	})))
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(pctx) }()
	t.Cleanup(func() { release(); cancel(); <-done })

	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	t.Cleanup(func() { _ = c.Close() })
	l := ledger.New(rdb, ledger.Config{Namespace: ns})
	var ids []string
	for i := range 2 {
		res, err := c.Enqueue(ctx, stallArgs{N: i}, jobs.Timeout(100*time.Millisecond))
		must(t, err)
		ids = append(ids, res.JobID)
		select {
		case <-started:
		case <-time.After(testsignal.Timeout()):
			t.Fatal("the handler never started")
		}
	}
	var tokens []string
	for _, id := range ids {
		rec := jobstest.WaitState(t, l, jobs.DefaultQueue, id, jobs.Review)
		tokens = append(tokens, rec.Token.String())
	}
	_, err = c.Pause(ctx, jobs.DefaultQueue, "alice", "hold the re-runs")
	must(t, err)
	bulk := `{"action":"rerun","note":"no such charge","state":"review","jobs":[{"queue":"default","id":"` + ids[0] +
		`"},{"queue":"default","id":"` + ids[1] + `"}]}`
	var br struct {
		Done   int
		Failed []struct{ ID, Code, Error string }
	}

	// the store unreachable: nothing decided, and the answers say so
	down := jobs.NewClient(rdb, jobs.Config{Namespace: ns, Fencer: unreachableStore{}})
	t.Cleanup(func() { _ = down.Close() })
	h, err := dashboard.New(nil, down, dashboard.Options{Username: user, Password: pass, Logger: slog.New(slog.DiscardHandler)})
	must(t, err)
	const store503 = "Config.Fencer"
	res, b := act(t, h, "/api/jobs/default/"+ids[0]+"/resolve", `{"decision":"rerun","note":"no such charge","state":"review","token":"`+tokens[0]+`","runs":0}`)
	if res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), `"code":"not_fenced_out"`) ||
		!strings.Contains(string(b), store503) || !strings.Contains(string(b), "nothing was decided") ||
		strings.Contains(string(b), "may have been done") {
		t.Errorf("re-run with the store unreachable: %d %s (want 503 not_fenced_out naming %s, nothing decided)", res.StatusCode, b, store503)
	}
	res, b = act(t, h, "/api/bulk", bulk)
	if res.StatusCode != http.StatusOK || json.Unmarshal(b, &br) != nil || br.Done != 0 || len(br.Failed) != 2 {
		t.Fatalf("bulk re-run with the store unreachable: %d %s (want both jobs failed)", res.StatusCode, b)
	}
	for _, f := range br.Failed {
		if f.Code != "not_fenced_out" || !strings.Contains(f.Error, store503) || !strings.Contains(f.Error, "nothing was decided") {
			t.Errorf("bulk re-run with the store unreachable, job %s: %s %q (want not_fenced_out naming %s, nothing decided)", f.ID, f.Code, f.Error, store503)
		}
	}
	for _, id := range ids {
		if st := stateOf(t, c, jobs.DefaultQueue, id); st != jobs.Review {
			t.Errorf("job %s is %s after re-runs whose fence-out failed, want review", id, st)
		}
	}

	// the store reachable: the bulk re-run fences both attempts out first
	op := jobs.NewClient(rdb, jobs.Config{Namespace: ns, Fencer: store})
	t.Cleanup(func() { _ = op.Close() })
	h, err = dashboard.New(nil, op, dashboard.Options{Username: user, Password: pass, Logger: slog.New(slog.DiscardHandler)})
	must(t, err)
	br.Failed = nil
	res, b = act(t, h, "/api/bulk", bulk)
	if res.StatusCode != http.StatusOK || json.Unmarshal(b, &br) != nil || br.Done != 2 || len(br.Failed) != 0 {
		t.Fatalf("bulk re-run: %d %s (want both done)", res.StatusCode, b)
	}
	release()
	for range ids {
		select {
		case err := <-wrote:
			if !errors.Is(err, fence.ErrStale) {
				t.Errorf("a stalled attempt's write after the bulk re-run: %v, want fence.ErrStale", err)
			}
		case <-time.After(testsignal.Timeout()):
			t.Fatal("a stalled attempt never wrote")
		}
	}
}

var errStoreUnreachable = errors.New("store unreachable")

// unreachableStore is a store that cannot be reached.
type unreachableStore struct{}

func (unreachableStore) FenceOnAcquire(context.Context, fence.Fence) error {
	return errStoreUnreachable
}
