package model

import "sort"

// State is a job's state, named as the ledger names it.
type State string

// The job states, and Missing for a job the ledger does not have.
const (
	Pending   State = "pending"
	Running   State = "running"
	Uncertain State = "uncertain"
	Review    State = "review"
	Succeeded State = "succeeded"
	Dead      State = "dead"
	Cancelled State = "cancelled"
	Missing   State = "missing"
)

// States lists the states that have an index, in the ledger's order.
var States = []State{Pending, Running, Uncertain, Review, Succeeded, Dead, Cancelled}

// Final reports whether s ends a job (until an operator re-runs it).
func (s State) Final() bool { return s == Succeeded || s == Dead || s == Cancelled }

// Job is one job of the model. Times are Redis milliseconds.
type Job struct {
	ID, Op          string
	State           State
	Token           uint64 // the current (last minted) token; 0 before the first claim
	Attempts        int
	MaxRetries      int
	Due             int64 // pending: when the job becomes due
	Deadline        int64 // running: when its lease ends
	CancelRequested bool  // an operator asked a running attempt to stop
}

// Ledger is the model of one queue of the ledger.
type Ledger struct {
	Jobs   map[string]Job
	Ops    map[string]string // operation id -> job id
	Paused bool
	Leader uint64 // the highest reconciler leader token seen
}

// NewLedger returns an empty queue.
func NewLedger() Ledger { return Ledger{Jobs: map[string]Job{}, Ops: map[string]string{}} }

// clone copies l so that a transition never changes its input.
func (l Ledger) clone() Ledger {
	n := l
	n.Jobs = make(map[string]Job, len(l.Jobs))
	for k, v := range l.Jobs {
		n.Jobs[k] = v
	}
	n.Ops = make(map[string]string, len(l.Ops))
	for k, v := range l.Ops {
		n.Ops[k] = v
	}
	return n
}

// Get returns job id, with State Missing when the queue does not have it.
func (l Ledger) Get(id string) Job {
	j, ok := l.Jobs[id]
	if !ok {
		return Job{ID: id, State: Missing}
	}
	return j
}

// IDs returns the ids of the jobs in state s, sorted.
func (l Ledger) IDs(s State) []string {
	var ids []string
	for id, j := range l.Jobs {
		if j.State == s {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

// Counts returns the number of jobs per state.
func (l Ledger) Counts() map[State]int {
	c := map[State]int{}
	for _, j := range l.Jobs {
		c[j.State]++
	}
	return c
}

// Enqueue creates a pending job (due at Due) unless Op names a known
// operation. ID is the id the new job gets.
type Enqueue struct {
	ID, Op     string
	MaxRetries int
	Due        int64
}

// Enqueued is the evidence of an enqueue: whether a job was created, and
// the id of the created or the existing job.
type Enqueued struct {
	Created bool
	JobID   string
}

// Enqueue applies an enqueue.
func (l Ledger) Enqueue(in Enqueue) (Ledger, Enqueued) {
	if in.Op != "" {
		if id, ok := l.Ops[in.Op]; ok {
			return l, Enqueued{JobID: id}
		}
	}
	l = l.clone()
	if in.Op != "" {
		l.Ops[in.Op] = in.ID
	}
	l.Jobs[in.ID] = Job{ID: in.ID, Op: in.Op, State: Pending, MaxRetries: in.MaxRetries, Due: in.Due}
	return l, Enqueued{Created: true, JobID: in.ID}
}

// Claim starts attempts on up to Max pending jobs due at Now (ms), taken
// in order of due time, then id. NowMicro is the token floor, (fencing
// epoch << 52) + the Redis clock in µs: each new token is max(previous
// token + 1, NowMicro). TTL is the lease in ms.
type Claim struct {
	Max      int
	TTL      int64
	Now      int64
	NowMicro uint64
}

// Attempt is one attempt a claim started.
type Attempt struct {
	ID       string
	Token    uint64
	Attempt  int
	Deadline int64
}

// Claimed is the evidence of a claim.
type Claimed struct {
	Paused bool
	Jobs   []Attempt
}

// Claim applies a claim.
func (l Ledger) Claim(in Claim) (Ledger, Claimed) {
	if l.Paused {
		return l, Claimed{Paused: true}
	}
	var due []Job
	for _, j := range l.Jobs {
		if j.State == Pending && j.Due <= in.Now {
			due = append(due, j)
		}
	}
	sort.Slice(due, func(a, b int) bool {
		if due[a].Due != due[b].Due {
			return due[a].Due < due[b].Due
		}
		return due[a].ID < due[b].ID
	})
	if len(due) > in.Max {
		due = due[:in.Max]
	}
	l = l.clone()
	var out Claimed
	for _, j := range due {
		j.Token = max(j.Token+1, in.NowMicro)
		j.State, j.Attempts, j.Deadline = Running, j.Attempts+1, in.Now+in.TTL
		l.Jobs[j.ID] = j
		out.Jobs = append(out.Jobs, Attempt{ID: j.ID, Token: j.Token, Attempt: j.Attempts, Deadline: j.Deadline})
	}
	return l, out
}

// Held names one attempt by its job and token.
type Held struct {
	ID    string
	Token uint64
}

// Renew extends the leases of a batch of attempts to Now + TTL (ms).
type Renew struct {
	TTL, Now int64
	Attempts []Held
}

// RenewStatus is the answer to one renewal.
type RenewStatus int

// Renewal answers, numbered as the ledger numbers them.
const (
	Lost RenewStatus = iota
	Renewed
	CancelRequested
)

// Renewal is the evidence of one renewal: its status and, when lost, the
// job's state.
type Renewal struct {
	Status RenewStatus
	State  State
}

// runs reports whether token runs the job.
func (j Job) runs(token uint64) bool { return j.State == Running && j.Token == token }

// Renew applies a batch of renewals, in order.
func (l Ledger) Renew(in Renew) (Ledger, []Renewal) {
	l = l.clone()
	out := make([]Renewal, len(in.Attempts))
	for i, a := range in.Attempts {
		j := l.Get(a.ID)
		if !j.runs(a.Token) {
			out[i] = Renewal{Status: Lost, State: j.State}
			continue
		}
		j.Deadline = in.Now + in.TTL
		l.Jobs[j.ID] = j
		out[i] = Renewal{Status: Renewed}
		if j.CancelRequested {
			out[i].Status = CancelRequested
		}
	}
	return l, out
}

// Outcome is what an attempt reports, named as complete.lua names it.
type Outcome string

// Outcomes.
const (
	OutSucceeded Outcome = "succeeded"
	OutRetry     Outcome = "retry"
	OutDead      Outcome = "dead"
	OutUncertain Outcome = "uncertain"
	OutDefer     Outcome = "defer"
)

// Completion is one attempt's outcome; Due is when a retry or a deferred
// job becomes due.
type Completion struct {
	ID      string
	Token   uint64
	Outcome Outcome
	Due     int64
}

// Complete applies a batch of completions, in order.
type Complete struct {
	Items []Completion
}

// Commit is the evidence of one completion: applied or refused, the job's
// state after it and the job's current token.
type Commit struct {
	Applied bool
	State   State
	Current uint64
}

// Complete applies a batch of completions, each only if its token still
// runs the job.
func (l Ledger) Complete(in Complete) (Ledger, []Commit) {
	l = l.clone()
	out := make([]Commit, len(in.Items))
	for i, c := range in.Items {
		j := l.Get(c.ID)
		if !j.runs(c.Token) {
			out[i] = Commit{State: j.State, Current: j.Token}
			continue
		}
		to := State(c.Outcome)
		switch {
		case j.CancelRequested && (c.Outcome == OutRetry || c.Outcome == OutDefer):
			to = Cancelled
		case c.Outcome == OutDefer:
			to, j.Due, j.Attempts = Pending, c.Due, j.Attempts-1
		case c.Outcome == OutRetry && j.Attempts > j.MaxRetries:
			to = Dead
		case c.Outcome == OutRetry:
			to, j.Due = Pending, c.Due
		}
		j.State = to
		l.Jobs[j.ID] = j
		out[i] = Commit{Applied: true, State: to, Current: j.Token}
	}
	return l, out
}

// Expire is a reconciler's expiry pass at Now (ms) under leader token
// Leader: running jobs whose lease ended become uncertain.
type Expire struct {
	Leader uint64
	Now    int64
}

// Expired is the evidence of an expiry pass: Stale when a newer leader was
// seen, else the jobs moved, sorted.
type Expired struct {
	Stale bool
	Moved []string
}

// reconcilerOK fences a reconciler write by its leader token and raises the
// high-water mark. An operator (leader 0 from Resolve) always passes.
func (l *Ledger) reconcilerOK(leader uint64) bool {
	if l.Leader > leader {
		return false
	}
	l.Leader = leader
	return true
}

// Expire applies an expiry pass.
func (l Ledger) Expire(in Expire) (Ledger, Expired) {
	l = l.clone()
	if !l.reconcilerOK(in.Leader) {
		return l, Expired{Stale: true}
	}
	var out Expired
	for _, id := range l.IDs(Running) {
		j := l.Jobs[id]
		if j.Deadline <= in.Now {
			j.State = Uncertain
			l.Jobs[id] = j
			out.Moved = append(out.Moved, id)
		}
	}
	return l, out
}

// Decision is a resolution, named as the ledger names it.
type Decision string

// Decisions.
const (
	DecideSucceeded Decision = "succeeded"
	DecideRerun     Decision = "rerun"
	DecideDead      Decision = "dead"
	DecideReview    Decision = "review"
	DecideLater     Decision = "later"
)

// Resolve applies Decision to job ID if it is in one of From. Leader is the
// reconciler's token (0: an operator, never fenced). Now (ms) is when the
// resolution ran: a re-run is due then. NotApplied marks a re-run that is a
// reconciler's verdict "not applied": the attempt failed, so the job is
// retried, due RetryIn (ms) after Now, while it has attempts left, and is
// dead once they are spent.
type Resolve struct {
	ID         string
	From       []State
	Decision   Decision
	Leader     uint64
	Now        int64
	NotApplied bool
	RetryIn    int64
}

// Resolved is the evidence of a resolution: Code 1 applied, 0 the job is
// missing or in a state not in From, -1 a newer leader was seen; State is
// the job's state after it.
type Resolved struct {
	Code  int
	State State
}

// Resolve applies a resolution.
func (l Ledger) Resolve(in Resolve) (Ledger, Resolved) {
	j := l.Get(in.ID)
	allowed := false
	for _, s := range in.From {
		allowed = allowed || s == j.State
	}
	if j.State == Missing || !allowed {
		return l, Resolved{State: j.State}
	}
	l = l.clone()
	if in.Leader > 0 && !l.reconcilerOK(in.Leader) {
		return l, Resolved{Code: -1, State: j.State}
	}
	switch {
	case in.Decision == DecideRerun && in.Leader > 0 && j.CancelRequested:
		// the reconciler's "not applied" on a job an operator asked to
		// cancel: the cancel stands
		j.State = Cancelled
	case in.Decision == DecideRerun && in.NotApplied && j.Attempts > j.MaxRetries:
		// the last allowed attempt failed: its attempts are spent
		j.State = Dead
	case in.Decision == DecideRerun && in.NotApplied:
		j.State, j.Due = Pending, in.Now+in.RetryIn
	case in.Decision == DecideRerun:
		j.State, j.Due, j.CancelRequested = Pending, in.Now, false
	case in.Decision == DecideSucceeded || in.Decision == DecideDead || in.Decision == DecideReview:
		j.State = State(in.Decision)
	}
	l.Jobs[j.ID] = j
	return l, Resolved{Code: 1, State: j.State}
}

// Cancel is an operator's cancellation of job ID.
type Cancel struct {
	ID string
}

// CancelResult is the evidence of a cancellation: Code 1 cancelled (it was
// pending), 2 a running attempt was asked to stop, 0 refused; State is the
// job's state after it.
type CancelResult struct {
	Code  int
	State State
}

// Cancel applies a cancellation.
func (l Ledger) Cancel(in Cancel) (Ledger, CancelResult) {
	j := l.Get(in.ID)
	switch j.State {
	case Running:
		j.CancelRequested = true
	case Pending:
		j.State = Cancelled
	default:
		return l, CancelResult{State: j.State}
	}
	l = l.clone()
	l.Jobs[j.ID] = j
	if j.State == Running {
		return l, CancelResult{Code: 2, State: Running}
	}
	return l, CancelResult{Code: 1, State: Cancelled}
}

// SetPaused pauses (Paused true) or resumes the queue.
type SetPaused struct {
	Paused bool
}

// SetPaused applies a pause or a resume and reports whether the queue's
// state changed.
func (l Ledger) SetPaused(in SetPaused) (Ledger, bool) {
	changed := l.Paused != in.Paused
	l.Paused = in.Paused
	return l, changed
}

// Restart is a Redis restart: with Persistent (AOF, fsync always) every
// acknowledged write survives; without it every key is gone.
type Restart struct {
	Persistent bool
}

// Restart applies a restart. Without persistence the queue is empty after
// it: every job, operation id, the pause and the leader mark are gone. Tokens
// keep rising all the same, because they are never below the Redis clock.
func (l Ledger) Restart(in Restart) Ledger {
	if in.Persistent {
		return l
	}
	return NewLedger()
}
