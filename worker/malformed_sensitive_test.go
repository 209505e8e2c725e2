package worker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

type cardArgs struct {
	Holder string    `json:"holder"`
	Card   int64     `json:"card" fencedq:"sensitive"`
	Born   time.Time `json:"born" fencedq:"sensitive"`
}

func (cardArgs) Kind() string { return "card" }

// TestMalformedSensitiveArgsAreNotQuoted: args that do not decode into a
// kind with sensitive fields (a record from an older deploy, or written by
// hand) end dead as malformed, and neither the job's error, shown to
// operators, nor the logs quote the sensitive value that failed to decode.
func TestMalformedSensitiveArgsAreNotQuoted(t *testing.T) {
	e := newEnv(t)
	p := e.pool(e.config())
	if err := worker.Register(p, jobs.WorkFunc[cardArgs](func(ctx context.Context, j *jobs.Job[cardArgs]) error { return nil })); err != nil {
		t.Fatal(err)
	}
	e.start(p)
	ctx := context.Background()
	payloads := map[string]string{
		"number": `{"holder":"ada","card":4242424242424242.5}`,
		"time":   `{"holder":"ada","born":"12/31/1990"}`,
	}
	for id, payload := range payloads {
		e.rdb.HSet(ctx, e.ledger.JobKey("default", id), "kind", "card", "payload", payload, "args", `{"card":"[redacted]"}`,
			"state", "pending", "token", "0", "attempts", "0", "max_retries", "3", "created", "1")
		e.rdb.ZAdd(ctx, e.ledger.StateKey("default", jobs.Pending), redis.Z{Score: 1, Member: id})
	}
	for id := range payloads {
		rec := jobstest.WaitState(t, e.ledger, "default", id, jobs.Dead)
		if rec.Reason != "malformed payload" || !strings.Contains(rec.Error, "card") {
			t.Errorf("%s: reason %q, error %q: want malformed, naming the kind", id, rec.Reason, rec.Error)
		}
		for _, secret := range []string{"4242424242424242", "12/31/1990"} {
			if strings.Contains(rec.Error, secret) {
				t.Errorf("%s: the job's error %q quotes the sensitive value", id, rec.Error)
			}
		}
	}
	for _, secret := range []string{"4242424242424242", "12/31/1990"} {
		if strings.Contains(e.logs.String(), secret) {
			t.Errorf("the logs quote the sensitive value %s", secret)
		}
	}
}
