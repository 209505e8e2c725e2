// Package workflow runs graphs of jobs whose every step happens once: a
// step runs when every step it depends on has succeeded, reads their
// outputs (jobs.Job.DependencyOutput), and is fenced like any job.
//
//	w := workflow.New("order").
//		Add("charge", Charge{Order: 7}).
//		Add("reserve", Reserve{Order: 7}, workflow.After("charge")).
//		Add("invoice", Invoice{Order: 7}, workflow.After("charge")).
//		Add("ship", Ship{Order: 7}, workflow.After("reserve", "invoice"))
//	res, err := workflow.Enqueue(ctx, client, w, workflow.OperationID("order:7"))
//
// The graph is validated before anything is written (names, dependencies,
// no cycle, at most MaxSteps steps, step args adding up to at most
// MaxPayloadBytes, every step's args as jobs.Client.Enqueue validates them)
// and written in one call: the steps of the first step's
// queue (the workflow's home) in one script, with the workflow's record.
// Steps of other queues are written first, waiting, and released by that
// commit, so a workflow is all there or not started. An operation id makes
// enqueueing twice return the first workflow.
//
// Each step is a job in state "waiting" until its last dependency
// succeeds; then it becomes pending exactly once (see ARCHITECTURE.md,
// "Workflows"). A step that ends dead or cancelled cancels the steps that
// depend on it, unless they allow it to fail (AllowFailure); an uncertain
// step holds them until it is reconciled; an operator's re-run of a failed
// step (jobs.Client.Resolve with DecideRerun) puts the steps its failure
// cancelled back to waiting, so the workflow resumes. A cancelled workflow
// does not resume: none of its steps starts again (see Cancel).
package workflow

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/fencedq/fencedq/internal/argtype"
	"github.com/fencedq/fencedq/internal/clientledger"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/jobs"
)

// MaxSteps bounds the steps of one workflow.
const MaxSteps = 1000

// MaxNameLen bounds a workflow's name (New), in bytes.
const MaxNameLen = 200

// MaxPayloadBytes bounds the sum of a workflow's step args (each step's is
// bounded by jobs.MaxPayloadBytes): the steps of one queue are written by
// one script call, which holds Redis for as long as it takes.
const MaxPayloadBytes = 16 << 20

// Workflow is a graph of steps under construction. Add records the first
// mistake; Validate and Enqueue report it.
type Workflow struct {
	name  string
	steps []*step
	index map[string]int
	err   error
}

type step struct {
	name      string
	args      jobs.JobArgs
	deps      []string
	allowFail []string
	opts      []jobs.Option
}

// StepOption configures one step.
type StepOption func(*step)

// After makes the step wait for steps deps, each named before or after it.
func After(deps ...string) StepOption {
	return func(s *step) { s.deps = append(s.deps, deps...) }
}

// AllowFailure lets the step run even when dependencies deps (which it
// must also wait for with After) end dead or cancelled: it then runs once
// its other dependencies succeeded, and DependencyOutput of a failed one
// returns jobs.ErrNoOutput.
func AllowFailure(deps ...string) StepOption {
	return func(s *step) { s.allowFail = append(s.allowFail, deps...) }
}

// Options gives the step's job enqueue options (jobs.Queue, jobs.MaxRetries,
// jobs.Timeout, jobs.OperationID, jobs.PartitionKey, jobs.Header,
// jobs.Limit, jobs.Rate, ...) as for jobs.Client.Enqueue. A step under a
// limit or rate is held back by it once its dependencies finished. A step
// cannot be unique (jobs.Unique) or grouped (jobs.Group, jobs.Grouper):
// Enqueue refuses both with an error matching jobs.ErrInvalid.
func Options(opts ...jobs.Option) StepOption {
	return func(s *step) { s.opts = append(s.opts, opts...) }
}

// New starts an empty workflow named name (shown by inspect and the
// dashboard; it may be empty): at most MaxNameLen bytes of UTF-8 without
// control characters, else Validate and Enqueue refuse it with an error
// matching jobs.ErrInvalid.
func New(name string) *Workflow { return &Workflow{name: name, index: map[string]int{}} }

var stepName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Add adds step name, running args, and returns w. A mistake (a bad or
// repeated name, an args type that cannot encode as a JSON object, a nil
// option) is kept and returned by Validate and
// Enqueue, matching jobs.ErrInvalid.
func (w *Workflow) Add(name string, args jobs.JobArgs, opts ...StepOption) *Workflow {
	if w.err != nil {
		return w
	}
	if w.index == nil { // a zero Workflow
		w.index = map[string]int{}
	}
	if !stepName.MatchString(name) {
		w.err = fmt.Errorf("%w: workflow step name %q must be 1-64 letters, digits, _ or -", jobs.ErrInvalid, ledger.Clip(name))
		return w
	}
	if _, dup := w.index[name]; dup {
		w.err = fmt.Errorf("%w: workflow step %q added twice", jobs.ErrInvalid, name)
		return w
	}
	if args != nil { // nil args are refused by Validate and Enqueue
		if err := argtype.CheckObject(reflect.TypeOf(args)); err != nil {
			w.err = fmt.Errorf("%w: workflow step %q: args type %v", jobs.ErrInvalid, name, err)
			return w
		}
	}
	s := &step{name: name, args: args}
	for i, o := range opts {
		if o == nil {
			w.err = fmt.Errorf("%w: workflow step %q: option %d is nil", jobs.ErrInvalid, name, i)
			return w
		}
		o(s)
	}
	w.index[name] = len(w.steps)
	w.steps = append(w.steps, s)
	return w
}

// Validate checks the graph as Enqueue does, writing nothing: an error
// matches jobs.ErrInvalid.
func (w *Workflow) Validate() error {
	_, err := w.plan(context.Background(), "validate", "", nil, nil)
	return err
}

// plan validates w and builds what the ledger writes for workflow id;
// opts (nil: the steps' own) are the steps' job options as the client's
// enqueue middleware left them; route (nil: none) moves the steps of
// partitioned queues to their partitions.
func (w *Workflow) plan(ctx context.Context, id, op string, opts [][]jobs.Option, route func(context.Context, []*ledger.NewJob) error) (*ledger.NewWorkflow, error) {
	if w.err != nil {
		return nil, w.err
	}
	switch {
	case len(w.steps) == 0:
		return nil, fmt.Errorf("%w: a workflow needs at least one step", jobs.ErrInvalid)
	case len(w.steps) > MaxSteps:
		return nil, fmt.Errorf("%w: a workflow has at most %d steps, not %d", jobs.ErrInvalid, MaxSteps, len(w.steps))
	case len(w.name) > MaxNameLen:
		return nil, fmt.Errorf("%w: a workflow's name has at most %d bytes", jobs.ErrInvalid, MaxNameLen)
	case !utf8.ValidString(w.name) || strings.ContainsFunc(w.name, unicode.IsControl):
		return nil, fmt.Errorf("%w: workflow name %q must be UTF-8 without control characters", jobs.ErrInvalid, ledger.Clip(w.name))
	}
	nw := &ledger.NewWorkflow{ID: id, OperationID: op}
	def := ledger.WorkflowDef{Name: w.name}
	next := make([][]ledger.StepRef, len(w.steps))
	jobsOf := make([]*ledger.NewJob, len(w.steps))
	size := 0
	for i, s := range w.steps {
		stepOpts := s.opts
		if opts != nil {
			stepOpts = opts[i]
		}
		p, err := jobs.Prepare(s.args, stepOpts...)
		if err != nil {
			return nil, fmt.Errorf("workflow step %q: %w", s.name, err)
		}
		size += len(p.Payload)
		switch {
		case size > MaxPayloadBytes:
			return nil, fmt.Errorf("%w: a workflow's step args add up to at most %d bytes (workflow.MaxPayloadBytes), over at step %q", jobs.ErrInvalid, MaxPayloadBytes, s.name)
		case p.Unique != nil:
			return nil, fmt.Errorf("%w: workflow step %q is unique (jobs.Unique): a workflow deduplicates as a whole, by its OperationID", jobs.ErrInvalid, s.name)
		case p.Group != "":
			// quoted as an enqueue's refusal quotes a group: the args'
			// sensitive values in it redacted, then cut
			return nil, fmt.Errorf("%w: workflow step %q names fair group %q: a step becomes due when its dependencies finish, not in its group's turn; give it a Limit keyed by the group for per-group concurrency",
				jobs.ErrInvalid, s.name, ledger.Clip(jobs.RedactText(s.args, p.Group)))
		}
		j := &ledger.NewJob{ID: id + "." + s.name, Kind: p.Kind, Queue: p.Queue, OperationID: p.OperationID,
			Resource: p.Resource, Payload: p.Payload, Display: p.Display, MaxRetries: p.MaxRetries, Timeout: p.Timeout,
			PartitionKey: p.PartitionKey, Headers: p.Headers, Flow: flowOf(p)}
		if j.PartitionKey == "" && j.Flow == nil {
			// A workflow's steps of one partitioned queue share a partition;
			// a step under a limit or rate goes where its key says, as a
			// job does, so every job of the key meets the same permits.
			j.PartitionKey = id
		}
		if !p.RunAt.IsZero() {
			j.Delay = time.Until(p.RunAt)
		}
		if j.OperationID == "" && op != "" {
			j.OperationID = op + "/" + s.name // the effect log's key, stable across a retried enqueue
			if len(j.OperationID) > jobs.MaxOperationIDLen {
				return nil, fmt.Errorf("%w: workflow step %q: its operation id %q/%s would exceed %d bytes: give the workflow a shorter OperationID or the step its own (jobs.OperationID)",
					jobs.ErrInvalid, s.name, op, s.name, jobs.MaxOperationIDLen)
			}
		}
		jobsOf[i] = j
		seen := map[string]bool{}
		for _, d := range s.deps {
			_, ok := w.index[d]
			switch {
			case !ok:
				return nil, fmt.Errorf("%w: workflow step %q depends on %q, which is not a step", jobs.ErrInvalid, s.name, d)
			case d == s.name:
				return nil, fmt.Errorf("%w: workflow step %q depends on itself", jobs.ErrInvalid, s.name)
			case seen[d]:
				return nil, fmt.Errorf("%w: workflow step %q depends on %q twice", jobs.ErrInvalid, s.name, d)
			}
			seen[d] = true
		}
		for _, a := range s.allowFail {
			if !seen[a] {
				return nil, fmt.Errorf("%w: workflow step %q allows %q to fail but does not depend on it (After)", jobs.ErrInvalid, s.name, a)
			}
		}
	}
	if cyc := cycle(w); cyc != "" {
		return nil, fmt.Errorf("%w: workflow steps form a cycle through %q", jobs.ErrInvalid, cyc)
	}
	if route != nil {
		if err := route(ctx, jobsOf); err != nil {
			return nil, err
		}
	}
	for i, s := range w.steps {
		for _, d := range s.deps {
			k := w.index[d]
			next[k] = append(next[k], ledger.StepRef{Queue: jobsOf[i].Queue, ID: jobsOf[i].ID})
		}
	}
	nw.Home = jobsOf[0].Queue
	for i, s := range w.steps {
		nw.Steps = append(nw.Steps, ledger.WorkflowStep{Job: jobsOf[i], Name: s.name, Deps: s.deps, AllowFail: s.allowFail, Next: next[i]})
		def.Steps = append(def.Steps, ledger.StepDef{Name: s.name, Queue: jobsOf[i].Queue, ID: jobsOf[i].ID,
			Kind: jobsOf[i].Kind, Deps: s.deps, AllowFail: s.allowFail})
	}
	rec, err := json.Marshal(def)
	if err != nil {
		return nil, fmt.Errorf("%w: workflow record: %v", jobs.ErrInvalid, err)
	}
	nw.Record = rec
	return nw, nil
}

// cycle returns a step on a cycle of w's dependencies, "" when there is
// none (Kahn's algorithm).
func cycle(w *Workflow) string {
	indeg := make([]int, len(w.steps))
	out := make([][]int, len(w.steps))
	for i, s := range w.steps {
		for _, d := range s.deps {
			k := w.index[d]
			out[k] = append(out[k], i)
			indeg[i]++
		}
	}
	var ready []int
	for i, n := range indeg {
		if n == 0 {
			ready = append(ready, i)
		}
	}
	done := 0
	for len(ready) > 0 {
		i := ready[len(ready)-1]
		ready = ready[:len(ready)-1]
		done++
		for _, j := range out[i] {
			if indeg[j]--; indeg[j] == 0 {
				ready = append(ready, j)
			}
		}
	}
	if done == len(w.steps) {
		return ""
	}
	for i, n := range indeg {
		if n > 0 {
			return w.steps[i].name
		}
	}
	return ""
}

// Option configures Enqueue.
type Option func(*enqueueOptions)

type enqueueOptions struct {
	op    string
	opSet bool // OperationID was given: "" then is refused, not taken for none
}

// OperationID deduplicates the workflow: enqueueing it again with the same
// operation id (while the first is kept, see jobs.Config.Retention)
// returns the first workflow and writes nothing, even when the graph
// given again differs (Result then describes the first). op is checked
// as jobs.ValidateOperationID checks a job's. Its steps' operation ids
// default to "<op>/<step>", which must fit in jobs.MaxOperationIDLen
// bytes too (else a step gives its own with jobs.OperationID). An empty op
// is refused with jobs.ErrInvalid, not taken for none: leave the option out
// for a workflow that is not deduplicated.
func OperationID(op string) Option {
	return func(o *enqueueOptions) { o.op, o.opSet = op, true }
}

// Result is what Enqueue wrote.
type Result struct {
	// ID is the workflow's id; Home the queue holding its record.
	ID, Home string
	// Deduplicated is true when a workflow with the same operation id
	// existed: ID, Home and Steps are that workflow's, and nothing was
	// written.
	Deduplicated bool
	// Steps maps each step's name to its job.
	Steps map[string]StepRef
}

// StepRef names a step's job. On a partitioned queue (see
// jobs.Client.SetPartitions) Queue is the step's partition ("q#k"): the
// steps of one queue share the workflow's partition (its id is their
// partition key) unless a step gives its own jobs.PartitionKey, or runs
// under a jobs.Limit or jobs.Rate without one: that step goes to the
// partition its limit's key (its rate's, without a limit) picks, as a job
// does, so the limit holds across the workflows of the queue.
type StepRef struct {
	// Queue is the queue of the step's job.
	Queue string `json:"queue"`
	// JobID is the id of the step's job.
	JobID string `json:"job_id"`
}

// ErrNotFound means no workflow has that id (or it expired).
var ErrNotFound = errors.New("workflow: not found")

// Enqueue validates w and writes it (see the package documentation). The
// steps pass through the client's enqueue middleware
// (jobs.Config.EnqueueMiddleware) as one batch, a request per step in the
// order they were added, and are validated after its last link. An
// error matching jobs.ErrInvalid means nothing was written. An error
// matching jobs.ErrWriteRefused or jobs.ErrOutOfMemory is Redis refusing
// a write (a read-only replica, such as a primary a failover demoted): the
// workflow was not committed; a workflow its operation id names is
// deduplicated only by the primary. An error matching jobs.ErrNotSent
// means a call never reached Redis (no connection could be made), or a
// read it needs first failed: the workflow was not committed either; on
// Redis Cluster with a master down, a first enqueue of an operation id
// (found in no queue read) is refused so, with a *jobs.PartialError naming
// the queues not read, where a workflow of it might have its home. Any other error (one from Redis, or
// too few replicas in durable mode, matches jobs.ErrEnqueueUnknown) leaves
// the workflow written whole, not at all, or (spanning queues) with steps
// written in other queues but not started: enqueueing again with the same
// OperationID then completes it, never doubles it.
func Enqueue(ctx context.Context, c *jobs.Client, w *Workflow, opts ...Option) (*Result, error) {
	l, err := clientledger.Of(c)
	if l == nil {
		return nil, fmt.Errorf("%w: workflow.Enqueue needs a *jobs.Client", jobs.ErrInvalid)
	}
	if err != nil {
		return nil, err
	}
	var o enqueueOptions
	for i, f := range opts {
		if f == nil {
			return nil, fmt.Errorf("%w: workflow.Enqueue: option %d is nil", jobs.ErrInvalid, i)
		}
		f(&o)
	}
	if o.op != "" || o.opSet {
		if err := jobs.ValidateOperationID(o.op); err != nil {
			return nil, fmt.Errorf("workflow: %w", err)
		}
	}
	if w == nil {
		return nil, fmt.Errorf("%w: workflow.Enqueue needs a workflow (New)", jobs.ErrInvalid)
	}
	id := "wf-" + uuid.NewString()
	if o.op != "" {
		sum := sha256.Sum256([]byte(o.op))
		id = "wf-" + hex.EncodeToString(sum[:16])
	}
	if w.err != nil {
		return nil, w.err
	}
	// The steps are enqueues of the client: its enqueue middleware (a trace
	// context, a tenant header) sees them as one batch, and the workflow is
	// validated and written after its last link.
	names, args, stepOpts := make([]string, len(w.steps)), make([]any, len(w.steps)), make([]any, len(w.steps))
	for i, s := range w.steps {
		names[i], args[i], stepOpts[i] = s.name, s.args, s.opts
	}
	var res *Result
	err = clientledger.Through(ctx, c, names, args, stepOpts, func(ctx context.Context, amended []any) ([]clientledger.Written, error) {
		opts := make([][]jobs.Option, len(amended))
		for i, a := range amended {
			opts[i], _ = a.([]jobs.Option)
		}
		route := func(ctx context.Context, js []*ledger.NewJob) error {
			return clientledger.Route(ctx, c, js)
		}
		nw, err := w.plan(ctx, id, o.op, opts, route)
		if err != nil {
			return nil, err
		}
		if o.op != "" {
			// a first enqueue of the operation id claims its home; one
			// that finds another home claimed moves there (see pinHome)
			nw.Claim = func(ctx context.Context) (*ledger.NewWorkflow, error) {
				got, err := l.ClaimWorkflowHome(ctx, nw.Home, o.op)
				if err != nil || got == nw.Home {
					return nil, err
				}
				moved, err := w.plan(ctx, id, o.op, opts, func(ctx context.Context, js []*ledger.NewJob) error {
					if err := route(ctx, js); err != nil {
						return err
					}
					pinHome(js, id, got)
					return nil
				})
				if err == nil {
					nw = moved
				}
				return moved, err
			}
		}
		got, dedup, err := l.EnqueueWorkflow(ctx, nw)
		if err != nil {
			return nil, err
		}
		res = &Result{ID: got, Home: nw.Home, Deduplicated: dedup, Steps: map[string]StepRef{}}
		for _, s := range nw.Steps {
			res.Steps[s.Name] = StepRef{Queue: s.Job.Queue, JobID: got + "." + s.Name}
		}
		if dedup {
			// the first workflow's steps: the graph given again may differ
			if err := existing(ctx, l, res); err != nil {
				return nil, err
			}
		}
		written := make([]clientledger.Written, len(nw.Steps))
		for i, s := range nw.Steps {
			ref, ok := res.Steps[s.Name]
			if !ok { // not a step of the first workflow: nothing names it
				ref = StepRef{Queue: s.Job.Queue, JobID: got + "." + s.Name}
			}
			op := s.Job.OperationID
			if op == "" {
				op = ref.JobID // a job without one is its own operation
			}
			written[i] = clientledger.Written{JobID: ref.JobID, OperationID: op, Queue: ref.Queue, Deduplicated: dedup}
		}
		return written, nil
	})
	switch {
	case err != nil:
		return nil, err
	case res == nil: // a middleware made up results instead of calling next
		return nil, fmt.Errorf("%w: the enqueue middleware returned results without writing the workflow (it must call next, or return an error)", jobs.ErrEnqueueUnknown)
	}
	return res, nil
}

// pinHome moves the home of workflow id (js[0]'s queue) to queue name
// got, the home the first enqueue of its operation id claimed
// (ledger.ClaimWorkflowHome), with the steps that share the home by the
// workflow's id as their partition key: an enqueue routing by a partition
// count read before the queue's partitions changed (grown, shrunk to
// none, or first declared) meets the first in one home, whose commit
// deduplicates it.
func pinHome(js []*ledger.NewJob, id, got string) {
	home := js[0].Queue
	for i, j := range js {
		if j.Queue == home && (i == 0 || j.PartitionKey == id) {
			j.Queue = got
		}
	}
}

// existing fills res (deduplicated) with the home and steps of the
// workflow it names, as its record holds them; one pruned meanwhile leaves
// res as it is. A Redis error matches jobs.ErrEnqueueUnknown: enqueueing
// again finds the workflow. Queues not read (on Redis Cluster, their
// master down) do not matter once a queue read is its home.
func existing(ctx context.Context, l *ledger.Ledger, res *Result) error {
	home, err := l.FindWorkflow(ctx, res.ID)
	if home == "" && err != nil {
		return fmt.Errorf("%w: reading the steps of workflow %s: %w", jobs.ErrEnqueueUnknown, res.ID, err)
	}
	if home == "" {
		return nil
	}
	info, err := l.Workflow(ctx, home, res.ID)
	if err != nil {
		return fmt.Errorf("%w: reading the steps of workflow %s: %w", jobs.ErrEnqueueUnknown, res.ID, err)
	}
	if info == nil {
		return nil
	}
	def, err := info.Def()
	if err != nil {
		return err
	}
	res.Home, res.Steps = home, make(map[string]StepRef, len(def.Steps))
	for _, s := range def.Steps {
		res.Steps[s.Name] = StepRef{Queue: s.Queue, JobID: s.ID}
	}
	return nil
}

// flowOf is a prepared step's flow control for the ledger (nil: none).
func flowOf(p *jobs.Prepared) *ledger.Flow {
	if p.LimitKey == "" && p.RateKey == "" {
		return nil
	}
	return &ledger.Flow{LimitKey: p.LimitKey, LimitMax: p.LimitMax, RateKey: p.RateKey, RateMax: p.RateMax, RatePer: p.RatePer}
}
