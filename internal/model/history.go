package model

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// Operation kinds of a recorded history.
const (
	KindAcquire  = "acquire"  // lease: Key resource, Owner; OK: Token minted; else Holder, Current
	KindRelease  = "release"  // lease: Key, Owner, Token; OK: released
	KindRenew    = "renew"    // lease or ledger: Key, Owner, Token; OK: renewed; ledger lost: State
	KindEnqueue  = "enqueue"  // ledger: Key job id; OK: created
	KindClaim    = "claim"    // ledger: Key job id, Token minted (one op per claimed job); Unknown with Key "": a failed claim
	KindComplete = "complete" // ledger: Key, Token, Outcome; OK: applied; State after, Current token
	KindRestart  = "restart"  // Redis restarted; Persistent when nothing was lost
	KindOperator = "operator" // ledger: an operator's action on Key (re-run, cancel, resolve)
)

// Op is one operation of a concurrent history, with the times (ns, one
// machine's clock) at which it was called and returned. A call that failed
// (a Redis restart broke its connection) is Unknown: it may or may not have
// taken effect, and it may take effect at any time after its call.
type Op struct {
	Proc       int    `json:"proc"`
	Client     int    `json:"client"`
	Kind       string `json:"kind"`
	Key        string `json:"key,omitempty"`
	Owner      string `json:"owner,omitempty"`
	Token      uint64 `json:"token,omitempty"`
	Outcome    string `json:"outcome,omitempty"`
	Persistent bool   `json:"persistent,omitempty"`

	OK      bool   `json:"ok"`
	Unknown bool   `json:"unknown,omitempty"`
	State   State  `json:"state,omitempty"`
	Holder  string `json:"holder,omitempty"`
	Current uint64 `json:"current,omitempty"`

	Call   int64 `json:"call"`
	Return int64 `json:"return"`
}

// Recorder collects operations from many goroutines and writes them as JSON
// lines. It is safe for concurrent use.
type Recorder struct {
	mu  sync.Mutex
	ops []Op
}

// Now is the clock histories use: nanoseconds on this machine.
func Now() int64 { return time.Now().UnixNano() }

// Add records op.
func (r *Recorder) Add(op Op) {
	r.mu.Lock()
	r.ops = append(r.ops, op)
	r.mu.Unlock()
}

// Ops returns the operations recorded so far.
func (r *Recorder) Ops() []Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Op(nil), r.ops...)
}

// WriteFile writes the operations to path as JSON lines.
func (r *Recorder) WriteFile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for _, op := range r.Ops() {
		if err := enc.Encode(op); err != nil {
			_ = f.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// ReadOps reads JSON-lines operations (as written by Recorder.WriteFile).
func ReadOps(r io.Reader) ([]Op, error) {
	var ops []Op
	dec := json.NewDecoder(r)
	for {
		var op Op
		if err := dec.Decode(&op); err == io.EOF {
			return ops, nil
		} else if err != nil {
			return nil, err
		}
		ops = append(ops, op)
	}
}

// Operations converts a history for porcupine. Unknown calls never return.
func Operations(ops []Op) []porcupine.Operation {
	out := make([]porcupine.Operation, len(ops))
	for i, op := range ops {
		ret := op.Return
		if op.Unknown {
			ret = math.MaxInt64 - int64(len(ops)) + int64(i)
		}
		out[i] = porcupine.Operation{ClientId: op.Client, Input: op, Call: op.Call, Output: op, Return: ret}
	}
	return out
}

// partition groups operations by key; keyless ones (restarts, failed
// claims) affect every key and go into every group.
func partition(history []porcupine.Operation) [][]porcupine.Operation {
	byKey := map[string][]porcupine.Operation{}
	var all []porcupine.Operation
	for _, o := range history {
		op := o.Input.(Op)
		if op.Key == "" {
			all = append(all, o)
			continue
		}
		byKey[op.Key] = append(byKey[op.Key], o)
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([][]porcupine.Operation, 0, len(keys))
	for _, k := range keys {
		out = append(out, append(byKey[k], all...))
	}
	return out
}

func describe(_, output any) string {
	op := output.(Op)
	res := "ok"
	switch {
	case op.Unknown:
		res = "unknown"
	case !op.OK:
		res = "refused"
	}
	return fmt.Sprintf("%s %s %s tok=%d %s -> %s state=%s holder=%s current=%d",
		op.Kind, op.Key, op.Owner, op.Token, op.Outcome, res, op.State, op.Holder, op.Current)
}

// LeaseSpec is the sequential specification of one resource's lease: one
// holder at a time, tokens strictly increasing across every acquisition
// (also across a Redis restart that lost the key). Token 0 while Held means
// a failed acquire took the lease with a token the history never saw.
type LeaseSpec struct {
	Last  uint64 // the highest token known minted
	Held  bool
	Owner string
	Token uint64
}

func (s LeaseSpec) heldBy(owner string, token uint64) bool {
	return s.Held && s.Owner == owner && s.Token == token && token != 0
}

// stepLease returns the states op may lead to from s (none: op is not
// possible from s).
func stepLease(s LeaseSpec, op Op) []LeaseSpec {
	switch op.Kind {
	case KindAcquire:
		switch {
		case op.Unknown && s.Held:
			return []LeaseSpec{s}
		case op.Unknown:
			return []LeaseSpec{s, {Last: s.Last, Held: true, Owner: op.Owner}}
		case op.OK && !s.Held && op.Token > s.Last:
			return []LeaseSpec{{Last: op.Token, Held: true, Owner: op.Owner, Token: op.Token}}
		case !op.OK && s.Held && s.Owner == op.Holder && s.Token == op.Current:
			return []LeaseSpec{s}
		case !op.OK && s.Held && s.Owner == op.Holder && s.Token == 0 && op.Current > s.Last:
			s.Token, s.Last = op.Current, op.Current // learn the unseen token
			return []LeaseSpec{s}
		}
		return nil
	case KindRelease:
		free, held := LeaseSpec{Last: s.Last}, s.heldBy(op.Owner, op.Token)
		switch {
		case op.Unknown && held:
			return []LeaseSpec{s, free}
		case op.Unknown:
			return []LeaseSpec{s}
		case op.OK && held:
			return []LeaseSpec{free}
		case !op.OK && !held:
			return []LeaseSpec{s}
		}
		return nil
	case KindRenew:
		if op.Unknown || op.OK == s.heldBy(op.Owner, op.Token) {
			return []LeaseSpec{s}
		}
		return nil
	case KindRestart:
		if op.Persistent {
			return []LeaseSpec{s}
		}
		return []LeaseSpec{{Last: s.Last}}
	}
	return nil
}

// LeaseModel is the porcupine model of the lease, partitioned by resource.
func LeaseModel() porcupine.NondeterministicModel {
	return porcupine.NondeterministicModel{
		Partition: partition,
		Init:      func() []any { return []any{LeaseSpec{}} },
		Step: func(state, input, _ any) []any {
			var out []any
			for _, n := range stepLease(state.(LeaseSpec), input.(Op)) {
				out = append(out, n)
			}
			return out
		},
		Equal:             func(a, b any) bool { return a.(LeaseSpec) == b.(LeaseSpec) },
		DescribeOperation: describe,
		DescribeState:     func(s any) string { return fmt.Sprintf("%+v", s) },
	}
}

// JobSpec is the sequential specification of one job's fencing: one current
// token, a claim mints a higher one, and only the current token renews or
// commits. TokenUnknown means a failed claim may have minted a token the
// history never saw (above Token).
type JobSpec struct {
	State        State
	Token        uint64
	TokenUnknown bool
}

func (s JobSpec) runs(token uint64) bool {
	return s.State == Running && !s.TokenUnknown && s.Token == token
}

// after is the state an applied outcome leads to in the linearizability
// workload (retries never run out, nobody cancels).
func after(outcome string) State {
	switch outcome {
	case string(OutRetry), string(OutDefer):
		return Pending
	}
	return State(outcome)
}

// stepJob returns the states op may lead to from s.
func stepJob(s JobSpec, op Op) []JobSpec {
	switch op.Kind {
	case KindEnqueue:
		created := JobSpec{State: Pending, Token: s.Token}
		switch {
		case op.Unknown && s.State == Missing:
			return []JobSpec{s, created}
		case op.OK && s.State == Missing:
			return []JobSpec{created}
		case !op.OK && !op.Unknown && s.State != Missing:
			return []JobSpec{s}
		}
		return nil
	case KindClaim:
		switch {
		case op.Unknown && s.State == Pending: // a failed claim (every key)
			return []JobSpec{s, {State: Running, Token: s.Token, TokenUnknown: true}}
		case op.Unknown:
			return []JobSpec{s}
		case s.State == Pending && op.Token > s.Token:
			return []JobSpec{{State: Running, Token: op.Token}}
		}
		return nil
	case KindRenew:
		switch {
		case op.Unknown:
			return []JobSpec{s}
		case op.OK && s.runs(op.Token):
			return []JobSpec{s}
		case !op.OK && !s.runs(op.Token) && op.State == s.State:
			return []JobSpec{s}
		}
		return nil
	case KindComplete:
		applied := JobSpec{State: after(op.Outcome), Token: s.Token}
		switch {
		case op.Unknown && s.runs(op.Token):
			return []JobSpec{s, applied}
		case op.Unknown:
			return []JobSpec{s}
		case op.OK && s.runs(op.Token) && op.State == applied.State:
			return []JobSpec{applied}
		case op.OK:
			return nil
		case s.runs(op.Token) || op.State != s.State:
			return nil
		case s.State == Missing && op.Current == 0:
			return []JobSpec{s}
		case !s.TokenUnknown && op.Current == s.Token:
			return []JobSpec{s}
		case s.TokenUnknown && op.Current > s.Token:
			return []JobSpec{{State: s.State, Token: op.Current}}
		}
		return nil
	case KindRestart:
		if op.Persistent {
			return []JobSpec{s}
		}
		return []JobSpec{{State: Missing, Token: s.Token}}
	}
	return nil
}

// LedgerModel is the porcupine model of the ledger's fencing, partitioned by
// job. A job's history starts before its enqueue (Missing).
func LedgerModel() porcupine.NondeterministicModel {
	return porcupine.NondeterministicModel{
		Partition: partition,
		Init:      func() []any { return []any{JobSpec{State: Missing}} },
		Step: func(state, input, _ any) []any {
			var out []any
			for _, n := range stepJob(state.(JobSpec), input.(Op)) {
				out = append(out, n)
			}
			return out
		},
		Equal:             func(a, b any) bool { return a.(JobSpec) == b.(JobSpec) },
		DescribeOperation: describe,
		DescribeState:     func(s any) string { return fmt.Sprintf("%+v", s) },
	}
}

// Linearizable checks ops against model within timeout and returns
// porcupine's verdict (Ok, Illegal, or Unknown when the time ran out).
func Linearizable(model porcupine.NondeterministicModel, ops []Op, timeout time.Duration) porcupine.CheckResult {
	return porcupine.CheckOperationsTimeout(model.ToModel(), Operations(ops), timeout)
}
