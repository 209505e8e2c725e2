package worker_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fence/redisfence"
	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

type chargeArgs struct {
	Cents int `json:"cents"`
}

func (chargeArgs) Kind() string { return "charge" }

// TestAlreadyAppliedNamesTheJobThatApplied: one operation id enqueued on
// two queues makes two jobs (the ledger deduplicates per queue); the
// second finds its effect applied by the first, succeeds, and its record
// and history name the job and queue that applied it.
func TestAlreadyAppliedNamesTheJobThatApplied(t *testing.T) {
	e := newEnv(t)
	store, err := redisfence.New(e.rdb, redisfence.Config{Namespace: e.ns + ":store"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := e.config()
	cfg.Queues = map[string]int{"billing": 1, "billing-eu": 1}
	cfg.LeaseTTL = 5 * time.Second // not a lease-loss test: a loaded machine must not lose it
	p := e.pool(cfg)
	var applied []error
	done := make(chan error, 2)
	_ = worker.Register(p, jobs.WorkFunc[chargeArgs](func(ctx context.Context, j *jobs.Job[chargeArgs]) error {
		f, _ := fence.FromContext(ctx)
		err := store.Apply(ctx, f, redisfence.IncrBy(store.DataKey(f.Resource, "cents"), int64(j.Args.Cents)))
		done <- err
		return err
	}))
	e.start(p)
	first := e.enqueue(chargeArgs{Cents: 100}, jobs.Queue("billing"), jobs.OperationID("charge-42"))
	applied = append(applied, <-done)
	jobstest.WaitState(t, e.ledger, "billing", first.JobID, jobs.Succeeded)
	second := e.enqueue(chargeArgs{Cents: 100}, jobs.Queue("billing-eu"), jobs.OperationID("charge-42"))
	if second.Deduplicated || second.JobID == first.JobID {
		t.Fatalf("the second queue deduplicated the operation: %+v", second)
	}
	applied = append(applied, <-done)
	if applied[0] != nil || !errors.Is(applied[1], fence.ErrAlreadyApplied) {
		t.Fatalf("store answers %v", applied)
	}
	rec := jobstest.WaitState(t, e.ledger, "billing-eu", second.JobID, jobs.Succeeded)
	eff, ok, err := store.Applied(context.Background(), "charge-42")
	if err != nil || !ok {
		t.Fatalf("effect log: %+v, %v, %v", eff, ok, err)
	}
	want := fmt.Sprintf("effect already applied by job %s in queue billing (token %d on %s)", first.JobID, eff.Token, eff.Resource)
	if rec.Reason != want {
		t.Fatalf("reason %q, want %q", rec.Reason, want)
	}
	hist, err := e.ledger.History(context.Background(), "billing-eu", second.JobID)
	if err != nil {
		t.Fatal(err)
	}
	last := hist[len(hist)-1]
	if last.Event != "end" || last.Outcome != string(jobs.Succeeded) || last.Reason != rec.Reason {
		t.Fatalf("history ends with %+v, want the success with the reason", last)
	}
	// The applying fence's token and owner authorise writes as its
	// holder: no text of the job's record or history names both.
	texts := []string{rec.Error, rec.Reason}
	for _, h := range hist {
		texts = append(texts, h.Error, h.Reason, h.Note)
	}
	for _, text := range texts {
		if strings.Contains(text, eff.Token.String()) && strings.Contains(text, eff.Owner) {
			t.Errorf("%q names the applying fence's token %s and owner %s", text, eff.Token, eff.Owner)
		}
	}
	// The first job's record is the plain success.
	if r, _ := e.ledger.Get(context.Background(), "billing", first.JobID); r.Reason != "" {
		t.Fatalf("the applying job has reason %q", r.Reason)
	}
}
