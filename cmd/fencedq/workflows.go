package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/fencedq/fencedq/internal/cli"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/workflow"
)

// workflowInspectCmd lists the newest workflows, or shows one with its
// steps (--id). With a Cluster master down it prints what it read (a step
// not read shown unreachable), then fails naming what it could not read,
// as the other listings do.
func workflowInspectCmd(fs *flag.FlagSet) func(context.Context, io.Writer) error {
	var c commonFlags
	c.add(fs)
	id := fs.String("id", "", "the workflow's id (default: list the newest workflows)")
	limit := rangedInt(fs, new(int), "limit", 20, 1, 1000, "how many of the newest workflows to list (1-1000; the list says when it left some out)")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	return func(ctx context.Context, out io.Writer) error {
		if *limit < 1 || *limit > 1000 {
			return fmt.Errorf("%w: --limit must be 1-1000", errUsage)
		}
		if *id != "" {
			if err := ignoredIn(fs, "--id", "limit"); err != nil {
				return err
			}
		}
		client, closeAll, err := c.openClient(ctx)
		if err != nil {
			return err
		}
		defer closeAll()
		if *id == "" {
			var missed ledger.Partial
			list, err := workflow.List(ctx, client, 0, *limit)
			if !missed.Add(err) {
				return err
			}
			more := false
			if len(list) == *limit { // are some left out? (List takes at most 1000)
				next, err := workflow.List(ctx, client, *limit, 1)
				if !missed.Add(err) {
					return err
				}
				more = len(next) > 0
			}
			if list == nil {
				list = []*workflow.Status{} // JSON: an empty array, as the other listings
			}
			if *asJSON {
				if err := json.NewEncoder(cli.JSONWriter(out)).Encode(list); err != nil {
					return err
				}
				return missed.Err()
			}
			tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tNAME\tSTATE\tPROGRESS\tSTARTED\tAGE")
			for _, st := range list {
				fmt.Fprint(tw, cli.Escapef("%s\t%s\t%s\t%d/%d\t%s\t%s\n", st.ID, st.Name, st.State, st.Done, st.Total,
					st.Created.UTC().Format(time.RFC3339), time.Since(st.Created).Round(time.Second)))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if more {
				fmt.Fprintf(out, "the newest %d workflow(s) shown; older ones left out (--limit %d)\n", len(list), *limit)
			} else {
				fmt.Fprintf(out, "%d workflow(s)\n", len(list))
			}
			if len(list) == 0 {
				fmt.Fprint(out, emptyNamespaceNote(ctx, client.Inspector()))
			}
			return missed.Err()
		}
		st, err := workflow.Get(ctx, client, *id)
		if st == nil {
			return inEmptyNamespace(ctx, client.Inspector(), workflowError("inspect", err))
		}
		if err := showWorkflow(out, st, *asJSON); err != nil {
			return err
		}
		return err // some steps not read
	}
}

// workflowCancelCmd cancels a workflow.
func workflowCancelCmd(fs *flag.FlagSet) func(context.Context, io.Writer) error {
	var o operatorFlags
	o.add(fs, true)
	id := fs.String("id", "", "the workflow's id (required)")
	return func(ctx context.Context, out io.Writer) error {
		if *id == "" {
			return fmt.Errorf("%w: --id is required", errUsage)
		}
		if err := o.check(true); err != nil {
			return err
		}
		client, closeAll, err := o.openClient(ctx)
		if err != nil {
			return err
		}
		defer closeAll()
		st, err := workflow.Cancel(ctx, client, *id, o.actor, o.note)
		if err != nil {
			return inEmptyNamespace(ctx, client.Inspector(), workflowError("cancel", err))
		}
		return showWorkflow(out, st, o.asJSON)
	}
}

func workflowError(action string, err error) error {
	switch {
	case errors.Is(err, workflow.ErrNotFound):
		return fmt.Errorf("cannot %s workflow: %w", action, err)
	case action == "cancel" && errors.Is(err, jobs.ErrWrongState):
		return fmt.Errorf("cannot cancel workflow: %w (a workflow that finished, succeeded or failed, has nothing to cancel)", err)
	}
	return operatorError(action, err)
}

// showWorkflow prints a workflow and its steps: the graph as each step's
// dependencies, its state, token and output.
func showWorkflow(out io.Writer, st *workflow.Status, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(cli.JSONWriter(out)).Encode(st)
	}
	fmt.Fprint(out, cli.Escapef("workflow %s \"%s\": %s, %d/%d steps final, started %s (home queue %s)\n",
		st.ID, st.Name, st.State, st.Done, st.Total, st.Created.UTC().Format(time.RFC3339), st.Home))
	if st.CancelledBy != "" {
		fmt.Fprint(out, cli.Escapef("  cancelled by %s\n", st.CancelledBy))
	}
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STEP\tAFTER\tSTATE\tTOKEN\tATTEMPTS\tJOB\tREASON\tOUTPUT")
	for _, s := range st.Steps {
		after := strings.Join(s.Deps, ",")
		if after == "" {
			after = "-"
		}
		if len(s.AllowFail) > 0 { // as the dashboard shows them
			after += " (may fail: " + strings.Join(s.AllowFail, ",") + ")"
		}
		tok := "-"
		if s.Token > 0 {
			tok = fmt.Sprint(s.Token)
		}
		output := string(s.Output)
		if len(output) > 60 {
			cut := 57
			for cut > 0 && !utf8.RuneStart(output[cut]) {
				cut-- // not inside a character
			}
			output = output[:cut] + "..."
		}
		fmt.Fprint(tw, cli.Escapef("%s\t%s\t%s\t%s\t%d\t%s/%s\t%s\t%s\n", s.Name, after, s.State, tok, s.Attempts,
			s.Queue, s.JobID, s.Reason, output))
	}
	return tw.Flush()
}
