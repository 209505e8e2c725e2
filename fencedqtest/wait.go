package fencedqtest

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/jobs"
)

// DefaultWait bounds WaitState when its context has no deadline.
const DefaultWait = 10 * time.Second

// pollEvery is how often WaitState reads the job when no keyspace
// notification wakes it.
const pollEvery = 50 * time.Millisecond

// WaitState waits until job id (in whichever queue holds it) is in one of
// states, and returns its record. It fails the test, with the job's last
// state and history, when ctx ends first (after DefaultWait when ctx has no
// deadline), and at once when id is empty or a state is none of
// jobs.States. It reads the job when a keyspace notification says its
// record changed (on a Redis whose notify-keyspace-events includes K and
// h, or A) and every 50ms otherwise.
func (e *Env) WaitState(ctx context.Context, tb testing.TB, id string, states ...jobs.State) *jobs.Record {
	tb.Helper()
	e.check(tb)
	if id == "" {
		tb.Fatal("fencedqtest: WaitState needs a job id")
	}
	if len(states) == 0 {
		tb.Fatal("fencedqtest: WaitState needs at least one state")
	}
	for _, s := range states {
		if !slices.Contains(jobs.States, s) {
			tb.Fatalf("fencedqtest: WaitState: %q is not a job state (the states: %v)", s, jobs.States)
		}
	}
	var cancel context.CancelFunc
	if _, ok := ctx.Deadline(); ok {
		ctx, cancel = context.WithCancel(ctx)
	} else {
		ctx, cancel = context.WithTimeout(ctx, DefaultWait)
	}
	defer cancel() // ends the notifications' subscription too
	var (
		last    *jobs.Record
		lastErr error
		wake    <-chan struct{}
	)
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		rec, err := e.ledger.Find(ctx, id)
		switch {
		case err == nil:
			last, lastErr = rec, nil
			if slices.Contains(states, rec.State) {
				return rec
			}
			if wake == nil {
				wake = e.notifications(ctx, e.ledger.JobKey(rec.Queue, id))
			}
		case ctx.Err() == nil:
			lastErr = err
		}
		select {
		case <-ctx.Done():
			// one last look, to say where the job is
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			rec, err := e.ledger.Find(rctx, id)
			cancel()
			switch {
			case err == nil && slices.Contains(states, rec.State):
				return rec
			case err == nil:
				last, lastErr = rec, nil
			case last == nil:
				lastErr = err
			}
			e.failWait(tb, id, states, last, lastErr)
			return nil
		case <-wake:
		case <-tick.C:
		}
	}
}

// notifications returns a channel that receives when key's keyspace
// notifications say it changed, until ctx ends; it never receives when the
// server publishes none.
func (e *Env) notifications(ctx context.Context, key string) <-chan struct{} {
	wake := make(chan struct{}, 1)
	sub := e.rdb.PSubscribe(ctx, "__keyspace@*__:"+key)
	go func() {
		defer sub.Close()
		ch := sub.Channel()
		for {
			select {
			case <-ctx.Done():
				return
			case _, ok := <-ch:
				if !ok {
					return
				}
				select {
				case wake <- struct{}{}:
				default:
				}
			}
		}
	}()
	return wake
}

func (e *Env) failWait(tb testing.TB, id string, states []jobs.State, last *jobs.Record, lastErr error) {
	tb.Helper()
	want := make([]string, len(states))
	for i, s := range states {
		want[i] = string(s)
	}
	switch {
	case last == nil && errors.Is(lastErr, jobs.ErrNotFound):
		tb.Fatalf("fencedqtest: job %s: want state %s; it was never found in namespace %s (is the Env's jobs.Config the client's?)",
			id, strings.Join(want, " or "), e.cfg.Namespace)
	case last == nil:
		tb.Fatalf("fencedqtest: job %s: want state %s; reading it: %v", id, strings.Join(want, " or "), lastErr)
	default:
		var b strings.Builder
		if h, err := e.ledger.History(context.Background(), last.Queue, id); err == nil {
			for _, en := range h {
				j, _ := json.Marshal(en)
				b.WriteString("\n  ")
				b.Write(j)
			}
		}
		tb.Fatalf("fencedqtest: job %s: want state %s; it is %s (attempts %d, reason %q, error %q)\nhistory:%s",
			id, strings.Join(want, " or "), last.State, last.Attempts, last.Reason, last.Error, b.String())
	}
}
