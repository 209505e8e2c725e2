package jobs

import (
	"context"
	"fmt"
	"strings"
)

// Resolve applies an operator's decision (DecideSucceeded, DecideRerun or
// DecideDead) to a job in review (or uncertain, or dead for a re-run), with
// who decided and why. A re-run gets a new delivery and, on its next
// attempt, a new and higher token, so the old attempt stays fenced out.
func (c *Client) Resolve(ctx context.Context, queue, id string, d Decision, actor, note string) (*Record, error) {
	switch d {
	case DecideSucceeded, DecideRerun, DecideDead:
	default:
		return nil, invalid("an operator decides succeeded, rerun or dead, not %q", d)
	}
	actor = strings.TrimSpace(actor)
	if actor == "" {
		return nil, invalid("a resolution needs the operator's name")
	}
	if len(note) > 2000 {
		return nil, invalid("note longer than 2000 bytes")
	}
	rec, err := c.ledger.Get(ctx, queue, id)
	if err != nil {
		return nil, err
	}
	from := []State{Review, Uncertain}
	if d == DecideRerun {
		from = append(from, Dead)
	}
	_, task, err := c.ledger.Resolve(ctx, rec, Resolution{From: from, Decision: d, Actor: "operator:" + actor, Note: note})
	if err != nil {
		return nil, err
	}
	rec, err = c.ledger.Get(ctx, queue, id)
	if err != nil {
		return nil, err
	}
	if d == DecideRerun {
		if rec.Task != task {
			return rec, fmt.Errorf("jobs: re-run of %s raced with another decision", id)
		}
		if err := c.Dispatch(ctx, rec); err != nil {
			return rec, err
		}
	}
	return rec, nil
}
