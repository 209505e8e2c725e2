package scriptbatch

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// Merge lets queued calls of one script share one script call: a script
// that takes a list of like items after a fixed head of arguments (a batch
// enqueue) runs once for the items of every call queued together, so the
// script's fixed cost is paid once per batch instead of once per call.
// A call that goes out at once (a free slot) is never merged, so an idle
// client still pays one round trip and nothing else.
//
// The merged call is one script call: it succeeds or fails as a whole, and
// every caller gets the merged call's error when it fails.
//
// Merged calls share one hash slot's worth of keys only on a single Redis:
// a merged call whose parts name different keys (KeyTail) may touch many
// slots, so callers on Redis Cluster (or a Ring) merge only calls of equal
// keys.
type Merge struct {
	// Key groups mergeable calls: queued calls of the same script with
	// equal Keys are merged. They must have equal first Head arguments and
	// equal keys, or with KeyTail equal last KeyTail keys (the Key names
	// them).
	Key string
	// KeyTail, when above zero, lets merged calls name keys of their own:
	// each call's keys but the last KeyTail are its own, and the merged
	// call carries every call's own keys, in the order the calls were
	// made, followed by the shared last KeyTail keys once. Zero: merged
	// calls have equal keys, carried once.
	KeyTail int
	// Head is how many leading arguments every merged call shares; the
	// merged call carries them once, followed by each call's other
	// arguments, in the order the calls were made.
	Head int
	// Max bounds the arguments after the head of one merged call (0: no
	// bound); a call that would exceed it starts another merged call.
	Max int
	// Alone, when set, gives the script call made for a call that runs
	// on its own (it went out at once, or nothing was merged with it):
	// script, keys and args are the call's, and the result runs in their
	// place (a script cheaper for one call, say). Its reply is the call's.
	Alone func(script Script, keys []string, args []any) (Script, []string, []any)
	// Split returns the reply of each merged call from the merged reply;
	// n[i] is how many arguments after the head call i carried.
	Split func(reply any, n []int) ([]any, error)
}

// RunMerged is Run for a call that may be merged with others queued with
// the same Merge key (see Merge). m must stay unchanged while in use.
func (b *Batcher) RunMerged(ctx context.Context, m *Merge, script Script, keys []string, args ...any) *redis.Cmd {
	return b.run(ctx, []*call{{ctx: ctx, script: script, keys: keys, args: args, merge: m}})[0]
}

// merged is a call standing for several queued calls.
type merged struct {
	parts []*call
	n     []int // each part's arguments after the head
}

// mergeCalls replaces the mergeable calls of a batch by one call per
// script and Merge key (and per Max arguments), placed where the first of
// them was; split gives the merged calls' replies back to their parts.
func mergeCalls(batch []*call) []*call {
	type group struct {
		script Script
		key    string
		c      *call
		size   int
	}
	var open []group // few: a linear search beats a map
	out := batch[:0:0]
	for _, c := range batch {
		m := c.merge
		if m == nil || len(c.args) < m.Head || len(c.keys) < m.KeyTail {
			out = append(out, c)
			continue
		}
		body := len(c.args) - m.Head
		g := -1
		for i := range open {
			if open[i].script == c.script && open[i].key == m.Key {
				g = i
				break
			}
		}
		if g < 0 || (m.Max > 0 && open[g].size+body > m.Max) {
			args := make([]any, 0, len(c.args)*2)
			args = append(args, c.args...)
			keys := c.keys
			if m.KeyTail > 0 {
				keys = append(make([]string, 0, len(c.keys)*4), c.keys...)
			}
			mc := &call{ctx: c.ctx, script: c.script, keys: keys, args: args, merge: m,
				merged: &merged{parts: []*call{c}, n: []int{body}}}
			if g < 0 {
				open = append(open, group{script: c.script, key: m.Key})
				g = len(open) - 1
			}
			open[g].c, open[g].size = mc, body
			out = append(out, mc)
			continue
		}
		gc := open[g].c
		if m.KeyTail > 0 {
			own := len(c.keys) - m.KeyTail
			at := len(gc.keys) - m.KeyTail
			gc.keys = append(gc.keys[:at], append(c.keys[:own:own], gc.keys[at:]...)...)
		}
		gc.args = append(gc.args, c.args[m.Head:]...)
		gc.merged.parts = append(gc.merged.parts, c)
		gc.merged.n = append(gc.merged.n, body)
		open[g].size += body
	}
	for _, c := range out {
		if c.merged != nil && len(c.merged.parts) == 1 {
			alone(c)
		}
	}
	return out
}

// alone applies the Merge's Alone to a call that runs on its own.
func alone(c *call) {
	if c.merge != nil && c.merge.Alone != nil {
		c.script, c.keys, c.args = c.merge.Alone(c.script, c.keys, c.args)
	}
}

// split sets the reply and error of every part of the merged calls in
// sent.
func split(sent []*call) {
	for _, c := range sent {
		mg := c.merged
		if mg == nil {
			continue
		}
		if len(mg.parts) == 1 {
			mg.parts[0].reply, mg.parts[0].err = c.reply, c.err
			continue
		}
		var replies []any
		var err error
		if c.reply != nil {
			replies, err = c.merge.Split(c.reply, mg.n)
			if err == nil && len(replies) != len(mg.parts) {
				err = fmt.Errorf("scriptbatch: split %d replies for %d merged calls", len(replies), len(mg.parts))
			}
		}
		for i, p := range mg.parts {
			p.err = c.err
			if p.err == nil {
				p.err = err
			}
			if replies != nil && err == nil {
				p.reply = replies[i]
			}
		}
	}
}
