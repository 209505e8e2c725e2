package redisfence_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fence/redisfence"
	"github.com/fencedq/fencedq/internal/redistest"
)

// An Apply that meets its operation pending under a Guard is refused
// with fence.ErrInProgress, whose text names the pending write's token but
// not its owner: the two together authorise writes as the Guard's holder.
func TestInProgressNamesNoHolder(t *testing.T) {
	c := redistest.Start(t, redistest.Options{}).Client()
	ctx := t.Context()
	s := newStore(t, c, redisfence.Config{})
	holder := fz("acct:1", 8231234567, "holder-owner", "op-1")
	err := s.Guard(ctx, holder, func(context.Context) error {
		err := s.Apply(ctx, fz("acct:1", 9231234567, "next-owner", "op-1"))
		if !errors.Is(err, fence.ErrInProgress) {
			t.Fatalf("Apply of a guarded operation: %v, want ErrInProgress", err)
		}
		if text := err.Error(); strings.Contains(text, holder.Token.String()) && strings.Contains(text, holder.Owner) {
			t.Errorf("in-progress refusal names the holder's token and owner: %s", text)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
