package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fencedq/fencedq/internal/cli"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
	"github.com/fencedq/fencedq/workflow"
)

func enqueueCmd(fs *flag.FlagSet) func(context.Context, io.Writer) error {
	var c commonFlags
	c.add(fs)
	kind := fs.String("kind", "", "job kind, as the workers registered it (required)")
	args := fs.String("args", "", `job args as a JSON object, e.g. '{"customer":"acme"}' (required; '{}' for none)`)
	queue := fs.String("queue", jobs.DefaultQueue, "queue")
	op := fs.String("op", "", "operation id (default: generated); a known one is deduplicated")
	delay := rangedDuration(fs, "delay", 0, "run after this delay")
	retries := rangedInt(fs, new(int), "max-retries", jobs.DefaultMaxRetries, 0, jobs.MaxMaxRetries, "retries after a failed attempt")
	timeout := rangedDuration(fs, "timeout", 0, "handler timeout (default: the pool's)")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	var flow flowFlags
	flow.add(fs)
	unchecked := fs.Bool("unchecked", false, "enqueue a kind no live pool runs, vouching that it has no Validate, Resource, Limit, RateLimit, Group or PartitionKey method and no sensitive fields (its args are shown as given); a kind a live pool reports with rules is refused all the same")
	return func(ctx context.Context, out io.Writer) error {
		if *kind == "" {
			return fmt.Errorf("%w: --kind is required: the job kind the workers registered", errUsage)
		}
		if *args == "" {
			return fmt.Errorf("%w: --args is required: the job's args as a JSON object ('{}' for none)", errUsage)
		}
		if err := checkOp(fs, *op); err != nil {
			return err
		}
		more, err := flow.options()
		if err != nil {
			return err
		}
		client, closeAll, err := c.openClient(ctx)
		if err != nil {
			return err
		}
		defer closeAll()
		opts := []jobs.Option{jobs.Queue(*queue), jobs.Delay(*delay), jobs.MaxRetries(*retries), jobs.Timeout(*timeout)}
		if *op != "" {
			opts = append(opts, jobs.OperationID(*op))
		}
		if *unchecked {
			opts = append(opts, jobs.Unchecked())
		}
		opts = append(opts, more...)
		// Raw JSON for every kind: the live pools' report of the kind's
		// rules decides whether it can be taken (see jobs.Client.EnqueueRaw).
		res, err := client.EnqueueRaw(ctx, *kind, []byte(*args), opts...)
		if err != nil {
			if errors.Is(err, jobs.ErrUnknownKind) {
				return fmt.Errorf("%w: no live pool runs kind %s, so its rules (Validate, Resource, sensitive fields, Limit, RateLimit, Group, PartitionKey) are unknown: start a pool that registers it, or pass --unchecked to vouch that it has none", errUsage, *kind)
			}
			if errors.Is(err, jobs.ErrInvalid) {
				return fmt.Errorf("%w: %v", errUsage, err)
			}
			return err
		}
		if *asJSON {
			return json.NewEncoder(cli.JSONWriter(out)).Encode(enqueued{JobID: res.JobID, Queue: res.Queue, OperationID: res.OperationID, Deduplicated: res.Deduplicated})
		}
		if res.Deduplicated {
			fmt.Fprint(out, cli.Escapef("deduplicated: operation %s already belongs to job %s\n", res.OperationID, res.JobID))
		} else {
			fmt.Fprint(out, cli.Escapef("enqueued job %s (queue %s, operation %s)\n", res.JobID, res.Queue, res.OperationID))
		}
		return nil
	}
}

// enqueued is enqueue --json's output.
type enqueued struct {
	JobID        string `json:"job_id"`
	Queue        string `json:"queue"`
	OperationID  string `json:"operation_id"`
	Deduplicated bool   `json:"deduplicated"`
}

func inspectCmd(fs *flag.FlagSet) func(context.Context, io.Writer) error {
	var c commonFlags
	c.add(fs)
	state := fs.String("state", "", "list jobs in this state: "+stateList())
	queue := fs.String("queue", "", "only this queue, or one of its partitions (default: all)")
	job := fs.String("job", "", "show one job and its history, by job id")
	op := fs.String("op", "", "show one job and its history, by operation id")
	limit := rangedInt(fs, new(int), "limit", 50, 1, jobs.MaxListWindow, "how many jobs to list")
	kind := fs.String("kind", "", "with --state: only jobs of this kind (reads at most 20000 index entries per queue; past that the total is a lower bound)")
	offset := rangedInt(fs, new(int), "offset", 0, 0, jobs.MaxListWindow, "with --state: skip this many jobs of the list (the next page starts at --offset plus --limit)")
	asJSON := fs.Bool("json", false, "print JSON")
	return func(ctx context.Context, out io.Writer) error {
		offsetGiven := false
		fs.Visit(func(f *flag.Flag) { offsetGiven = offsetGiven || f.Name == "offset" })
		switch {
		case offsetGiven && *state == "":
			return fmt.Errorf("%w: --offset pages a list: give it with --state", errUsage)
		case *kind != "" && *state == "":
			return fmt.Errorf("%w: --kind filters a list: give it with --state", errUsage)
		case *job != "" && *op != "":
			return fmt.Errorf("%w: --job and --op each name a job: give one of them", errUsage)
		case *state != "" && (*job != "" || *op != ""):
			return fmt.Errorf("%w: --state lists jobs, --job and --op show one: give one of them", errUsage)
		case *state == "" && *job == "" && *op == "":
			return fmt.Errorf("%w: give --state, or --job or --op (fencedq queues lists the queues)", errUsage)
		}
		if *state == "" { // --job or --op: one job
			mode := "--job"
			if *op != "" {
				mode = "--op"
			}
			if err := ignoredIn(fs, mode, "limit"); err != nil {
				return err
			}
		}
		if *state != "" && !jobs.State(*state).Valid() {
			return fmt.Errorf("%w: unknown state %q (want %s)", errUsage, *state, stateList())
		}
		if *state != "" && (*limit <= 0 || *limit > jobs.MaxListWindow) {
			return fmt.Errorf("%w: --limit %d must be 1-%d", errUsage, *limit, jobs.MaxListWindow)
		}
		if *state != "" && (*offset < 0 || *offset > jobs.MaxListWindow-*limit) {
			return fmt.Errorf("%w: --offset %d: --offset plus --limit must be 0-%d", errUsage, *offset, jobs.MaxListWindow)
		}
		if *queue != "" { // a queue, or a partition as a job's queue names it
			if err := jobs.ValidateQueueRef(*queue); err != nil {
				return fmt.Errorf("%w: --queue: %v", errUsage, err)
			}
		}
		if err := checkOp(fs, *op); err != nil {
			return err
		}
		if *kind != "" {
			if err := jobs.ValidateKind(*kind); err != nil {
				return fmt.Errorf("%w: --kind: %v", errUsage, err)
			}
		}
		client, closeAll, err := c.openClient(ctx)
		if err != nil {
			return err
		}
		defer closeAll()
		l := client.Inspector()
		if *state != "" {
			return listJobs(ctx, out, l, jobs.ListParams{State: jobs.State(*state), Queue: *queue, Kind: *kind, Offset: *offset, Limit: *limit}, *asJSON)
		}
		var rec *jobs.Record
		switch {
		case *job != "" && *queue != "":
			rec, err = l.Get(ctx, *queue, *job)
		case *job != "":
			var q string
			if q, err = findQueue(ctx, l, "", *job, "inspect"); err != nil {
				return err
			}
			rec, err = l.Get(ctx, q, *job)
		case *queue != "": // the same operation id on two queues is two jobs
			rec, err = l.FindByOperationIn(ctx, *queue, *op)
		default:
			rec, err = findByOperation(ctx, l, *op)
		}
		if err != nil {
			return inEmptyNamespace(ctx, l, notFound(err))
		}
		hist, err := l.History(ctx, rec.Queue, rec.ID)
		if err != nil {
			return err
		}
		paused, err := l.Paused(ctx, rec.Queue)
		if err != nil {
			return err
		}
		if *asJSON {
			if hist == nil {
				hist = []jobs.Entry{}
			}
			return json.NewEncoder(cli.JSONWriter(out)).Encode(struct {
				Job         *jobs.Record `json:"job"`
				History     []jobs.Entry `json:"history"`
				QueuePaused *jobs.Pause  `json:"queue_paused"`
			}{rec, hist, paused})
		}
		printJob(out, rec, hist, paused)
		return nil
	}
}

// stateList names the job states for help and errors.
func stateList() string {
	names := make([]string, len(jobs.States))
	for i, s := range jobs.States {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

// notFound makes a missing job one readable line.
func notFound(err error) error {
	if errors.Is(err, jobs.ErrNotFound) {
		return fmt.Errorf("%w (finished jobs are kept for the retention period)", err)
	}
	return err
}

// queueInfo is one line of fencedq queues.
type queueInfo struct {
	Queue  string               `json:"queue"`
	Counts map[jobs.State]int64 `json:"counts"`
	Paused *jobs.Pause          `json:"paused"`
	// Partitions is a partitioned queue's breakdown (absent otherwise).
	Partitions *jobs.QueueLayout `json:"partitions,omitempty"`
	// Unreachable names its queue names that could not be read (left out
	// of Counts; their master down, most likely).
	Unreachable []string `json:"unreachable,omitempty"`
	// Unserved is set when the queue holds pending jobs and no live pool
	// serves it (a queue name with a typo, most likely).
	Unserved bool `json:"unserved,omitempty"`
}

// markUnserved sets Unserved on each queue of infos holding pending jobs
// that no live pool serves, and returns a note naming them ("" for none,
// or when the pools could not be read).
func markUnserved(ctx context.Context, l *jobs.Inspector, infos []queueInfo) string {
	pools, err := l.Pools(ctx)
	if err != nil {
		return ""
	}
	served := map[string]bool{}
	for _, p := range pools {
		for q := range p.Queues {
			served[q] = true
		}
	}
	var note strings.Builder
	for i := range infos {
		q := &infos[i]
		if n := q.Counts[jobs.Pending]; n > 0 && !served[q.Queue] {
			q.Unserved = true
			fmt.Fprintf(&note, "queue %s has %d pending job(s) and no live pool serves it: check the queue name "+
				"given to jobs.Queue against the pools' Config.Queues (`fencedq pools` lists what each serves)\n", cli.Escape(q.Queue), n)
		}
	}
	return note.String()
}

func listQueues(ctx context.Context, out io.Writer, l *jobs.Inspector, queue string, asJSON bool) error {
	known, err := l.Queues(ctx)
	if err != nil {
		return err
	}
	names := known
	if queue != "" {
		names = []string{queue}
	}
	infos := make([]queueInfo, 0, len(names))
	if queue == "" {
		// Every queue in a fixed number of round trips.
		ov, err := l.Overview(ctx)
		if err != nil && !errors.Is(err, jobs.ErrPartial) {
			return err
		}
		for _, o := range ov {
			infos = append(infos, queueInfo{Queue: o.Queue, Counts: o.Counts, Paused: o.Paused, Partitions: o.Layout, Unreachable: o.Unreachable})
		}
		names = nil
	}
	for _, q := range names {
		var missed ledger.Partial
		counts, err := l.Counts(ctx, q)
		if !missed.Add(err) {
			return err
		}
		paused, err := l.Paused(ctx, q)
		if !missed.Add(err) {
			return err
		}
		lay, err := l.Partitions(ctx, q)
		if err != nil && !errors.Is(err, jobs.ErrPartial) {
			return err
		}
		var lost []string
		if pe := (*jobs.PartialError)(nil); errors.As(missed.Err(), &pe) {
			lost = pe.Unreachable
		}
		if lay.Count == 1 && len(lay.Partitions) == 1 {
			lay = nil // a plain queue
		}
		infos = append(infos, queueInfo{Queue: q, Counts: counts, Paused: paused, Partitions: lay, Unreachable: lost})
	}
	var lost []string
	for _, i := range infos {
		lost = append(lost, i.Unreachable...)
	}
	var partial error
	if len(lost) > 0 {
		partial = fmt.Errorf("%w: left out of the counts (shown as ? when nothing was read): %s", jobs.ErrPartial, strings.Join(lost, ", "))
	}
	unserved := markUnserved(ctx, l, infos)
	if asJSON {
		if err := json.NewEncoder(cli.JSONWriter(out)).Encode(infos); err != nil {
			return err
		}
		return partial
	}
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprint(tw, "QUEUE")
	for _, s := range jobs.States {
		fmt.Fprintf(tw, "\t%s", strings.ToUpper(string(s)))
	}
	fmt.Fprintln(tw, "\tPAUSED\tMASTER")
	for _, i := range infos {
		fmt.Fprint(tw, cli.Escape(i.Queue))
		none := i.Partitions == nil && len(i.Unreachable) > 0 // a plain queue not read
		for _, s := range jobs.States {
			if none {
				fmt.Fprint(tw, "\t?")
				continue
			}
			fmt.Fprintf(tw, "\t%d", i.Counts[s])
		}
		if none {
			fmt.Fprint(tw, "\t?\t\n")
		} else {
			fmt.Fprintf(tw, "\t%s\t\n", pauseText(i.Paused))
		}
		if i.Partitions != nil {
			partitionRows(tw, i.Partitions)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(out, "%d queue(s)\n", len(infos))
	fmt.Fprint(out, unserved)
	if queue == "" && len(infos) == 0 {
		fmt.Fprint(out, emptyNamespaceHint(l.Namespace()))
	}
	if queue != "" && !slices.Contains(known, queue) {
		fmt.Fprint(out, unknownQueueNote(queue))
	}
	return partial
}

// partitionRows writes a partitioned queue's partitions, indented under
// its line: the current layout's by number, earlier layouts' (draining)
// marked as such.
func partitionRows(tw io.Writer, lay *jobs.QueueLayout) {
	for _, p := range lay.Partitions {
		label := fmt.Sprintf("  #%d %s", p.Index, p.Name)
		if p.Index < 0 {
			label = "  (earlier) " + p.Name
		}
		fmt.Fprint(tw, cli.Escape(label))
		for _, s := range jobs.States {
			if p.Unreachable != "" {
				fmt.Fprint(tw, "\t?")
				continue
			}
			fmt.Fprintf(tw, "\t%d", p.Counts[s])
		}
		paused := pauseText(p.Paused)
		if p.Unreachable != "" {
			paused = "?"
		}
		fmt.Fprintf(tw, "\t%s\t%s\n", paused, cli.Escape(p.Master))
	}
}

// partialError is the error ending a listing that left out the
// partitions of lay it could not read (nil when it read them all): the
// rows are printed, and the command exits non-zero naming them.
func partialError(lays ...*jobs.QueueLayout) error {
	var lost []string
	for _, lay := range lays {
		for _, p := range lay.Partitions {
			if p.Unreachable != "" {
				lost = append(lost, fmt.Sprintf("%s on %s (%s)", p.Name, p.Master, p.Unreachable))
			}
		}
	}
	if len(lost) == 0 {
		return nil
	}
	return fmt.Errorf("%w: shown as ?: %s", jobs.ErrPartial, strings.Join(lost, "; "))
}

func partitionsCmd(fs *flag.FlagSet) func(context.Context, io.Writer) error {
	var c commonFlags
	c.add(fs)
	queue := fs.String("queue", "", "queue (required)")
	set := rangedInt(fs, new(int), "set", 0, 1, jobs.MaxPartitions, fmt.Sprintf("declare the queue with this many partitions (1-%d; 1: none); new jobs go to the new layout, jobs in the old one drain", jobs.MaxPartitions))
	actor := fs.String("actor", "", "who changes the layout (required with --set; recorded as operator:<actor>)")
	note := fs.String("note", "", "why (recorded with the change)")
	asJSON := fs.Bool("json", false, "print JSON")
	return func(ctx context.Context, out io.Writer) error {
		if *queue == "" {
			return fmt.Errorf("%w: --queue is required", errUsage)
		}
		if err := jobs.ValidateQueue(*queue); err != nil {
			return fmt.Errorf("%w: --queue: %v", errUsage, err)
		}
		given, noted := false, false // --set 0 is refused, not taken for "not given"
		fs.Visit(func(f *flag.Flag) { given, noted = given || f.Name == "set", noted || f.Name == "note" })
		if noted && !given {
			return fmt.Errorf("%w: --note is recorded with a change: give it with --set", errUsage)
		}
		if given && (*set < 1 || *set > jobs.MaxPartitions) {
			return fmt.Errorf("%w: --set %d is outside 1-%d", errUsage, *set, jobs.MaxPartitions)
		}
		if given && strings.TrimSpace(*actor) == "" {
			return fmt.Errorf("%w: --set needs --actor (who changes the layout, or set FENCEDQ_ACTOR)", errUsage)
		}
		client, closeAll, err := c.openClient(ctx)
		if err != nil {
			return err
		}
		defer closeAll()
		prev := 0
		if *set > 0 {
			if prev, err = client.SetPartitions(ctx, *queue, *set, *actor, strings.TrimSpace(*note)); err != nil {
				return operatorError("set partitions", err)
			}
		}
		lay, err := client.Inspector().Partitions(ctx, *queue)
		if err != nil && !errors.Is(err, jobs.ErrPartial) {
			return err
		}
		changes, err := client.Inspector().PartitionChanges(ctx, *queue)
		if err != nil {
			return err
		}
		if *asJSON {
			if err := json.NewEncoder(cli.JSONWriter(out)).Encode(struct {
				*jobs.QueueLayout
				Changes []jobs.PartitionChange `json:"changes"`
			}{lay, changes}); err != nil {
				return err
			}
			return partialError(lay)
		}
		if *set > 0 {
			fmt.Fprint(out, cli.Escapef("queue %s: %d partition(s), was %d; clients and pools follow within %v\n", *queue, *set, prev, jobs.PartitionRefresh))
		}
		fmt.Fprint(out, cli.Escapef("queue %s has %d partition(s)\n", *queue, lay.Count))
		tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
		fmt.Fprint(tw, "PARTITION")
		for _, s := range jobs.States {
			fmt.Fprintf(tw, "\t%s", strings.ToUpper(string(s)))
		}
		fmt.Fprintln(tw, "\tPAUSED\tMASTER")
		partitionRows(tw, lay)
		if err := tw.Flush(); err != nil {
			return err
		}
		if *set == 0 && len(changes) == 0 {
			known, err := client.Inspector().Queues(ctx)
			if err != nil {
				return err
			}
			if !slices.Contains(known, ledger.Logical(*queue)) {
				fmt.Fprint(out, unknownQueueNote(*queue))
			}
		}
		if len(changes) == 0 {
			return partialError(lay)
		}
		fmt.Fprintln(out, "\nlayout changes, newest first:")
		tw = tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  AT\tFROM\tTO\tBY\tNOTE")
		for _, ch := range changes {
			fmt.Fprint(tw, cli.Escapef("  %s\t%d\t%d\t%s\t%s\n", timeText(ch.At), ch.From, ch.To, ch.Actor, orDash(ch.Note)))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		return partialError(lay)
	}
}

// emptyNamespaceHint follows a listing of a namespace without queues: the
// likely cause is a namespace other than the workers'.
func emptyNamespaceHint(ns string) string {
	return fmt.Sprintf("namespace %s has no queues: no job was enqueued and no pool ran in it yet on this Redis; "+
		"if you expected some, give the workers' namespace with --namespace (or FENCEDQ_NAMESPACE)\n", ns)
}

// emptyNamespaceNote is emptyNamespaceHint when l's namespace has no
// queues, "" when it has some (or they cannot be read): the note for an
// empty listing or a missing job or workflow.
func emptyNamespaceNote(ctx context.Context, l *jobs.Inspector) string {
	if qs, err := l.Queues(ctx); err != nil || len(qs) > 0 {
		return ""
	}
	return emptyNamespaceHint(l.Namespace())
}

// inEmptyNamespace adds emptyNamespaceNote to the error of a job or
// workflow not found, so looking one up in the wrong namespace says so.
func inEmptyNamespace(ctx context.Context, l *jobs.Inspector, err error) error {
	if !errors.Is(err, jobs.ErrNotFound) && !errors.Is(err, workflow.ErrNotFound) {
		return err
	}
	if note := emptyNamespaceNote(ctx, l); note != "" {
		return fmt.Errorf("%w; %s", err, strings.TrimSuffix(note, "\n"))
	}
	return err
}

// pauseText describes a pause in one line ("no" while the queue runs),
// escaped for a terminal.
func pauseText(p *jobs.Pause) string {
	if p == nil {
		return "no"
	}
	s := "by " + p.Actor + " since " + p.At.UTC().Format(time.RFC3339)
	if p.Note != "" {
		s += ": " + p.Note
	}
	return cli.Escape(s)
}

// listJobs prints one page of p (its State's jobs of its Queue and Kind, or
// of every queue merged in index order: pending, the soonest due first).
func listJobs(ctx context.Context, out io.Writer, l *jobs.Inspector, p jobs.ListParams, asJSON bool) error {
	s, queue, offset, limit := p.State, p.Queue, p.Offset, p.Limit
	known, err := l.Queues(ctx)
	if err != nil {
		return err
	}
	queues := known
	if queue != "" {
		queues = []string{queue}
	}
	// One list over every queue: --offset and --limit page the merged list,
	// not each queue's.
	// With a Cluster master down, the jobs the others hold are printed and
	// the command fails naming the queue names not read.
	var missed ledger.Partial
	page, err := l.List(ctx, p)
	if !missed.Add(err) {
		if errors.Is(err, jobs.ErrInvalid) {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
		return err
	}
	all, total, exact := page.Jobs, page.Total, page.TotalExact
	var paused []string
	if queue == "" {
		// Every queue's pause in a fixed number of round trips.
		all, err := l.AllPaused(ctx)
		if !missed.Add(err) {
			return err
		}
		for _, p := range all {
			if p.Paused != nil {
				paused = append(paused, cli.Escape(p.Queue)+" ("+pauseText(p.Paused)+")")
			}
		}
	} else if pause, err := l.Paused(ctx, queue); !missed.Add(err) {
		return err
	} else if pause != nil {
		paused = append(paused, cli.Escape(queue)+" ("+pauseText(pause)+")")
	}
	if asJSON {
		recs := make([]*jobs.Record, len(all))
		for i, j := range all {
			recs[i] = j.Record
		}
		if err := json.NewEncoder(cli.JSONWriter(out)).Encode(recs); err != nil {
			return err
		}
		return missed.Err()
	}
	now := time.Now()
	if t, err := l.ServerTime(ctx); err == nil {
		now = t // due times are Redis's
	}
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	header := "JOB\tQUEUE\tKIND\tOPERATION\tATTEMPTS\tTOKEN\tFENCE\tREASON"
	if s == jobs.Pending {
		header = "JOB\tQUEUE\tKIND\tOPERATION\tDUE\tATTEMPTS\tTOKEN\tFENCE\tREASON"
	}
	fmt.Fprintln(tw, header)
	for _, j := range all {
		r := j.Record
		reason := r.Reason
		if r.CancelledBy != "" && r.State == jobs.Running {
			reason = "cancel requested by " + r.CancelledBy
		}
		if r.WaitingFor != "" {
			// what a pending job waits for now: a reason kept from an
			// earlier put-back ("resource busy") no longer says it
			reason = "waiting for " + r.Shown(r.WaitingFor)
		}
		q := r.Queue
		if r.Bridge != "" {
			q += " (" + r.Bridge + ")"
		}
		due := ""
		if s == jobs.Pending {
			due = dueText(r, j.IndexAt, now) + "\t"
		}
		fmt.Fprint(tw, cli.Escapef("%s\t%s\t%s\t%s\t", r.ID, q, r.Kind, r.OperationID)+due+cli.Escapef("%d\t%d\t%s\t%s\n", r.Attempts, r.Token, fenceText(r.Fence), reason))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	more, next := "", ""
	if !exact {
		more = " or more"
	}
	if int64(offset+limit) < total {
		next = fmt.Sprintf("; next page: --offset %d", offset+limit)
	}
	switch {
	case offset > 0 && len(all) == 0:
		fmt.Fprintf(out, "no %s job at --offset %d (%d%s in all)\n", s, offset, total, more)
	case offset > 0:
		fmt.Fprintf(out, "jobs %d-%d of %d%s %s job(s) shown (--offset %d --limit %d)%s\n", offset+1, offset+len(all), total, more, s, offset, limit, next)
	case int64(len(all)) < total:
		fmt.Fprintf(out, "%d of %d%s %s job(s) shown (--limit %d)%s\n", len(all), total, more, s, limit, next)
	default:
		fmt.Fprintf(out, "%d %s job(s)\n", len(all), s)
	}
	if queue == "" && len(queues) == 0 {
		fmt.Fprint(out, emptyNamespaceHint(l.Namespace()))
	}
	for _, p := range paused {
		fmt.Fprintf(out, "paused queue %s\n", p)
	}
	if queue != "" && !slices.Contains(known, ledger.Logical(queue)) {
		fmt.Fprint(out, unknownQueueNote(queue))
	}
	return missed.Err()
}

// unknownQueueNote follows the output about a queue the namespace does not
// list: most likely a mistyped name.
func unknownQueueNote(queue string) string {
	return cli.Escapef("note: no job or pool has used queue %s yet; check its name\n", queue)
}

// dueText says when a pending job is due: "now" once its due time (by
// Redis's clock, now) has passed, else the time and how far off it is. It
// is escaped (a bridged job's bridge name is a field of its record).
func dueText(r *jobs.Record, due, now time.Time) string {
	switch {
	case r.Bridge != "":
		return "when " + cli.Escape(r.Bridge) + " redelivers it"
	case !due.After(now):
		return "now"
	}
	return fmt.Sprintf("%s (in %s)", due.UTC().Format(time.RFC3339), due.Sub(now).Round(time.Second))
}

// byWhom is who did an operator action, and why when a note was given.
func byWhom(actor, note string) string {
	if note == "" {
		return "by " + actor
	}
	return "by " + actor + ": " + note
}

func fenceText(t lease.Token) string {
	if t == 0 {
		return "-"
	}
	return t.String()
}

func printJob(out io.Writer, r *jobs.Record, hist []jobs.Entry, paused *jobs.Pause) {
	q := r.Queue
	if r.Bridge != "" {
		q += " (delivered by " + r.Bridge + " through the bridge)"
	}
	fmt.Fprint(out, cli.Escapef("job %s\n  kind %s, queue %s, operation %s\n  state %s", r.ID, r.Kind, q, r.OperationID, r.State))
	if r.Reason != "" {
		fmt.Fprint(out, cli.Escapef(" (%s)", r.Reason))
	}
	fmt.Fprintf(out, "\n  attempts %d, token %d", r.Attempts, r.Token)
	if r.Runs > 0 {
		fmt.Fprintf(out, ", runs %d (re-run by operators)", r.Runs)
	}
	if r.Fence > 0 {
		fmt.Fprintf(out, ", fence %d (the resource lease's token)", r.Fence)
	}
	fmt.Fprint(out, cli.Escapef(", resource %s\n  args %s\n", r.Shown(r.LeaseResource()), r.Args))
	if len(r.Headers) > 0 {
		kv := make([]string, 0, len(r.Headers))
		for _, k := range slices.Sorted(maps.Keys(r.Headers)) {
			kv = append(kv, k+"="+r.Headers[k])
		}
		fmt.Fprint(out, cli.Escapef("  headers %s\n", strings.Join(kv, ", ")))
	}
	if r.UniqueKey != "" {
		states := make([]string, len(r.UniqueStates))
		for i, st := range r.UniqueStates {
			states[i] = string(st)
		}
		fmt.Fprint(out, cli.Escapef("  unique key %s, held while %s\n", r.UniqueKey, strings.Join(states, ", ")))
	}
	if r.LimitKey != "" {
		fmt.Fprint(out, cli.Escapef("  limit %s, at most %d at once\n", r.Shown(r.LimitKey), r.LimitMax))
	}
	if r.RateKey != "" {
		fmt.Fprint(out, cli.Escapef("  rate %s, at most %d starts per %v\n", r.Shown(r.RateKey), r.RateMax, r.RatePer))
	}
	if r.Group != "" {
		fmt.Fprint(out, cli.Escapef("  group %s\n", r.Shown(r.Group)))
	}
	if r.WaitingFor != "" {
		fmt.Fprint(out, cli.Escapef("  waiting for %s\n", r.Shown(r.WaitingFor)))
	}
	if r.Error != "" {
		fmt.Fprint(out, cli.Escapef("  last error %s\n", r.Error))
	}
	if p := r.Progress; p != nil {
		fmt.Fprint(out, "  progress ", progressText(p))
		if p.Attempt != r.Attempts {
			fmt.Fprint(out, " (an earlier attempt's)")
		}
		fmt.Fprintln(out)
	}
	if len(r.Output) > 0 {
		fmt.Fprint(out, cli.Escapef("  output %s\n", r.Output))
	}
	if r.Workflow != "" {
		fmt.Fprint(out, cli.Escapef("  step %s of workflow %s (fencedq workflow inspect --id %s)\n", r.Step, r.Workflow, r.Workflow))
	}
	if r.CancelledBy != "" && r.State == jobs.Running {
		fmt.Fprint(out, cli.Escapef("  cancel requested by %s: the attempt is asked to stop; its outcome is still committed by its token\n", r.CancelledBy))
	}
	if paused != nil {
		fmt.Fprint(out, cli.Escapef("  queue %s is paused %s\n", r.Queue, pauseText(paused)))
	}
	fmt.Fprintln(out, "history:")
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	for _, e := range hist {
		detail := ""
		fence := ""
		if e.Fence != "" {
			fence = " fence " + e.Fence
		}
		switch e.Event {
		case "attempt":
			detail = fmt.Sprintf("attempt %d token %s%s", e.Attempt, e.Token, fence) // never the owner: with the token, a credential
		case "end":
			detail = strings.TrimSpace(fmt.Sprintf("attempt %d token %s%s -> %s %s %s", e.Attempt, e.Token, fence, e.Outcome, e.Reason, e.Error))
		case "fenced":
			detail = fmt.Sprintf("stale %s by token %s rejected", e.Stage, e.Token)
		case "resolve":
			to := e.Decision
			if e.Outcome != "" && e.Outcome != e.Decision {
				// what the decision did: a "not applied" retried or dead, a
				// re-run that ended cancelled or waits
				to += " -> " + e.Outcome
			}
			detail = fmt.Sprintf("%s -> %s %s", e.From, to, byWhom(e.Actor, e.Note))
		case "cancel":
			detail = fmt.Sprintf("%s job cancelled %s", e.From, byWhom(e.Actor, e.Note))
			if e.From == string(jobs.Running) {
				detail = "running attempt asked to stop " + byWhom(e.Actor, e.Note)
			}
		case "run_now":
			detail = "made due now " + byWhom(e.Actor, e.Note)
		case "deduplicated":
			detail = "found due again after it finished: dropped, the handler did not run"
		}
		fmt.Fprint(tw, cli.Escapef("  %s\t%s\t%s\n", e.At.UTC().Format(time.RFC3339Nano), e.Event, detail))
	}
	_ = tw.Flush()
}

// operatorFlags are shared by the operator commands.
type operatorFlags struct {
	commonFlags
	actor  string
	note   string
	asJSON bool
}

func (o *operatorFlags) add(fs *flag.FlagSet, noteRequired bool) {
	o.commonFlags.add(fs)
	fs.StringVar(&o.actor, "actor", "", "who acts (required; recorded as operator:<actor>)")
	if noteRequired {
		fs.StringVar(&o.note, "note", "", "why (required; recorded with the action)")
	} else {
		fs.StringVar(&o.note, "note", "", "why (recorded with the action)")
	}
	fs.BoolVar(&o.asJSON, "json", false, "print the result as JSON")
}

// check validates the operator flags before Redis is touched.
// The note is trimmed, as the dashboard trims it.
func (o *operatorFlags) check(noteRequired bool) error {
	o.note = strings.TrimSpace(o.note)
	if strings.TrimSpace(o.actor) == "" {
		return fmt.Errorf("%w: --actor is required: who acts (or set FENCEDQ_ACTOR)", errUsage)
	}
	if noteRequired && strings.TrimSpace(o.note) == "" {
		return fmt.Errorf("%w: --note is required (say why)", errUsage)
	}
	// checked before any lookup: a bad note is bad usage (exit 2) even for
	// a job that does not exist
	if err := jobs.ValidateActor(o.actor); err != nil {
		return fmt.Errorf("%w: --actor: %v", errUsage, err)
	}
	if err := jobs.ValidateNote(o.note); err != nil {
		return fmt.Errorf("%w: --note: %v", errUsage, err)
	}
	return nil
}

// operatorError turns a ledger error into one readable line: invalid input
// is bad usage (exit 2); a missing job or a wrong state fails (exit 1), a
// wrong state with what the action takes.
func operatorError(action string, err error) error {
	switch {
	case errors.Is(err, jobs.ErrInvalid):
		return fmt.Errorf("%w: %v", errUsage, err)
	case errors.Is(err, jobs.ErrNotFound):
		return fmt.Errorf("cannot %s: %w", action, notFound(err))
	case errors.Is(err, jobs.ErrWrongState):
		return fmt.Errorf("cannot %s: %w (%s)", action, err, takes[action])
	}
	return err
}

// takes says which states an action accepts.
var takes = map[string]string{
	"cancel":  "cancel takes a pending or running job, or a waiting workflow step",
	"run-now": "run-now takes a pending (scheduled) job not held back by its limit or rate",
	"resolve": "succeeded and dead take an uncertain or review job; rerun also takes a dead or cancelled one",
}

// checkOp refuses, as bad usage, an --op no enqueue takes (empty, too
// long, control characters): it names no job. An --op not given on fs
// passes; one given empty is refused, never read as not given.
func checkOp(fs *flag.FlagSet, op string) error {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == "op" })
	if !given {
		return nil
	}
	if err := jobs.ValidateOperationID(op); err != nil {
		return fmt.Errorf("%w: --op: %v", errUsage, err)
	}
	return nil
}

// findByOperation returns the job owning operation id op in whichever
// queue holds one. The same operation id on two queues is two jobs: found
// in more than one, it is a usage error naming them (give --queue), never
// either job. With a Cluster master down, the job found in the queues read
// is returned when they hold one (the others may hold another: give
// --queue to be sure), and the error names those not read when they hold
// none.
func findByOperation(ctx context.Context, l *jobs.Inspector, op string) (*jobs.Record, error) {
	recs, err := l.FindByOperationAll(ctx, op)
	if err != nil && (!errors.Is(err, jobs.ErrPartial) || len(recs) == 0) {
		if errors.Is(err, jobs.ErrPartial) {
			return nil, fmt.Errorf("operation %s: in no queue read: %w", op, err)
		}
		return nil, err
	}
	switch {
	case len(recs) == 0:
		return nil, fmt.Errorf("%w: operation %s", jobs.ErrNotFound, op)
	case len(recs) > 1:
		in := make([]string, len(recs))
		for i, r := range recs {
			in[i] = ledger.Logical(r.Queue)
		}
		return nil, fmt.Errorf("%w: operation %s names a job in each of queues %s: give --queue", errUsage, op, strings.Join(in, ", "))
	}
	return recs[0], nil
}

// findQueue returns queue, or looks job id up in every queue when empty.
// A job id can be in two queues (a bridged task's id is unique only in
// its asynq queue): found in more than one, it is a usage error naming
// them (give --queue), never either job. With a Cluster master down, the
// queue found among those read is returned when they hold the job, and
// the error names those not read when they do not.
func findQueue(ctx context.Context, l *jobs.Inspector, queue, id, action string) (string, error) {
	if queue != "" {
		return queue, nil
	}
	in, err := l.QueuesHolding(ctx, id)
	if err != nil && (!errors.Is(err, jobs.ErrPartial) || len(in) == 0) {
		if errors.Is(err, jobs.ErrPartial) {
			return "", fmt.Errorf("cannot %s: job %s is in no queue read (give --queue): %w", action, id, err)
		}
		return "", err
	}
	switch {
	case len(in) == 0:
		return "", inEmptyNamespace(ctx, l, operatorError(action, fmt.Errorf("%w: %s", jobs.ErrNotFound, id)))
	case len(in) > 1:
		return "", fmt.Errorf("%w: job %s is in each of queues %s: give --queue", errUsage, id, strings.Join(in, ", "))
	}
	return in[0], nil
}

func resolveCmd(fs *flag.FlagSet) func(context.Context, io.Writer) error {
	var o operatorFlags
	o.add(fs, false)
	var fl fenceFlags
	job := fs.String("job", "", "job id (this or --op is required)")
	op := fs.String("op", "", "the job's operation id, instead of --job")
	queue := fs.String("queue", "", "the job's queue (default: looked up)")
	decision := fs.String("decision", "", "succeeded, rerun or dead (required); rerun also takes a dead or cancelled job; rerun or dead of an uncertain or review job needs --fence-postgres or --fence-redis (or --unfenced)")
	seenState := fs.String("seen-state", "", "decide only while the job is still in this state (as inspect showed it)")
	seenToken := fs.String("seen-token", "", "with --seen-state: decide only while the job still holds this token (0: never claimed)")
	seenRuns := fs.String("seen-runs", "", "with --seen-token: decide only while the job is still on this run (as inspect showed it; default 0: never re-run)")
	fl.add(fs)
	return func(ctx context.Context, out io.Writer) error {
		if *job != "" && *op != "" {
			return fmt.Errorf("%w: --job and --op each name a job: give one of them", errUsage)
		}
		if (*job == "" && *op == "") || o.actor == "" {
			return fmt.Errorf("%w: --job or --op, and --actor are required (--actor: who acts, or set FENCEDQ_ACTOR)", errUsage)
		}
		d := jobs.Decision(*decision)
		if d != jobs.DecideSucceeded && d != jobs.DecideRerun && d != jobs.DecideDead {
			return fmt.Errorf("%w: --decision must be succeeded, rerun or dead", errUsage)
		}
		seen, err := seenFlags(*seenState, *seenToken, *seenRuns)
		if err != nil {
			return err
		}
		if err := o.check(false); err != nil {
			return err
		}
		if err := checkOp(fs, *op); err != nil {
			return err
		}
		if err := fl.check(fs); err != nil {
			return err
		}
		if err := o.checkNamespace(); err != nil {
			return err
		}
		fr, closeFence, err := fl.open(ctx, o.namespace, true)
		if err != nil {
			return err
		}
		defer closeFence()
		o.fencer = fr
		client, closeAll, err := o.openClient(ctx)
		if err != nil {
			return err
		}
		defer closeAll()
		id := *job
		var q string
		var rec *jobs.Record
		if *op != "" {
			if *queue != "" { // the same operation id on two queues is two jobs
				rec, err = client.Inspector().FindByOperationIn(ctx, *queue, *op)
			} else {
				rec, err = findByOperation(ctx, client.Inspector(), *op)
			}
			if err != nil {
				return inEmptyNamespace(ctx, client.Inspector(), operatorError("resolve", err))
			}
			id, q = rec.ID, rec.Queue
		} else if q, err = findQueue(ctx, client.Inspector(), *queue, *job, "resolve"); err != nil {
			return err
		}
		fencing := false // the decision says the last attempt did not apply: fence it out first
		if d != jobs.DecideSucceeded {
			if seen == nil {
				if rec == nil {
					if rec, err = client.Inspector().Get(ctx, q, id); err != nil {
						return inEmptyNamespace(ctx, client.Inspector(), operatorError("resolve", err))
					}
				}
				// Held to the job as read: what this command checked
				// (and says it fenced, or that it needed no fence) is
				// what the decision lands on. A job read in a state the
				// decision does not take (running) fails too, rather than
				// take it in a state it reached since (uncertain, its
				// attempt fenced out of no store).
				seen = &jobs.Seen{State: rec.State, Token: rec.Token, Runs: rec.Runs}
			}
			if afterResolveRead != nil {
				afterResolveRead()
			}
			fencing = seen != nil && (seen.State == jobs.Uncertain || seen.State == jobs.Review)
			if fencing && fr == nil && !fl.unfenced {
				return fmt.Errorf("cannot resolve: %w: a %s decision on %s job %s says its last attempt did not apply its operation, yet that attempt may still be running; "+
					"give the store the handlers write through, --fence-postgres URL or --fence-redis URL, to fence the attempt out first, "+
					"or --unfenced to decide without (a late write of the attempt may then apply the operation too); nothing was decided",
					errUnfenced, d, seen.State, id)
			}
		}
		if seen != nil {
			rec, err = client.ResolveSeen(ctx, q, id, *seen, d, o.actor, o.note)
		} else {
			rec, err = client.Resolve(ctx, q, id, d, o.actor, o.note)
		}
		if err != nil {
			return inEmptyNamespace(ctx, client.Inspector(), operatorError("resolve", err))
		}
		fenced, unfenced := fencing && fr != nil, fencing && fr == nil
		if o.asJSON {
			return json.NewEncoder(cli.JSONWriter(out)).Encode(struct {
				Job       *jobs.Record  `json:"job"`
				Decision  jobs.Decision `json:"decision"`
				FencedOut bool          `json:"fenced_out"`
				Unfenced  bool          `json:"unfenced"`
			}{rec, d, fenced, unfenced})
		}
		fmt.Fprint(out, cli.Escapef("job %s is now %s\n", rec.ID, rec.State))
		switch {
		case fenced:
			fmt.Fprintf(out, "its last attempt was fenced out of %s first: a late write of it is refused as stale\n", fl.name())
		case unfenced:
			fmt.Fprintln(out, "its last attempt was NOT fenced out (--unfenced): should it still be running, a late write of it may apply the operation too")
		}
		return nil
	}
}

// afterResolveRead, set by tests, is called by resolve between its read
// of the job and its decision.
var afterResolveRead func()

// jobCommand builds an operator command acting on one job (--job, looked
// up in every queue unless --queue is given): do performs the action, with
// what the operator saw when --seen-state is given (nil otherwise), show
// prints its result as text or JSON.
func jobCommand(fs *flag.FlagSet, action string, noteRequired bool,
	do func(c *jobs.Client, ctx context.Context, q, id string, seen *jobs.Seen, actor, note string) (*jobs.Record, error),
	show func(ctx context.Context, in *jobs.Inspector, out io.Writer, rec *jobs.Record, asJSON bool) error) func(context.Context, io.Writer) error {
	var o operatorFlags
	o.add(fs, noteRequired)
	job := fs.String("job", "", "job id (required)")
	queue := fs.String("queue", "", "the job's queue (default: looked up)")
	seenState := fs.String("seen-state", "", "act only while the job is still in this state (as inspect showed it)")
	seenToken := fs.String("seen-token", "", "with --seen-state: act only while the job still holds this token (0: never claimed)")
	seenRuns := fs.String("seen-runs", "", "with --seen-token: act only while the job is still on this run (as inspect showed it; default 0: never re-run)")
	return func(ctx context.Context, out io.Writer) error {
		if *job == "" {
			return fmt.Errorf("%w: --job is required", errUsage)
		}
		if err := o.check(noteRequired); err != nil {
			return err
		}
		seen, err := seenFlags(*seenState, *seenToken, *seenRuns)
		if err != nil {
			return err
		}
		client, closeAll, err := o.openClient(ctx)
		if err != nil {
			return err
		}
		defer closeAll()
		q, err := findQueue(ctx, client.Inspector(), *queue, *job, action)
		if err != nil {
			return err
		}
		rec, err := do(client, ctx, q, *job, seen, o.actor, o.note)
		if err != nil {
			return inEmptyNamespace(ctx, client.Inspector(), operatorError(action, err))
		}
		return show(ctx, client.Inspector(), out, rec, o.asJSON)
	}
}

// seenFlags parses --seen-state, --seen-token and --seen-runs (nil when
// none is given; any token and run without --seen-token; run 0 with it
// unless --seen-runs says otherwise).
func seenFlags(state, token, runs string) (*jobs.Seen, error) {
	if runs != "" && token == "" {
		return nil, fmt.Errorf("%w: --seen-runs needs --seen-token", errUsage)
	}
	if state == "" {
		if token != "" {
			return nil, fmt.Errorf("%w: --seen-token needs --seen-state", errUsage)
		}
		return nil, nil
	}
	seen := &jobs.Seen{State: jobs.State(state), AnyToken: token == ""}
	if !seen.State.Valid() {
		return nil, fmt.Errorf("%w: --seen-state must be a job state, not %q", errUsage, state)
	}
	if token != "" {
		t, err := strconv.ParseUint(token, 10, 64)
		if errors.Is(err, strconv.ErrRange) {
			return nil, fmt.Errorf("%w: --seen-token %s is outside 0-%d", errUsage, token, uint64(math.MaxUint64))
		}
		if err != nil {
			return nil, fmt.Errorf("%w: --seen-token must be the job's token (decimal), not %q", errUsage, token)
		}
		seen.Token = lease.Token(t)
	}
	if runs != "" {
		n, err := strconv.Atoi(runs)
		if errors.Is(err, strconv.ErrRange) {
			return nil, fmt.Errorf("%w: --seen-runs %s is outside 0-%d", errUsage, runs, math.MaxInt)
		}
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%w: --seen-runs must be the job's run count as inspect showed it, not %q", errUsage, runs)
		}
		seen.Runs = n
	}
	return seen, nil
}

func cancelCmd(fs *flag.FlagSet) func(context.Context, io.Writer) error {
	do := func(c *jobs.Client, ctx context.Context, q, id string, seen *jobs.Seen, actor, note string) (*jobs.Record, error) {
		if seen != nil {
			return c.CancelSeen(ctx, q, id, *seen, actor, note)
		}
		return c.Cancel(ctx, q, id, actor, note)
	}
	return jobCommand(fs, "cancel", true, do, func(_ context.Context, _ *jobs.Inspector, out io.Writer, rec *jobs.Record, asJSON bool) error {
		stop := rec.State == jobs.Running
		if asJSON {
			return json.NewEncoder(cli.JSONWriter(out)).Encode(struct {
				Job           *jobs.Record `json:"job"`
				Cancelled     bool         `json:"cancelled"`
				StopRequested bool         `json:"stop_requested"`
			}{rec, rec.State == jobs.Cancelled, stop})
		}
		if stop {
			fmt.Fprint(out, cli.Escapef("job %s is running: its attempt (token %d) is asked to stop; its outcome is still committed by its token, and a retry becomes cancelled\n", rec.ID, rec.Token))
			return nil
		}
		fmt.Fprint(out, cli.Escapef("job %s is now %s\n", rec.ID, rec.State))
		return nil
	})
}

func runNowCmd(fs *flag.FlagSet) func(context.Context, io.Writer) error {
	do := func(c *jobs.Client, ctx context.Context, q, id string, seen *jobs.Seen, actor, note string) (*jobs.Record, error) {
		if seen != nil {
			return c.RunNowSeen(ctx, q, id, *seen, actor, note)
		}
		return c.RunNow(ctx, q, id, actor, note)
	}
	return jobCommand(fs, "run-now", false, do, func(ctx context.Context, in *jobs.Inspector, out io.Writer, rec *jobs.Record, asJSON bool) error {
		// the job is due whatever this read does: only the note about a pause would be missing
		paused, _ := in.Paused(ctx, rec.Queue)
		if asJSON {
			return json.NewEncoder(cli.JSONWriter(out)).Encode(struct {
				Job         *jobs.Record `json:"job"`
				QueuePaused *jobs.Pause  `json:"queue_paused,omitempty"`
			}{rec, paused})
		}
		fmt.Fprint(out, cli.Escapef("job %s is due now (%s)\n", rec.ID, rec.State))
		if paused != nil {
			fmt.Fprint(out, cli.Escapef("its queue %s is paused %s: it starts once the queue is resumed\n", rec.Queue, pauseText(paused)))
		}
		return nil
	})
}

func pauseCmd(fs *flag.FlagSet) func(context.Context, io.Writer) error {
	return pauseOrResume(fs, true)
}

func resumeCmd(fs *flag.FlagSet) func(context.Context, io.Writer) error {
	return pauseOrResume(fs, false)
}

func pauseOrResume(fs *flag.FlagSet, pause bool) func(context.Context, io.Writer) error {
	var o operatorFlags
	o.add(fs, pause)
	queue := fs.String("queue", "", "queue (required)")
	return func(ctx context.Context, out io.Writer) error {
		if *queue == "" {
			return fmt.Errorf("%w: --queue is required", errUsage)
		}
		if err := jobs.ValidateQueue(*queue); err != nil {
			return fmt.Errorf("%w: --queue: %v", errUsage, err)
		}
		if err := o.check(pause); err != nil {
			return err
		}
		client, closeAll, err := o.openClient(ctx)
		if err != nil {
			return err
		}
		defer closeAll()
		action, set := "resume", client.Resume
		if pause {
			action, set = "pause", client.Pause
		}
		l := client.Inspector()
		known, err := l.Queues(ctx) // before: a pause lists the queue
		if err != nil {
			return err
		}
		changed, err := set(ctx, *queue, o.actor, o.note)
		if err != nil {
			return operatorError(action, err)
		}
		paused, err := l.Paused(ctx, *queue)
		if err != nil {
			return err
		}
		isKnown := slices.Contains(known, *queue)
		if o.asJSON {
			return json.NewEncoder(cli.JSONWriter(out)).Encode(struct {
				Queue   string      `json:"queue"`
				Paused  *jobs.Pause `json:"paused"`
				Changed bool        `json:"changed"`
				Known   bool        `json:"known"`
			}{*queue, paused, changed, isKnown})
		}
		switch {
		case pause && changed:
			fmt.Fprint(out, cli.Escapef("queue %s is paused: no new attempts start; running ones finish; enqueues are accepted\n", *queue))
		case pause:
			fmt.Fprint(out, cli.Escapef("queue %s was already paused %s\n", *queue, pauseText(paused)))
		case changed:
			fmt.Fprint(out, cli.Escapef("queue %s is resumed\n", *queue))
		default:
			fmt.Fprint(out, cli.Escapef("queue %s was not paused\n", *queue))
		}
		if !isKnown {
			fmt.Fprint(out, unknownQueueNote(*queue))
		}
		return nil
	}
}

func queuesCmd(fs *flag.FlagSet) func(context.Context, io.Writer) error {
	var c commonFlags
	c.add(fs)
	queue := fs.String("queue", "", "only this queue (default: all)")
	asJSON := fs.Bool("json", false, "print JSON")
	return func(ctx context.Context, out io.Writer) error {
		if *queue != "" {
			if err := jobs.ValidateQueue(*queue); err != nil {
				return fmt.Errorf("%w: --queue: %v", errUsage, err)
			}
		}
		client, closeAll, err := c.openClient(ctx)
		if err != nil {
			return err
		}
		defer closeAll()
		return listQueues(ctx, out, client.Inspector(), *queue, *asJSON)
	}
}

// poolLine is one line of the pools command.
type poolLine struct {
	jobs.PoolInfo
	// Leader is true for the pool holding the maintenance leader's lease.
	Leader bool `json:"leader"`
}

func poolsCmd(fs *flag.FlagSet) func(context.Context, io.Writer) error {
	var c commonFlags
	c.add(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	return func(ctx context.Context, out io.Writer) error {
		client, closeAll, err := c.openClient(ctx)
		if err != nil {
			return err
		}
		defer closeAll()
		l := client.Inspector()
		ps, err := l.Pools(ctx)
		if err != nil {
			return err
		}
		holder, err := l.Leader(ctx)
		if err != nil {
			return err
		}
		leader := ""
		if holder != nil {
			leader = holder.Owner
		}
		lines := make([]poolLine, 0, len(ps))
		for _, p := range ps {
			lines = append(lines, poolLine{PoolInfo: p, Leader: p.ID == leader})
		}
		if *asJSON {
			return json.NewEncoder(cli.JSONWriter(out)).Encode(lines)
		}
		warned := 0
		tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "POOL\tHOST\tPID\tQUEUES\tBUSY\tVERSION\tSTARTED\tLAST HEARTBEAT\tMAINTENANCE\tREDIS CLOCK")
		for _, p := range lines {
			qs := make([]string, 0, len(p.Queues))
			for q, w := range p.Queues {
				qs = append(qs, fmt.Sprintf("%s=%d", q, w))
			}
			slices.Sort(qs)
			role := "-"
			if p.Leader {
				role = "leader"
			}
			fmt.Fprint(tw, cli.Escapef("%s\t%s\t%d\t%s\t%d/%d\t%s\t%s\t%s ago\t%s\t%s\n", p.ID, p.Host, p.PID, strings.Join(qs, ","), p.Busy, p.Concurrency,
				p.Version, p.Started.UTC().Format(time.RFC3339), time.Since(p.LastHeartbeat).Round(time.Second), role, clockText(p.PoolInfo)))
			if p.Clock.Offset().Abs() > jobs.ClockOffsetWarn || p.ClockJumps > 0 {
				warned++
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(out, "%d live pool(s)", len(lines))
		switch {
		case leader == "":
			fmt.Fprint(out, "; no maintenance leader")
		case !slices.ContainsFunc(lines, func(p poolLine) bool { return p.Leader }):
			fmt.Fprint(out, cli.Escapef("; maintenance leader %s is not among them", leader))
		}
		if warned > 0 {
			fmt.Fprintf(out, "; %d with Redis's clock more than %v off theirs or jumping back (!): due times and lease deadlines are on Redis's clock", warned, jobs.ClockOffsetWarn)
		}
		fmt.Fprintln(out)
		if len(lines) == 0 {
			fmt.Fprint(out, emptyNamespaceNote(ctx, client.Inspector()))
		}
		return nil
	}
}

// clockText is a pool's latest measurement of Redis's clock minus its own
// ("-" before the first), flagged with "!" beyond jobs.ClockOffsetWarn,
// with the jumps back it saw.
func clockText(p jobs.PoolInfo) string {
	if p.Clock.At.IsZero() {
		return "-"
	}
	off := p.Clock.Offset().Round(time.Millisecond)
	s := off.String()
	if off >= 0 {
		s = "+" + s
	}
	if off.Abs() > jobs.ClockOffsetWarn {
		s += " !"
	}
	if p.ClockJumps > 0 {
		s += fmt.Sprintf(" (%d jump(s) back !)", p.ClockJumps)
	}
	return s
}

// progressText renders an attempt's progress report: "3 of 10 (30%): note,
// attempt 2 at <time>".
func progressText(p *jobs.ProgressReport) string {
	s := fmt.Sprint(p.Done)
	if p.Total > 0 {
		s = fmt.Sprintf("%d of %d (%d%%)", p.Done, p.Total, p.Done*100/p.Total)
	}
	if p.Note != "" {
		s += cli.Escapef(": %s", p.Note)
	}
	return s + fmt.Sprintf(", attempt %d at %s", p.Attempt, p.At.UTC().Format(time.RFC3339))
}
