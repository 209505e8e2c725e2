package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/fencedq/fencedq/examples/bank"
	"github.com/fencedq/fencedq/jobs"
)

func enqueueCmd(fs *flag.FlagSet) func(context.Context, io.Writer) error {
	var c commonFlags
	c.add(fs)
	kind := fs.String("kind", "transfer", "job kind")
	args := fs.String("args", "", `job args as a JSON object, e.g. '{"from":"acct-000","to":"acct-001","cents":100}'`)
	queue := fs.String("queue", jobs.DefaultQueue, "queue")
	op := fs.String("op", "", "operation id (default: generated); a known one is deduplicated")
	delay := fs.Duration("delay", 0, "run after this delay")
	retries := fs.Int("max-retries", jobs.DefaultMaxRetries, "retries after a failed attempt")
	timeout := fs.Duration("timeout", 0, "handler timeout (default: the pool's)")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	return func(ctx context.Context, out io.Writer) error {
		if *args == "" {
			return fmt.Errorf("%w: --args is required", errUsage)
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
		var res *jobs.Result
		if *kind == (bank.Transfer{}).Kind() {
			// A known kind: decode it so validation, the resource and
			// redaction of sensitive fields apply.
			var t bank.Transfer
			if err := json.Unmarshal([]byte(*args), &t); err != nil {
				return fmt.Errorf("%w: --args is not a transfer: %v", errUsage, err)
			}
			res, err = client.Enqueue(ctx, t, opts...)
		} else {
			res, err = client.EnqueueRaw(ctx, *kind, []byte(*args), opts...)
		}
		if err != nil {
			if errors.Is(err, jobs.ErrInvalid) {
				return fmt.Errorf("%w: %v", errUsage, err)
			}
			return err
		}
		if *asJSON {
			return json.NewEncoder(out).Encode(res)
		}
		if res.Deduplicated {
			fmt.Fprintf(out, "deduplicated: operation %s already belongs to job %s\n", res.OperationID, res.JobID)
		} else {
			fmt.Fprintf(out, "enqueued job %s (queue %s, operation %s)\n", res.JobID, res.Queue, res.OperationID)
		}
		return nil
	}
}

func inspectCmd(fs *flag.FlagSet) func(context.Context, io.Writer) error {
	var c commonFlags
	c.add(fs)
	state := fs.String("state", "", "list jobs in this state: pending, running, uncertain, review, succeeded, dead")
	queue := fs.String("queue", "", "only this queue (default: all)")
	job := fs.String("job", "", "show one job and its history, by job id")
	op := fs.String("op", "", "show one job and its history, by operation id")
	limit := fs.Int("limit", 50, "how many jobs to list")
	asJSON := fs.Bool("json", false, "print JSON")
	return func(ctx context.Context, out io.Writer) error {
		if (*state == "") == (*job == "" && *op == "") {
			return fmt.Errorf("%w: give --state, or --job or --op", errUsage)
		}
		if *state != "" && !jobs.State(*state).Valid() {
			return fmt.Errorf("%w: unknown state %q", errUsage, *state)
		}
		client, closeAll, err := c.openClient(ctx)
		if err != nil {
			return err
		}
		defer closeAll()
		l := client.Ledger()
		if *state != "" {
			return listJobs(ctx, out, l, jobs.State(*state), *queue, *limit, *asJSON)
		}
		var rec *jobs.Record
		switch {
		case *job != "" && *queue != "":
			rec, err = l.Get(ctx, *queue, *job)
		case *job != "":
			rec, err = l.Find(ctx, *job)
		default:
			rec, err = l.FindByOperation(ctx, *op)
		}
		if err != nil {
			return err
		}
		hist, err := l.History(ctx, rec.Queue, rec.ID)
		if err != nil {
			return err
		}
		if *asJSON {
			return json.NewEncoder(out).Encode(struct {
				Job     *jobs.Record `json:"job"`
				History []jobs.Entry `json:"history"`
			}{rec, hist})
		}
		printJob(out, rec, hist)
		return nil
	}
}

func listJobs(ctx context.Context, out io.Writer, l *jobs.Ledger, s jobs.State, queue string, limit int, asJSON bool) error {
	queues := []string{queue}
	if queue == "" {
		var err error
		if queues, err = l.Queues(ctx); err != nil {
			return err
		}
	}
	var all []*jobs.Record
	for _, q := range queues {
		recs, err := l.List(ctx, q, s, 0, limit)
		if err != nil {
			return err
		}
		all = append(all, recs...)
	}
	if asJSON {
		if all == nil {
			all = []*jobs.Record{}
		}
		return json.NewEncoder(out).Encode(all)
	}
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tQUEUE\tKIND\tOPERATION\tATTEMPTS\tTOKEN\tREASON")
	for _, r := range all {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\n", r.ID, r.Queue, r.Kind, r.OperationID, r.Attempts, r.Token, r.Reason)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(out, "%d %s job(s)\n", len(all), s)
	return nil
}

func printJob(out io.Writer, r *jobs.Record, hist []jobs.Entry) {
	fmt.Fprintf(out, "job %s\n  kind %s, queue %s, operation %s\n  state %s", r.ID, r.Kind, r.Queue, r.OperationID, r.State)
	if r.Reason != "" {
		fmt.Fprintf(out, " (%s)", r.Reason)
	}
	fmt.Fprintf(out, "\n  attempts %d, token %d, resource %s\n  args %s\n", r.Attempts, r.Token, r.LeaseResource(), r.Args)
	if r.Error != "" {
		fmt.Fprintf(out, "  last error %s\n", r.Error)
	}
	fmt.Fprintln(out, "history:")
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	for _, e := range hist {
		detail := ""
		switch e.Event {
		case "attempt":
			detail = fmt.Sprintf("attempt %d token %s owner %s", e.Attempt, e.Token, e.Owner)
		case "end":
			detail = fmt.Sprintf("attempt %d token %s -> %s %s %s", e.Attempt, e.Token, e.Outcome, e.Reason, e.Error)
		case "fenced":
			detail = fmt.Sprintf("stale %s by token %s rejected", e.Stage, e.Token)
		case "resolve":
			detail = fmt.Sprintf("%s -> %s by %s: %s", e.From, e.Decision, e.Actor, e.Note)
		case "deduplicated":
			detail = "duplicate delivery " + e.Task + " acknowledged"
		case "enqueued":
			detail = "task " + e.Task
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", e.At.UTC().Format(time.RFC3339Nano), e.Event, detail)
	}
	_ = tw.Flush()
}

func resolveCmd(fs *flag.FlagSet) func(context.Context, io.Writer) error {
	var c commonFlags
	c.add(fs)
	job := fs.String("job", "", "job id (required)")
	queue := fs.String("queue", "", "the job's queue (default: looked up)")
	decision := fs.String("decision", "", "succeeded, rerun or dead (required)")
	actor := fs.String("actor", "", "who decides (required; recorded in the job's history)")
	note := fs.String("note", "", "why (recorded in the job's history)")
	return func(ctx context.Context, out io.Writer) error {
		if *job == "" || *actor == "" {
			return fmt.Errorf("%w: --job and --actor are required", errUsage)
		}
		d := jobs.Decision(*decision)
		if d != jobs.DecideSucceeded && d != jobs.DecideRerun && d != jobs.DecideDead {
			return fmt.Errorf("%w: --decision must be succeeded, rerun or dead", errUsage)
		}
		client, closeAll, err := c.openClient(ctx)
		if err != nil {
			return err
		}
		defer closeAll()
		q := *queue
		if q == "" {
			rec, err := client.Ledger().Find(ctx, *job)
			if err != nil {
				return err
			}
			q = rec.Queue
		}
		rec, err := client.Resolve(ctx, q, *job, d, *actor, *note)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "job %s is now %s\n", rec.ID, rec.State)
		return nil
	}
}
