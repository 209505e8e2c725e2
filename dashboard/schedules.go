package dashboard

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/fencedq/fencedq/jobs"
)

// Limits of api/schedules.
const (
	defaultScheduleTicks = 5
	maxScheduleTicks     = 100 // the ledger keeps this many per schedule
	maxSchedules         = 500 // schedules shown; more are counted, not listed
)

// goneState is shown for a tick's job the ledger no longer holds (past its
// retention).
const goneState = "gone"

// tickView is one tick and the job it produced.
type tickView struct {
	jobs.Tick
	// OperationID is the tick's operation id (periodic:<id>:<tick>).
	OperationID string `json:"operation_id"`
	// JobState is the job's state now ("gone" past its retention).
	JobState string `json:"job_state"`
}

// scheduleView is one schedule on the schedules page.
type scheduleView struct {
	*jobs.Schedule
	// LastJobState is the state of the job the last tick produced ("" when
	// there was none).
	LastJobState string `json:"last_job_state,omitempty"`
	// SeenAgeMS is how long ago a maintenance leader last registered the
	// schedule, by the Redis clock: a schedule no pool registers any more
	// stops being refreshed.
	SeenAgeMS int64 `json:"seen_age_ms"`
	// Ticks are the newest ticks, newest first.
	Ticks []tickView `json:"ticks"`
}

type scheduleList struct {
	ServerTime  time.Time  `json:"server_time"`
	Maintenance leaderView `json:"maintenance"`
	// Total counts every recorded schedule; Schedules holds at most 500.
	Total     int            `json:"total"`
	Schedules []scheduleView `json:"schedules"`
	// Removed are the newest schedule removals (who removed which, and
	// why), newest first; empty with ?id=.
	Removed []jobs.ScheduleRemoval `json:"removed"`
}

// apiSchedules lists the periodic schedules (or only ?id=) with their last
// and next tick and the newest ?ticks= ticks (default 5, from 0 to 100 for
// one schedule, to 5 for all),
// each with the state of the job it produced, and (without ?id=) the
// newest schedule removals.
func (h *Handler) apiSchedules(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("id")
	// Each tick shown costs a read of its job: across every schedule (up
	// to 500) the default is the most, so one request cannot make tens of
	// thousands of reads.
	maxTicks, hint := maxScheduleTicks, ""
	if id == "" {
		maxTicks, hint = defaultScheduleTicks, "more ticks are shown for one schedule (id)"
	}
	n, ok := intParam(w, r, "ticks", defaultScheduleTicks, 0, maxTicks, hint)
	if !ok {
		return
	}
	if id != "" {
		if err := jobs.ValidateScheduleID(id); err != nil {
			writeError(w, http.StatusBadRequest, "invalid", err.Error())
			return
		}
	}
	ctx, cancel := h.ctx(r)
	defer cancel()
	now, err := h.insp.ServerTime(ctx)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	ldr, err := h.leader(ctx, now)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	var scheds []*jobs.Schedule
	if id != "" {
		s, err := h.insp.Schedule(ctx, id)
		if errors.Is(err, jobs.ErrNotFound) {
			writeError(w, http.StatusNotFound, "not_found", "no such schedule (a schedule is recorded when a maintenance leader first registers it)")
			return
		}
		if err != nil {
			h.fail(w, r, err)
			return
		}
		scheds = []*jobs.Schedule{s}
	} else if scheds, err = h.insp.Schedules(ctx); err != nil {
		h.fail(w, r, err)
		return
	}
	out := scheduleList{ServerTime: now, Maintenance: ldr, Total: len(scheds), Schedules: []scheduleView{}, Removed: []jobs.ScheduleRemoval{}}
	if id == "" {
		if out.Removed, err = h.insp.ScheduleRemovals(ctx); err != nil {
			h.fail(w, r, err)
			return
		}
	}
	for _, s := range scheds[:min(len(scheds), maxSchedules)] {
		v := scheduleView{Schedule: s, Ticks: []tickView{}}
		if !s.Seen.IsZero() {
			v.SeenAgeMS = max(0, now.Sub(s.Seen).Milliseconds())
		}
		ticks, err := h.insp.ScheduleTicks(ctx, s.ID, n)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		for _, t := range ticks {
			st, err := h.jobState(ctx, t.Queue, t.JobID)
			if err != nil {
				h.fail(w, r, err)
				return
			}
			v.Ticks = append(v.Ticks, tickView{Tick: t, OperationID: t.OperationID(s.ID), JobState: st})
		}
		if s.LastJob != "" {
			if v.LastJobState, err = h.jobState(ctx, s.Queue, s.LastJob); err != nil {
				h.fail(w, r, err)
				return
			}
		}
		out.Schedules = append(out.Schedules, v)
	}
	writeJSON(w, http.StatusOK, out)
}

// jobState returns the state of job id on queue q, "gone" when the ledger
// no longer holds it (or the names recorded with a tick are not valid).
func (h *Handler) jobState(ctx context.Context, q, id string) (string, error) {
	if jobs.ValidateQueue(q) != nil || id == "" || len(id) > maxIDLength {
		return goneState, nil
	}
	rec, err := h.insp.Get(ctx, q, id)
	switch {
	case errors.Is(err, jobs.ErrNotFound):
		return goneState, nil
	case err != nil:
		return "", err
	}
	return string(rec.State), nil
}
