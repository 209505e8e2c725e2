package model

import (
	"fmt"
	"sort"
)

// Observed is what a reader saw of one job: its state (Missing when gone)
// and its current token.
type Observed struct {
	State State
	Token uint64
}

// Snapshot is one observation of a queue: every job's record and the
// members of every state index.
type Snapshot struct {
	Jobs  map[string]Observed
	Index map[State][]string
}

// CheckIndexes reports jobs not in exactly one state index (the one of
// their state) and index members without a job.
func CheckIndexes(s Snapshot) []string {
	var bad []string
	in := map[string][]State{}
	for _, st := range States {
		for _, id := range s.Index[st] {
			in[id] = append(in[id], st)
		}
	}
	ids := make([]string, 0, len(s.Jobs))
	for id := range s.Jobs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		o := s.Jobs[id]
		if o.State == Missing {
			if len(in[id]) > 0 {
				bad = append(bad, fmt.Sprintf("job %s is gone but listed in %v", id, in[id]))
			}
			continue
		}
		if len(in[id]) != 1 || in[id][0] != o.State {
			bad = append(bad, fmt.Sprintf("job %s is %s but listed in %v", id, o.State, in[id]))
		}
	}
	for id, sts := range in {
		if _, ok := s.Jobs[id]; !ok {
			bad = append(bad, fmt.Sprintf("index %v lists unknown job %s", sts, id))
		}
	}
	return bad
}

// Invariants follows a sequence of snapshots and tokens handed out and
// reports any step that breaks a safety property:
//
//   - a job is in exactly one state index;
//   - a final job changes state only through an operator's action (or
//     disappears when Redis loses its keys);
//   - a job's token never goes down;
//   - no two attempts (or lease holders) are handed the same token for the
//     same job (or resource).
type Invariants struct {
	last   map[string]Observed
	minted map[string]map[uint64]string
}

// Mint records that owner was handed token for key (a job or a resource)
// and reports a token already handed to another owner, or one not above
// the last token handed for key.
func (iv *Invariants) Mint(key string, token uint64, owner string) []string {
	if iv.minted == nil {
		iv.minted = map[string]map[uint64]string{}
	}
	m := iv.minted[key]
	if m == nil {
		m = map[uint64]string{}
		iv.minted[key] = m
	}
	var bad []string
	if prev, ok := m[token]; ok {
		bad = append(bad, fmt.Sprintf("token %d of %s handed to %s and to %s", token, key, prev, owner))
	}
	for t := range m {
		if t > token {
			bad = append(bad, fmt.Sprintf("token %d of %s handed to %s after token %d", token, key, owner, t))
			break
		}
	}
	m[token] = owner
	return bad
}

// Step says what happened since the previous snapshot: an operator acted
// (Operator), or Redis lost its keys (Reset).
type Step struct {
	Operator bool
	Reset    bool
}

// Observe checks snapshot s, taken after step, against the previous one.
func (iv *Invariants) Observe(step Step, s Snapshot) []string {
	bad := CheckIndexes(s)
	if iv.last == nil {
		iv.last = map[string]Observed{}
	}
	if step.Reset {
		// Redis lost its keys: a job not in this snapshot is gone.
		for id, prev := range iv.last {
			if _, ok := s.Jobs[id]; !ok {
				iv.last[id] = Observed{State: Missing, Token: prev.Token}
			}
		}
	}
	for id, o := range s.Jobs {
		prev, ok := iv.last[id]
		if !ok {
			iv.last[id] = o
			continue
		}
		gone := o.State == Missing && step.Reset
		if prev.State.Final() && o.State != prev.State && !step.Operator && !gone {
			bad = append(bad, fmt.Sprintf("final job %s went %s -> %s without an operator", id, prev.State, o.State))
		}
		// A job whose record was lost can be enqueued again under its id
		// (an operation id naming its job): it starts without a token
		// (read as Missing here until claimed), and its first token is
		// still checked against every token the id had.
		recreated := prev.State == Missing && o.State != Missing && o.Token == 0
		if o.State != Missing && o.Token < prev.Token && !recreated {
			bad = append(bad, fmt.Sprintf("job %s token went down %d -> %d", id, prev.Token, o.Token))
		}
		if o.State == Missing || recreated {
			iv.last[id] = Observed{State: Missing, Token: prev.Token}
		} else {
			iv.last[id] = o
		}
	}
	return bad
}

// CheckHistory checks the invariants a concurrent history shows by itself:
// per key, tokens minted (acquire, claim) are never shared and go up in real
// time (an acquisition that returned before another was called has the
// lower token); a job seen final is not seen in another state by a later
// operation unless an operator acted on it or Redis lost its keys between
// the two.
func CheckHistory(ops []Op) []string {
	var bad []string
	minted := map[string][]Op{}
	seen := map[string][]Op{} // ops that observed a job's state
	var resets, operator []Op
	for _, op := range ops {
		switch {
		case op.Unknown:
		case op.Kind == KindRestart:
			if !op.Persistent {
				resets = append(resets, op)
			}
		case op.Kind == KindOperator:
			operator = append(operator, op)
		case (op.Kind == KindAcquire || op.Kind == KindClaim) && op.OK:
			minted[op.Key] = append(minted[op.Key], op)
			if op.Kind == KindClaim {
				seen[op.Key] = append(seen[op.Key], op)
			}
		case op.Kind == KindComplete || (op.Kind == KindRenew && !op.OK && op.State != ""):
			seen[op.Key] = append(seen[op.Key], op)
		}
	}
	for key, ms := range minted {
		owner := map[uint64]Op{}
		for _, a := range ms {
			if b, ok := owner[a.Token]; ok {
				bad = append(bad, fmt.Sprintf("token %d of %s handed to %s (client %d) and %s (client %d)",
					a.Token, key, b.Owner, b.Client, a.Owner, a.Client))
			}
			owner[a.Token] = a
			for _, b := range ms {
				if a.Return < b.Call && a.Token >= b.Token {
					bad = append(bad, fmt.Sprintf("token of %s went down: %d then %d", key, a.Token, b.Token))
				}
			}
		}
	}
	between := func(list []Op, key string, a, b Op) bool {
		for _, x := range list {
			if (x.Key == "" || x.Key == key) && x.Call < b.Return && x.Return > a.Call {
				return true
			}
		}
		return false
	}
	for key, ss := range seen {
		for _, a := range ss {
			if !a.State.Final() {
				continue
			}
			for _, b := range ss {
				state := b.State
				if b.Kind == KindClaim {
					state = Running
				}
				if a.Return < b.Call && state != a.State && !between(operator, key, a, b) && !between(resets, key, a, b) {
					bad = append(bad, fmt.Sprintf("final job %s seen %s, then %s by %s (client %d)", key, a.State, state, b.Kind, b.Client))
				}
			}
		}
	}
	sort.Strings(bad)
	return bad
}
