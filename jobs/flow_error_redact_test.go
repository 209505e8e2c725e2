package jobs_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// cardKeyArgs build their limit, rate, resource and group from their
// sensitive card number; Bad picks the one that is invalid.
type cardKeyArgs struct {
	Card string `json:"card" fencedq:"sensitive"`
	Bad  string `json:"bad"`
}

func (cardKeyArgs) Kind() string { return "card_key_args" }

func (a cardKeyArgs) Limit() (string, int) {
	switch a.Bad {
	case "limit max":
		return "export:" + a.Card, 0
	case "limit unnamed":
		return a.Card, 0
	case "limit text":
		return "export:" + a.Card + "\n", 1
	}
	return "", 0
}

func (a cardKeyArgs) RateLimit() (string, int, time.Duration) {
	if a.Bad == "rate period" {
		return "api:" + a.Card, 1, 0
	}
	return "", 0, 0
}

func (a cardKeyArgs) Resource() string {
	if a.Bad == "resource" {
		return "acct:{" + a.Card + "}"
	}
	return "acct"
}

func (a cardKeyArgs) Group() string {
	if a.Bad == "group" {
		return "tenant " + a.Card
	}
	return ""
}

// TestFlowKeyRefusalsHideSensitiveValues: an enqueue refused for a limit,
// rate, resource or group built from the args' sensitive card number never
// quotes it: a limit or rate is named by its name (the key's part before
// its ':', "unnamed" for a key without one), other values are redacted;
// the error matches ErrInvalid and nothing is written.
func TestFlowKeyRefusalsHideSensitiveValues(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	const card = "4111111111111111"
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	for bad, want := range map[string]string{
		"limit max":     `limit "export"`,
		"limit unnamed": `limit (unnamed)`,
		"limit text":    `limit "export"`,
		"rate period":   `rate "api"`,
		"resource":      "resource",
		"group":         "group",
	} {
		args := cardKeyArgs{Card: card, Bad: bad}
		errs := map[string]error{}
		_, errs["Enqueue"] = c.Enqueue(ctx, args)
		_, errs["EnqueueMany"] = c.EnqueueMany(ctx, []jobs.Params{{Args: args}})
		_, errs["Prepare"] = jobs.Prepare(args)
		for call, err := range errs {
			switch {
			case !errors.Is(err, jobs.ErrInvalid):
				t.Errorf("%s, %s: err %v, want ErrInvalid", bad, call, err)
			case strings.Contains(err.Error(), card):
				t.Errorf("%s, %s: the error quotes the card number: %q", bad, call, err)
			case !strings.Contains(err.Error(), want):
				t.Errorf("%s, %s: %q does not say %s", bad, call, err, want)
			}
		}
	}
	if keys, err := rdb.Keys(ctx, ns+":*").Result(); err != nil || len(keys) != 0 {
		t.Fatalf("refused enqueues wrote %v (%v)", keys, err)
	}
}
