package redisfence_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fence/redisfence"
	"github.com/fencedq/fencedq/internal/redistest"
)

// A fence authorises writes to its own resource only: a key tagged with
// another resource is refused even when both resources share a hash slot,
// and so is a key whose slot matches by hashing whole, without the tag.
func TestOpsOfAnotherResourceInTheSlotRefused(t *testing.T) {
	c := redistest.Start(t, redistest.Options{}).Client()
	ctx := t.Context()
	s := newStore(t, c, redisfence.Config{})
	mine := "acct:1"
	other := ""
	for i := 2; other == ""; i++ {
		if r := "acct:" + strconv.Itoa(i); redisfence.Slot(r) == redisfence.Slot(mine) {
			other = r
		}
	}
	untagged := ""
	for i := 0; untagged == ""; i++ {
		if k := "plain:" + strconv.Itoa(i); redisfence.Slot(k) == redisfence.Slot(mine) {
			untagged = k
		}
	}
	n0, _ := redistest.CountKeys(ctx, c)
	for i, key := range []string{
		s.DataKey(other, "balance"),
		"app:{" + other + "}:" + mine, // the first tag counts, not a later mention
		untagged,
		"{}{" + mine + "}",            // an empty first tag hashes the whole key
		"app:{" + mine + "x}:balance", // a longer tag is another resource's
	} {
		err := s.Apply(ctx, fz(mine, 1, "w", "op-"+strconv.Itoa(i)), redisfence.Set(key, "stolen"))
		if !errors.Is(err, fence.ErrInvalid) || !strings.Contains(err.Error(), "{"+mine+"}") {
			t.Errorf("key %q: err = %v, want ErrInvalid asking for {%s}", key, err, mine)
		}
	}
	if n1, _ := redistest.CountKeys(ctx, c); n1 != n0 {
		t.Fatalf("keys: %d before, %d after refused writes", n0, n1)
	}
	if err := s.Apply(ctx, fz(mine, 1, "w", "op-ok"), redisfence.Set("app:{"+mine+"}:balance", "5")); err != nil {
		t.Fatal(err)
	}
}
