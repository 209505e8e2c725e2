package worker_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// TestJobViewOmitsArgs: a JobView formatted by middleware (%v, %+v, slog's
// text and JSON handlers) shows the job but never its args.
func TestJobViewOmitsArgs(t *testing.T) {
	e := newEnv(t)
	const secret = 4111111111111111
	shownc := make(chan string, 1)
	cfg := e.config()
	cfg.Middleware = []worker.Middleware{func(next worker.Handler) worker.Handler {
		return func(ctx context.Context, v worker.JobView) error {
			var b bytes.Buffer
			fmt.Fprintf(&b, "%v\n%+v\n%v\n", v, v, &v)
			slog.New(slog.NewTextHandler(&b, nil)).Info("x", "job", v)
			slog.New(slog.NewJSONHandler(&b, nil)).Info("x", "job", v)
			select {
			case shownc <- b.String():
			default:
			}
			return next(ctx, v)
		}
	}}
	p := e.pool(cfg)
	if err := worker.Register(p, jobs.WorkFunc[cardArgs](func(ctx context.Context, j *jobs.Job[cardArgs]) error { return nil })); err != nil {
		t.Fatal(err)
	}
	e.start(p)
	res := e.enqueue(cardArgs{Holder: "ada", Card: secret})
	jobstest.WaitState(t, e.ledger, res.Queue, res.JobID, jobs.Succeeded)
	s := <-shownc
	asBytes := strings.Trim(fmt.Sprint([]byte("4111111111111111")), "[]") // a payload printed as a byte slice
	if strings.Contains(s, "4111111111111111") || strings.Contains(s, asBytes) {
		t.Errorf("the JobView shows the sensitive arg:\n%s", s)
	}
	if !strings.Contains(s, res.JobID) {
		t.Errorf("the JobView does not show its job's id:\n%s", s)
	}
}

// TestJobViewOutcomeOfAZeroView: a middleware's own unit test hands it a
// JobView it made up (the zero value); its Outcome names what an error
// leads to by the rules that need no pool instead of panicking.
func TestJobViewOutcomeOfAZeroView(t *testing.T) {
	var v worker.JobView
	for err, want := range map[error]string{
		nil:                                 worker.OutcomeSucceeded,
		fmt.Errorf("busy"):                  worker.OutcomeRetry,
		jobs.Permanent(fmt.Errorf("no")):    worker.OutcomeDead,
		jobs.Unknown(fmt.Errorf("no idea")): worker.OutcomeUncertain,
	} {
		if got := v.Outcome(err); got != want {
			t.Errorf("Outcome(%v) = %s, want %s", err, got, want)
		}
	}
	next := worker.Handler(func(context.Context, worker.JobView) error { return nil })
	if got := v.Outcome(next(context.Background(), v)); got != worker.OutcomeSucceeded {
		t.Errorf("Outcome after a stub next: %s", got)
	}
}
