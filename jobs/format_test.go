package jobs_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

type cardArgs struct {
	Account string `json:"account"`
	Card    string `json:"card" fencedq:"sensitive"`
}

func (cardArgs) Kind() string { return "card" }

const cardSecret = "4111-1111-1111-1111"

// shown formats v every way a caller or a logger may: %v, %+v, %s, and
// slog's text and JSON handlers.
func shown(v any) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%v\n%+v\n%s\n", v, v, v)
	slog.New(slog.NewTextHandler(&b, nil)).Info("x", "v", v)
	slog.New(slog.NewJSONHandler(&b, nil)).Info("x", "v", v)
	return b.String()
}

// TestFormattedValuesOmitSensitiveArgs: the public values that carry a
// job's args (an enqueue request seen by middleware, Params, Prepared, a
// Job, a Record read back) never show a sensitive field when formatted
// or logged.
func TestFormattedValuesOmitSensitiveArgs(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	args := cardArgs{Account: "acme", Card: cardSecret}
	var out []string
	mw := func(next jobs.EnqueueFunc) jobs.EnqueueFunc {
		return func(ctx context.Context, reqs []*jobs.EnqueueRequest) ([]*jobs.Result, error) {
			for _, r := range reqs {
				out = append(out, shown(r), shown(*r))
			}
			return next(ctx, reqs)
		}
	}
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns, EnqueueMiddleware: []jobs.EnqueueMiddleware{mw}})
	res, err := c.EnqueueMany(ctx, []jobs.Params{{Args: args}})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := jobs.NewInspector(rdb, jobs.Config{Namespace: ns}).Get(ctx, res[0].Queue, res[0].JobID)
	if err != nil {
		t.Fatal(err)
	}
	p, err := jobs.Prepare(args)
	if err != nil {
		t.Fatal(err)
	}
	job := jobs.Job[cardArgs]{ID: "j1", Kind: "card", Args: args}
	out = append(out, shown(jobs.Params{Args: args}), shown(p), shown(&p), shown(job), shown(&job), shown(rec), shown(*rec))
	if len(out) != 9 {
		t.Fatalf("the middleware saw %d requests, want 1", len(out)-7)
	}
	for i, s := range out {
		if strings.Contains(s, cardSecret) {
			t.Errorf("value %d shows the sensitive field:\n%s", i, s)
		}
	}
	if !strings.Contains(out[0], "card") {
		t.Errorf("the request's text does not name its kind:\n%s", out[0])
	}
}
