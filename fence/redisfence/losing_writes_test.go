package redisfence_test

import (
	"errors"
	"testing"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fence/redisfence"
	"github.com/fencedq/fencedq/internal/redistest"
)

// A stored mark is as durable as the Redis that holds it: with
// append-only persistence (appendfsync always) it survives a restart and
// the zombie's lower token is still refused; without persistence the
// restart loses it, and the same lower token is accepted.
func TestMarkSurvivesWhatRedisSurvives(t *testing.T) {
	for _, tc := range []struct {
		name    string
		aof     bool
		refused bool
	}{
		{"aof", true, true},
		{"no persistence", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			srv := redistest.Start(t, redistest.Options{AOF: tc.aof})
			c := srv.Client()
			s := newStore(t, c, redisfence.Config{})
			r := "acct:1"
			if err := s.Apply(ctx, fz(r, 10, "live", "op-live"), redisfence.Set(s.DataKey(r, "v"), "live")); err != nil {
				t.Fatal(err)
			}
			srv.Restart()
			err := s.Apply(ctx, fz(r, 5, "zombie", "op-zombie"), redisfence.Set(s.DataKey(r, "v"), "zombie"))
			if got := errors.Is(err, fence.ErrStale); got != tc.refused {
				t.Fatalf("zombie's write after a restart: %v, want refused %v", err, tc.refused)
			}
		})
	}
}
