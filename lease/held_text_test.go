package lease_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/lease"
)

// A HeldError's text, which callers log, names the holder but not its
// token: the two together authorise writes as the holder. The error value
// still carries the holding (HeldError.Lease).
func TestHeldErrorNamesNoToken(t *testing.T) {
	c := redistest.Start(t, redistest.Options{}).Client()
	m := newManager(t, c)
	ctx := t.Context()
	l, err := m.Acquire(ctx, "account:1", "holder-owner", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Acquire(ctx, "account:1", "other-owner", time.Minute)
	var held *lease.HeldError
	if !errors.As(err, &held) || held.Owner != l.Owner || held.Token != l.Token {
		t.Fatalf("acquire of a held resource: %v, want a HeldError carrying %+v", err, l)
	}
	text := err.Error()
	if !strings.Contains(text, l.Owner) || strings.Contains(text, l.Token.String()) {
		t.Errorf("HeldError text %q: want the holder named, its token %s not", text, l.Token)
	}
}
