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

	"github.com/fencedq/fencedq/internal/cli"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/jobs"
)

// scheduleLine is one schedule of the schedules command: the ledger's
// record of it and its newest ticks, each with the state of the job it
// produced.
type scheduleLine struct {
	*jobs.Schedule
	// LastJobState is the state of the job the last tick produced ("" when
	// there was none, "gone" when the job is past its retention).
	LastJobState string `json:"last_job_state,omitempty"`
	// Ticks are the newest ticks recorded, newest first.
	Ticks []tickLine `json:"ticks"`
}

// tickLine is one tick and the state of the job it produced.
type tickLine struct {
	jobs.Tick
	// OperationID is the tick's operation id (periodic:<id>:<tick>).
	OperationID string `json:"operation_id"`
	// JobState is the job's state now ("gone" past its retention).
	JobState string `json:"job_state"`
}

// stateGone is shown for a job the ledger no longer holds.
const stateGone = "gone"

func schedulesCmd(fs *flag.FlagSet) func(context.Context, io.Writer) error {
	var c commonFlags
	c.add(fs)
	id := fs.String("id", "", "only this schedule (default: all)")
	ticks := rangedInt(fs, new(int), "ticks", 5, 0, 100, "newest ticks shown per schedule, with the job each produced (0-100)")
	asJSON := fs.Bool("json", false, "print JSON")
	remove := fs.Bool("remove", false, "delete the record of schedule --id (one no pool defines any more; refused, naming them, while live pools define it)")
	actor := fs.String("actor", "", "who removes the schedule (required with --remove; recorded as operator:<actor>)")
	note := fs.String("note", "", "why (recorded with the removal)")
	removed := fs.Bool("removed", false, "list the newest removals of schedules (who removed which, and why) only")
	return func(ctx context.Context, out io.Writer) error {
		if *remove && *id == "" {
			return fmt.Errorf("%w: --remove needs --id", errUsage)
		}
		if *remove && strings.TrimSpace(*actor) == "" {
			return fmt.Errorf("%w: --remove needs --actor (who removes the schedule, or set FENCEDQ_ACTOR)", errUsage)
		}
		noted := false
		fs.Visit(func(f *flag.Flag) { noted = noted || f.Name == "note" })
		if noted && !*remove {
			return fmt.Errorf("%w: --note is recorded with a removal: give it with --remove", errUsage)
		}
		if *remove && *removed {
			return fmt.Errorf("%w: give --remove or --removed, not both", errUsage)
		}
		if *remove {
			if err := ignoredIn(fs, "--remove", "ticks"); err != nil {
				return err
			}
		}
		if *removed {
			if err := ignoredIn(fs, "--removed", "id", "ticks"); err != nil {
				return err
			}
		}
		if *id != "" {
			if err := jobs.ValidateScheduleID(*id); err != nil {
				return fmt.Errorf("%w: --id: %v", errUsage, err)
			}
		}
		if *ticks < 0 || *ticks > 100 {
			return fmt.Errorf("%w: --ticks must be 0-100, got %d", errUsage, *ticks)
		}
		client, closeAll, err := c.openClient(ctx)
		if err != nil {
			return err
		}
		defer closeAll()
		if *remove {
			found, err := client.RemoveSchedule(ctx, *id, *actor, strings.TrimSpace(*note))
			if err != nil {
				return operatorError("remove schedule", err)
			}
			if !found {
				return inEmptyNamespace(ctx, client.Inspector(), ledger.NotFound("schedule "+*id))
			}
			if *asJSON {
				return json.NewEncoder(cli.JSONWriter(out)).Encode(struct {
					ID      string `json:"id"`
					Removed bool   `json:"removed"`
				}{*id, true})
			}
			fmt.Fprintf(out, "removed schedule %s\n", *id)
			return nil
		}
		if *removed {
			rs, err := client.Inspector().ScheduleRemovals(ctx)
			if err != nil {
				return err
			}
			if *asJSON {
				return json.NewEncoder(cli.JSONWriter(out)).Encode(rs)
			}
			return printRemovals(out, rs)
		}
		lines, err := loadSchedules(ctx, client.Inspector(), *id, *ticks)
		if err != nil {
			return inEmptyNamespace(ctx, client.Inspector(), err)
		}
		if *asJSON {
			return json.NewEncoder(cli.JSONWriter(out)).Encode(lines)
		}
		if err := printSchedules(out, lines, *id != ""); err != nil || *id != "" {
			return err
		}
		if len(lines) == 0 {
			fmt.Fprint(out, emptyNamespaceNote(ctx, client.Inspector()))
		}
		rs, err := client.Inspector().ScheduleRemovals(ctx)
		if err != nil || len(rs) == 0 {
			return err
		}
		fmt.Fprintln(out)
		return printRemovals(out, rs)
	}
}

// printRemovals writes the schedule removals, newest first.
func printRemovals(out io.Writer, rs []jobs.ScheduleRemoval) error {
	fmt.Fprintf(out, "removed schedules, newest first (%d):\n", len(rs))
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  SCHEDULE\tKIND\tQUEUE\tREMOVED\tBY\tNOTE")
	for _, r := range rs {
		fmt.Fprint(tw, cli.Escapef("  %s\t%s\t%s\t%s\t%s\t%s\n", r.ID, orDash(r.Kind), orDash(r.Queue), timeText(r.At), r.Actor, orDash(r.Note)))
	}
	return tw.Flush()
}

// loadSchedules reads every schedule (or only id's) with up to n ticks each.
func loadSchedules(ctx context.Context, l *jobs.Inspector, id string, n int) ([]scheduleLine, error) {
	var scheds []*jobs.Schedule
	if id != "" {
		s, err := l.Schedule(ctx, id)
		if err != nil {
			if errors.Is(err, jobs.ErrNotFound) {
				return nil, fmt.Errorf("%w (a schedule is recorded when a maintenance leader first registers it)", err)
			}
			return nil, err
		}
		scheds = []*jobs.Schedule{s}
	} else {
		var err error
		if scheds, err = l.Schedules(ctx); err != nil {
			return nil, err
		}
	}
	lines := make([]scheduleLine, 0, len(scheds))
	for _, s := range scheds {
		ts, err := l.ScheduleTicks(ctx, s.ID, n)
		if err != nil {
			return nil, err
		}
		line := scheduleLine{Schedule: s, Ticks: make([]tickLine, 0, len(ts))}
		for _, t := range ts {
			st, err := jobState(ctx, l, t.Queue, t.JobID)
			if err != nil {
				return nil, err
			}
			line.Ticks = append(line.Ticks, tickLine{Tick: t, OperationID: t.OperationID(s.ID), JobState: st})
		}
		if s.LastJob != "" {
			st, err := jobState(ctx, l, s.Queue, s.LastJob)
			if err != nil {
				return nil, err
			}
			line.LastJobState = st
		}
		lines = append(lines, line)
	}
	return lines, nil
}

// jobState returns job id's state on queue q, "gone" when it is no longer
// in the ledger.
func jobState(ctx context.Context, l *jobs.Inspector, q, id string) (string, error) {
	if q == "" || id == "" {
		return stateGone, nil
	}
	r, err := l.Get(ctx, q, id)
	switch {
	case errors.Is(err, jobs.ErrNotFound):
		return stateGone, nil
	case err != nil:
		return "", err
	}
	return string(r.State), nil
}

// timeText prints a time in UTC, "-" when zero.
func timeText(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func printSchedules(out io.Writer, lines []scheduleLine, one bool) error {
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCHEDULE\tKIND\tQUEUE\tWHEN\tZONE\tCATCH-UP\tLAST TICK\tLAST JOB\tNEXT TICK\tENQUEUED\tSKIPPED\tLAST SEEN")
	for _, l := range lines {
		job := "-"
		if l.LastJob != "" {
			job = l.LastJob + " (" + l.LastJobState + ")"
		}
		seen := "-"
		if !l.Seen.IsZero() {
			seen = time.Since(l.Seen).Round(time.Second).String() + " ago"
		}
		fmt.Fprint(tw, cli.Escapef("%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\n", l.ID, l.Kind, l.Queue, l.Schedule.Schedule, orDash(l.TimeZone),
			orDash(l.CatchUp), timeText(l.LastTick), job, timeText(l.NextTick), l.Enqueued, l.Skipped, seen))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if !one {
		fmt.Fprintf(out, "%d schedule(s)\n", len(lines))
	}
	for _, l := range lines {
		if c := l.Conflict; c != nil {
			fmt.Fprint(out, cli.Escapef("\nconflict on %s: pool %s (started %s) defines it otherwise (definition %s, since %s, last tried %s); pool %s's definition (started %s) is recorded and runs\n",
				l.ID, c.Pool, timeText(c.Started), c.Digest, timeText(c.Since), timeText(c.Seen), orDash(l.Owner.Pool), timeText(l.Owner.Started)))
		}
	}
	for _, l := range lines {
		if len(l.Ticks) == 0 {
			continue
		}
		fmt.Fprint(out, cli.Escapef("\nticks of %s, newest first:\n", l.ID))
		tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  TICK\tJOB\tSTATE\tQUEUE\tRECORDED\tLEADER\tNOTE")
		for _, t := range l.Ticks {
			note := ""
			if t.Deduplicated {
				note = "deduplicated: the job already existed"
			}
			fmt.Fprint(tw, cli.Escapef("  %s\t%s\t%s\t%s\t%s\t%d\t%s\n", timeText(t.Time), t.JobID, t.JobState, t.Queue, timeText(t.Recorded), t.Leader, note))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
