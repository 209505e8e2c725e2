package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

const (
	secretCard = "4111111111111111"
	secretPIN  = 987654
)

type secretArgs struct {
	Holder string `json:"holder"`
	Mode   string `json:"mode"`
	Card   string `json:"card" fencedq:"sensitive"`
	PIN    int64  `json:"pin" fencedq:"sensitive"`
}

func (secretArgs) Kind() string { return "secret-card" }

// secretValidateFails makes Validate fail, once the jobs are enqueued.
var secretValidateFails atomic.Bool

func (a secretArgs) Validate() error {
	if a.Mode == "validate" && secretValidateFails.Load() {
		return fmt.Errorf("card %s with pin %d is refused", a.Card, a.PIN)
	}
	if a.Mode == "validate-panic" && secretValidateFails.Load() {
		panic(fmt.Errorf("card %s with pin %d cannot be checked", a.Card, a.PIN))
	}
	return nil
}

type secretWorker struct{}

func (secretWorker) Work(_ context.Context, j *jobs.Job[secretArgs]) error {
	a := j.Args
	switch a.Mode {
	case "error":
		return jobs.Permanent(fmt.Errorf("charge of card %s (pin %d) declined", a.Card, a.PIN))
	case "panic":
		panic(fmt.Sprintf("card %q, pin %d", a.Card, a.PIN))
	case "unknown", "reconcile-panic":
		return jobs.Unknown(fmt.Errorf("card %s: gateway timed out", a.Card))
	}
	return nil
}

func (secretWorker) Reconcile(_ context.Context, j *jobs.Job[secretArgs]) (jobs.Verdict, error) {
	if j.Args.Mode == "reconcile-panic" {
		panic(fmt.Errorf("lookup of pin %d", j.Args.PIN))
	}
	return jobs.CannotTell, fmt.Errorf("ledger lookup of card %s failed", j.Args.Card)
}

// TestSensitiveValuesStayOutOfErrorTexts: texts user code builds for a
// kind with sensitive fields (a Validate error or panic at attempt time,
// a handler's error, a panic, a Reconcile's error and panic) quote the
// sensitive values, and none of them reaches the job's record, its
// history, the pool's logs or the dashboard's API; the errors still steer
// the outcome (permanent: dead, unknown: uncertain then review).
func TestSensitiveValuesStayOutOfErrorTexts(t *testing.T) {
	e := newEnv(t)
	p := e.pool(e.config())
	if err := worker.Register(p, jobs.Worker[secretArgs](secretWorker{})); err != nil {
		t.Fatal(err)
	}
	want := map[string]jobs.State{"validate": jobs.Dead, "validate-panic": jobs.Dead, "error": jobs.Dead, "panic": jobs.Dead,
		"unknown": jobs.Review, "reconcile-panic": jobs.Review}
	ids := map[string]string{}
	for mode := range want {
		ids[mode] = e.enqueue(secretArgs{Holder: "ada", Mode: mode, Card: secretCard, PIN: secretPIN}, jobs.MaxRetries(0)).JobID
	}
	secretValidateFails.Store(true)
	t.Cleanup(func() { secretValidateFails.Store(false) })
	e.start(p)

	ctx := context.Background()
	h, err := dashboard.New(e.client.Inspector(), e.client, dashboard.Options{})
	if err != nil {
		t.Fatal(err)
	}
	secrets := []string{secretCard, fmt.Sprint(secretPIN)}
	check := func(what, text string) {
		t.Helper()
		for _, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("%s quotes the sensitive value %s:\n%s", what, s, text)
			}
		}
	}
	for mode, state := range want {
		id := ids[mode]
		rec := jobstest.WaitState(t, e.ledger, "default", id, state)
		if !strings.Contains(rec.Error, jobs.Redacted) {
			t.Errorf("%s: error %q: want the values replaced by %s", mode, rec.Error, jobs.Redacted)
		}
		fields, err := e.rdb.HGetAll(ctx, e.ledger.JobKey("default", id)).Result()
		if err != nil {
			t.Fatal(err)
		}
		delete(fields, "payload") // the raw args, for the handler only
		check(mode+": the job's record", fmt.Sprint(fields))
		hist, err := e.ledger.History(ctx, "default", id)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(hist)
		check(mode+": the job's history", string(b))
		if state == jobs.Review && !strings.Contains(string(b), "Reconcile failed") {
			t.Errorf("%s: history %s: want Reconcile's failure", mode, b)
		}
		rr := httptest.NewRecorder()
		h.ServeHTTP(rr, httptest.NewRequest(http.MethodGet, "/api/jobs/default/"+id, nil))
		if rr.Code != http.StatusOK {
			t.Fatalf("dashboard: %d %s", rr.Code, rr.Body)
		}
		check(mode+": the dashboard's job", rr.Body.String())
	}
	for _, state := range []string{"dead", "review"} {
		rr := httptest.NewRecorder()
		h.ServeHTTP(rr, httptest.NewRequest(http.MethodGet, "/api/jobs?state="+state+"&history=1", nil))
		check("the dashboard's "+state+" list", rr.Body.String())
	}
	check("the pool's logs", e.logs.String())
}
