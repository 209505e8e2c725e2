package dashboard_test

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// heldArgs lease a named resource, so an attempt has a fence token too
// (in its history).
type heldArgs struct {
	N int `json:"n"`
}

func (heldArgs) Kind() string       { return "held" }
func (a heldArgs) Resource() string { return "acct-held" }

// pairs calls fn with every JSON object in v, at any depth.
func pairs(v any, fn func(map[string]any)) {
	switch t := v.(type) {
	case map[string]any:
		fn(t)
		for _, e := range t {
			pairs(e, fn)
		}
	case []any:
		for _, e := range t {
			pairs(e, fn)
		}
	}
}

// TestNoTokenBesideItsOwner: an attempt's token (and its resource's fence
// token) paired with its owner (the worker id; the fence owner is
// <worker>/<job>) is a credential, and so is the maintenance leader's
// token with the leader's name. While a real pool runs a job, no object
// of the API's answers (the job, its attempts and history, the lists, the
// stuck jobs, the overview's and the pools' leader) names the worker
// beside one of those tokens.
func TestNoTokenBesideItsOwner(t *testing.T) {
	f := newFixture(t)
	const workerID = "pool-credential-7"
	p, err := worker.NewPool(f.rdb, worker.Config{
		Jobs:            jobs.Config{Namespace: f.ns},
		WorkerID:        workerID,
		LeaseTTL:        10 * time.Second,
		ShutdownTimeout: 5 * time.Second,
		Logger:          slog.New(slog.DiscardHandler),
	})
	must(t, err)
	release := make(chan struct{})
	must(t, worker.Register(p, jobs.WorkFunc[heldArgs](func(ctx context.Context, _ *jobs.Job[heldArgs]) error {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	})))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		close(release)
		cancel()
		<-done
	})
	id := f.enqueue(heldArgs{N: 1})
	rec := jobstest.WaitState(t, f.ledger, "default", id, jobs.Running)
	if rec.Token == 0 {
		t.Fatalf("running job without its token: %+v", rec)
	}
	// Wait for the maintenance leader, so the overview names one.
	deadline := time.Now().Add(30 * time.Second)
	for {
		l, err := f.insp.Leader(context.Background())
		must(t, err)
		if l != nil && l.Token > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no maintenance leader")
		}
		time.Sleep(20 * time.Millisecond)
	}
	l, err := f.insp.Leader(context.Background())
	must(t, err)
	tokens := []string{rec.Token.String(), l.Token.String()}
	hist, err := f.insp.History(context.Background(), "default", id)
	must(t, err)
	for _, e := range hist {
		if e.Fence != "" {
			tokens = append(tokens, e.Fence)
		}
	}

	h := f.handler(dashboard.Options{})
	for _, path := range []string{
		"/api/jobs/default/" + id,
		"/api/jobs/default/" + id + "?history=1",
		"/api/jobs?state=running&history=1",
		"/api/stuck?margin_ms=3600000",
		"/api/overview",
		"/api/pools",
	} {
		var v any
		getJSON(t, h, path, &v)
		pairs(v, func(obj map[string]any) {
			names, tok := false, ""
			for _, val := range obj {
				s, _ := val.(string)
				names = names || strings.HasPrefix(s, workerID)
				if slices.Contains(tokens, s) {
					tok = s
				}
			}
			if names && tok != "" {
				t.Errorf("GET %s names worker %s beside token %s: %v", path, workerID, tok, obj)
			}
		})
	}
	// The job's page still shows its token, which operator actions send back.
	var d struct {
		Job struct {
			Token string `json:"token"`
		} `json:"job"`
	}
	getJSON(t, h, "/api/jobs/default/"+id, &d)
	if d.Job.Token != rec.Token.String() {
		t.Fatalf("job token %q, want %s", d.Job.Token, rec.Token)
	}
}
