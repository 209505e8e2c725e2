package workflow_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/workflow"
)

// cardGroupArgs name a fair group built from their sensitive card number.
type cardGroupArgs struct {
	Card string `json:"card" fencedq:"sensitive"`
	Pad  int    `json:"pad"`
}

func (cardGroupArgs) Kind() string { return "card_group" }

func (a cardGroupArgs) Group() string { return strings.Repeat("p", a.Pad) + "card:" + a.Card }

// TestGroupedStepRefusalHidesSensitiveValues: a workflow step refused for
// its fair group quotes the group as an enqueue's refusal does: the args'
// sensitive values redacted (the whole group before its 64-byte cut), so
// neither Validate nor Enqueue returns the card number or a part of it;
// the error matches ErrInvalid and nothing is written.
func TestGroupedStepRefusalHidesSensitiveValues(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const card = "4111111111111111"
	for _, pad := range []int{0, 50} { // the group whole, and cut inside the card number
		w := workflow.New("x").Add("a", cardGroupArgs{Card: card, Pad: pad})
		errs := map[string]error{"Validate": w.Validate()}
		_, errs["Enqueue"] = workflow.Enqueue(ctx, e.client, w)
		for call, err := range errs {
			switch {
			case !errors.Is(err, jobs.ErrInvalid):
				t.Errorf("pad %d, %s: %v, want ErrInvalid", pad, call, err)
			case strings.Contains(err.Error(), card[:4]):
				t.Errorf("pad %d, %s: the error quotes the card number: %q", pad, call, err)
			case !strings.Contains(err.Error(), "fair group") || !strings.Contains(err.Error(), jobs.Redacted[:3]):
				t.Errorf("pad %d, %s: %q does not name the group redacted", pad, call, err)
			}
		}
	}
	if keys, _ := e.rdb.Keys(ctx, "*"+e.ns+"*").Result(); len(keys) != 0 {
		t.Fatalf("refused workflows wrote %v", keys)
	}
}
