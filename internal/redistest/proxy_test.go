package redistest_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/redistest"
)

// TestProxyLosesRepliesOfCommandsTheServerRan: a dropped reply leaves the
// command run (go-redis's own retry of the INCR runs it again), a held
// one leaves the client waiting until its read timeout while the server
// has run it; other commands pass through.
func TestProxyLosesRepliesOfCommandsTheServerRan(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	direct := srv.Client()
	p := redistest.StartProxy(t, srv.Addr)
	ctx := context.Background()

	retrying := p.Client(nil)
	dropped := p.DropReply("incr", "dropped")
	if n, err := retrying.Incr(ctx, "dropped").Result(); err != nil || n != 2 {
		t.Errorf("INCR re-sent by go-redis after a dropped reply: %d, %v; want 2 (it ran twice)", n, err)
	}
	<-dropped

	once := p.Client(&redis.Options{MaxRetries: -1, ReadTimeout: 200 * time.Millisecond})
	held := p.HoldReply("incr", "held")
	if err := once.Incr(ctx, "held").Err(); err == nil {
		t.Error("INCR with a held reply: no error")
	}
	<-held
	if n, err := direct.Get(ctx, "held").Int(); err != nil || n != 1 {
		t.Errorf("held INCR: %d, %v; want 1", n, err)
	}
	if n, err := once.Incr(ctx, "held").Result(); err != nil || n != 2 {
		t.Errorf("INCR after the held one: %d, %v; want 2", n, err)
	}
}
