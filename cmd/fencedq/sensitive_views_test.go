package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/internal/syncbuf"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
	"github.com/fencedq/fencedq/workflow"
)

// vaultSecret is the marker every view is searched for.
const vaultSecret = "vault-marker-5f3a9c1e"

type vaultArgs struct {
	Owner  string `json:"owner"`
	Mode   string `json:"mode"`
	Secret string `json:"secret" fencedq:"sensitive"`
}

func (vaultArgs) Kind() string { return "vault" }

type vaultOutput struct {
	Ref    string `json:"ref"`
	Secret string `json:"secret" fencedq:"sensitive"`
}

type vaultWorker struct{ flowRuns *atomic.Int32 }

func (w vaultWorker) Work(ctx context.Context, j *jobs.Job[vaultArgs]) error {
	a := j.Args
	if a.Mode == "ok" {
		return jobs.RecordOutput(ctx, vaultOutput{Ref: "r-1", Secret: a.Secret})
	}
	switch w.flowRuns.Add(1) {
	case 1: // a failure, retried
		return fmt.Errorf("vault %s refused the write", a.Secret)
	case 2: // an output, then an unknown outcome
		if err := jobs.RecordOutput(ctx, vaultOutput{Ref: "r-2", Secret: a.Secret}); err != nil {
			return err
		}
		return jobs.Unknown(fmt.Errorf("vault %s timed out", a.Secret))
	default: // re-run by an operator: dead
		panic("vault " + a.Secret + " is gone")
	}
}

func (vaultWorker) Reconcile(_ context.Context, j *jobs.Job[vaultArgs]) (jobs.Verdict, error) {
	return jobs.CannotTell, fmt.Errorf("lookup of %s failed", j.Args.Secret)
}

// TestSensitiveValueInNoView drives a job with a sensitive field through a
// failure, a retry, an uncertain outcome, review, an operator's re-run and
// death, plus a workflow whose steps record outputs, and searches every
// view for the sensitive value: the pool's and client's logs at debug
// level, the CLI's text and JSON, and every GET of the dashboard's API.
func TestSensitiveValueInNoView(t *testing.T) {
	e := newOperatorEnv(t)
	ctx := context.Background()
	logs := &syncbuf.Buffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	rdb := e.ledger.Redis()
	c := jobs.NewClient(rdb, jobs.Config{Namespace: e.ns, Logger: logger})
	t.Cleanup(func() { _ = c.Close() })

	p, err := worker.NewPool(rdb, worker.Config{
		Jobs:            jobs.Config{Namespace: e.ns},
		Concurrency:     2,
		LeaseTTL:        time.Second,
		HandlerTimeout:  5 * time.Second,
		ShutdownTimeout: 5 * time.Second,
		RetryDelay:      func(int) time.Duration { return 10 * time.Millisecond },
		Logger:          logger,
		Maintenance:     worker.MaintenanceConfig{Interval: 50 * time.Millisecond, MaxReconcileTries: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := worker.Register(p, jobs.Worker[vaultArgs](vaultWorker{flowRuns: new(atomic.Int32)})); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(runCtx) }()
	var stopped error
	shutdown := sync.OnceFunc(func() {
		stop()
		if stopped = <-done; stopped != nil && !errors.Is(stopped, context.Canceled) {
			t.Errorf("pool: %v", stopped)
		}
	})
	t.Cleanup(shutdown)

	res, err := c.Enqueue(ctx, vaultArgs{Owner: "ada", Mode: "flow", Secret: vaultSecret}, jobs.MaxRetries(1), jobs.OperationID("vault-flow"))
	if err != nil {
		t.Fatal(err)
	}
	id := res.JobID
	wf, err := workflow.Enqueue(ctx, c, workflow.New("vaults").
		Add("first", vaultArgs{Owner: "ada", Mode: "ok", Secret: vaultSecret}).
		Add("second", vaultArgs{Owner: "bob", Mode: "ok", Secret: vaultSecret}, workflow.After("first")))
	if err != nil {
		t.Fatal(err)
	}
	jobstest.WaitState(t, e.ledger, "default", id, jobs.Review)
	if code, _, errOut := e.cli("resolve", "--job", id, "--decision", "rerun", "--actor", "alice", "--note", "try again", "--unfenced"); code != 0 {
		t.Fatalf("resolve: %d %s", code, errOut)
	}
	jobstest.WaitState(t, e.ledger, "default", id, jobs.Dead)
	for _, s := range wf.Steps {
		jobstest.WaitState(t, e.ledger, s.Queue, s.JobID, jobs.Succeeded)
	}

	check := func(what, text string) {
		t.Helper()
		if strings.Contains(text, vaultSecret) {
			t.Errorf("%s shows the sensitive value:\n%s", what, text)
		}
	}
	views := [][]string{
		{"inspect", "--job", id}, {"inspect", "--job", id, "--json"},
		{"inspect", "--op", "vault-flow"}, {"inspect", "--op", "vault-flow", "--json"},
		{"workflow", "inspect"}, {"workflow", "inspect", "--json"},
		{"workflow", "inspect", "--id", wf.ID}, {"workflow", "inspect", "--id", wf.ID, "--json"},
		{"queues"}, {"queues", "--json"},
	}
	for _, st := range []string{"dead", "succeeded"} {
		views = append(views, []string{"inspect", "--state", st}, []string{"inspect", "--state", st, "--json"})
	}
	for _, s := range wf.Steps {
		views = append(views, []string{"inspect", "--job", s.JobID}, []string{"inspect", "--job", s.JobID, "--json"})
	}
	for _, v := range views {
		code, out, errOut := e.cli(v...)
		if code != 0 {
			t.Errorf("%v: %d %s", v, code, errOut)
		}
		check(fmt.Sprint(v), out+errOut)
	}

	h, err := dashboard.New(c.Inspector(), c, dashboard.Options{})
	if err != nil {
		t.Fatal(err)
	}
	paths := []string{"/", "/api/overview", "/api/jobs/default/" + id, "/api/events", "/api/stuck", "/api/rewinds",
		"/api/workflows", "/api/workflows?id=" + wf.ID, "/api/search?q=vault-flow", "/api/pools", "/api/limits", "/api/schedules"}
	for _, st := range []string{"dead", "succeeded", "review", "pending"} {
		paths = append(paths, "/api/jobs?state="+st, "/api/jobs?state="+st+"&history=1")
	}
	for _, s := range wf.Steps {
		paths = append(paths, "/api/jobs/"+s.Queue+"/"+s.JobID)
	}
	for _, path := range paths {
		rr := httptest.NewRecorder()
		h.ServeHTTP(rr, httptest.NewRequest(http.MethodGet, path, nil))
		if rr.Code != http.StatusOK {
			t.Errorf("GET %s: %d %s", path, rr.Code, rr.Body)
		}
		body, _ := io.ReadAll(rr.Body)
		check("GET "+path, string(body))
	}
	shutdown()
	check("the logs", logs.String())
}
