package ledger_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/testsignal"
)

// holdScript is a client hook that holds every command (alone or in a
// pipeline) calling the script with one SHA until release is closed: a
// call of that script stays in flight on the client while others go on.
type holdScript struct {
	sha     string
	held    testsignal.Signal[struct{}]
	release chan struct{}
}

func newHoldScript(t *testing.T, sha string) *holdScript {
	h := &holdScript{sha: sha, release: make(chan struct{})}
	h.held.Init(t, "call of the held script in flight")
	return h
}

func (h *holdScript) calls(cmds ...redis.Cmder) bool {
	for _, c := range cmds {
		for _, a := range c.Args() {
			if s, ok := a.(string); ok && s == h.sha {
				return true
			}
		}
	}
	return false
}

func (h *holdScript) wait(cmds ...redis.Cmder) {
	if h.calls(cmds...) {
		h.held.Signal(struct{}{})
		<-h.release
	}
}

func (h *holdScript) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *holdScript) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.wait(cmd)
		return next(ctx, cmd)
	}
}

func (h *holdScript) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.wait(cmds...)
		return next(ctx, cmds)
	}
}

// TestClaimsDoNotWaitBehindCompletions: a pool's claim goes out while its
// completion is still in flight (each kind of call has its own lane), and
// the held completion still applies once it is let through.
func TestClaimsDoNotWaitBehindCompletions(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	hold := newHoldScript(t, ledger.ScriptFunction("complete"))
	rdb.AddHook(hold)
	f := newFixture(t, rdb)
	c1 := f.claimOne(f.enqueue())
	second := f.enqueue()

	done := make(chan error, 1)
	go func() {
		out, err := f.l.Complete(f.ctx, f.q, []ledger.Completion{{ID: c1.ID, Token: c1.Token, Outcome: ledger.Outcome{To: ledger.Succeeded}}})
		if err == nil && !out[0].Applied {
			err = fmt.Errorf("held completion not applied: %+v", out[0])
		}
		done <- err
	}()
	hold.held.WaitOrTimeout()
	// The completion is in flight; the claim does not wait for it.
	ctx, cancel := context.WithTimeout(f.ctx, testsignal.Timeout())
	defer cancel()
	res, err := f.l.Claim(ctx, f.q, "w1", time.Minute, 10)
	if err != nil {
		t.Fatalf("claim while a completion is in flight: %v", err)
	}
	if len(res.Jobs) != 1 || res.Jobs[0].ID != second {
		t.Fatalf("claimed %+v, want only %s", res.Jobs, second)
	}
	close(hold.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]ledger.State{c1.ID: ledger.Succeeded, second: ledger.Running} {
		if rec, err := f.l.Get(f.ctx, f.q, id); err != nil || rec.State != want {
			t.Fatalf("job %s: %+v, %v; want it %s", id, rec, err, want)
		}
	}
}
