package lease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/lease"
)

// TestCallWhoseReplyIsLostIsNotSentAgain: an acquisition or a release
// whose script ran but whose reply was lost is not sent again by go-redis
// (the second run found the first's work: an acquisition then reported
// the lease held, by the caller itself, and a release ErrNotHeld). The
// call fails with the network error; what it did stands.
func TestCallWhoseReplyIsLostIsNotSentAgain(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	p := redistest.StartProxy(t, srv.Addr)
	ns := redistest.Namespace(t)
	ctx := context.Background()
	m := lease.NewManager(p.Client(nil), lease.Config{Namespace: ns})
	direct := lease.NewManager(srv.Client(), lease.Config{Namespace: ns})
	warm, err := m.Acquire(ctx, "warm", "me", time.Minute) // the scripts loaded
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Release(ctx, warm); err != nil {
		t.Fatal(err)
	}

	lost := p.DropReply("acquired-once")
	if l, err := m.Acquire(ctx, "acquired-once", "me", time.Minute); err == nil || errors.Is(err, lease.ErrHeld) {
		t.Errorf("Acquire with a lost reply: %+v, %v; want a network error", l, err)
	}
	<-lost
	if h, err := direct.Holder(ctx, "acquired-once"); err != nil || h == nil || h.Owner != "me" {
		t.Errorf("holder after the acquisition: %+v, %v; want me", h, err)
	}

	l, err := m.Acquire(ctx, "released-once", "me", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	lost = p.DropReply("released-once")
	if err := m.Release(ctx, l); err == nil || errors.Is(err, lease.ErrNotHeld) {
		t.Errorf("Release with a lost reply: %v; want a network error", err)
	}
	<-lost
	if h, err := direct.Holder(ctx, "released-once"); err != nil || h != nil {
		t.Errorf("holder after the release: %+v, %v; want none", h, err)
	}
}
