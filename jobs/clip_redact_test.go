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

// longNameArgs build a name from padding and their sensitive token; Bad
// picks which name (resource, group, kind, or a limit's or rate's name), and Pad how
// many bytes come before the token, so that the 64-byte cut of a refused
// name's quote falls inside the token.
type longNameArgs struct {
	Token string `json:"token" fencedq:"sensitive"`
	Bad   string `json:"bad"`
	Pad   int    `json:"pad"`
}

func (a longNameArgs) name() string { return strings.Repeat("p", a.Pad) + a.Token }

func (a longNameArgs) Kind() string {
	if a.Bad == "kind" {
		return a.name() + " "
	}
	return "long_name_args"
}

func (a longNameArgs) Resource() string {
	if a.Bad == "resource" {
		return a.name() + "{"
	}
	return "acct"
}

func (a longNameArgs) Limit() (string, int) {
	if a.Bad == "limit" {
		return a.name() + ":x", 0 // refused for its max, named by its name
	}
	return "", 0
}

func (a longNameArgs) RateLimit() (string, int, time.Duration) {
	if a.Bad == "rate" {
		return a.name() + ":x", 1, 0 // refused for its period
	}
	return "", 0, 0
}

func (a longNameArgs) Group() string {
	if a.Bad == "group" {
		return a.name() + " "
	}
	return ""
}

// TestRefusedLongNameHidesTheCutToken: a refused name built from a
// sensitive value is quoted in the error cut to 64 bytes; the cut may fall
// inside the value, and no part of it is shown: the name is redacted whole
// before it is cut (so the cut may fall inside the marker).
func TestRefusedLongNameHidesTheCutToken(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	const token = "tok-Zq8vK3mW9xR2pL7n"
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	for _, bad := range []string{"resource", "group", "kind", "limit", "rate"} {
		for _, pad := range []int{0, 50, 60, 61} { // the cut after 64, 14, 4 and 3 of the token's bytes
			args := longNameArgs{Token: token, Bad: bad, Pad: pad}
			errs := map[string]error{}
			_, errs["Enqueue"] = c.Enqueue(ctx, args)
			_, errs["EnqueueMany"] = c.EnqueueMany(ctx, []jobs.Params{{Args: args}})
			_, errs["Prepare"] = jobs.Prepare(args)
			for call, err := range errs {
				switch {
				case !errors.Is(err, jobs.ErrInvalid):
					t.Errorf("%s, pad %d, %s: err %v, want ErrInvalid", bad, pad, call, err)
				case strings.Contains(err.Error(), token[:3]):
					t.Errorf("%s, pad %d, %s: the error quotes part of the token: %q", bad, pad, call, err)
				case !strings.Contains(err.Error(), jobs.Redacted[:3]): // the cut may fall inside the marker too
					t.Errorf("%s, pad %d, %s: %q does not show the token redacted", bad, pad, call, err)
				}
			}
		}
	}
	if keys, err := rdb.Keys(ctx, ns+":*").Result(); err != nil || len(keys) != 0 {
		t.Fatalf("refused enqueues wrote %v (%v)", keys, err)
	}
}
