package dashboard

import (
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/fencedq/fencedq/jobs"
)

type poolView struct {
	jobs.PoolInfo
	// Leader is true for the pool holding the maintenance leader's lease.
	Leader bool `json:"leader"`
	// HeartbeatAgeMS is how long ago the pool last published, by the
	// dashboard's clock (pools stamp their heartbeats with their own).
	HeartbeatAgeMS int64 `json:"heartbeat_age_ms"`
	// ClockWarn is true when the pool's clock is more than
	// jobs.ClockOffsetWarn from Redis's (PoolInfo.Clock).
	ClockWarn bool `json:"clock_warn"`
}

type poolList struct {
	ServerTime  time.Time  `json:"server_time"`
	Maintenance leaderView `json:"maintenance"`
	Pools       []poolView `json:"pools"`
	// ClockWarnMS is the offset beyond which a pool's clock is flagged.
	ClockWarnMS int64 `json:"clock_warn_ms"`
}

// apiPools lists the live pools (their heartbeats), marking the one that
// is the maintenance leader.
func (h *Handler) apiPools(w http.ResponseWriter, r *http.Request) {
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
	ps, err := h.insp.Pools(ctx)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out := poolList{ServerTime: now, Maintenance: ldr, Pools: []poolView{}, ClockWarnMS: jobs.ClockOffsetWarn.Milliseconds()}
	for _, p := range ps {
		if p.Queues == nil {
			p.Queues = map[string]int{}
		}
		out.Pools = append(out.Pools, poolView{
			PoolInfo: p, Leader: ldr.Present && ldr.Leader == p.ID,
			HeartbeatAgeMS: max(0, time.Since(p.LastHeartbeat).Milliseconds()),
			ClockWarn:      p.Clock.Offset().Abs() > jobs.ClockOffsetWarn,
		})
	}
	writeJSON(w, http.StatusOK, out)
}

// seriesPoint is one step of a history chart: the exact counts of the
// step (kept per minute by the scripts) and, where the maintenance
// leader's snapshot of the step exists, the jobs per state at its end.
type seriesPoint struct {
	At time.Time `json:"at"`
	// Counts over the step.
	Succeeded    int64 `json:"succeeded"`
	Attempted    int64 `json:"attempted"`
	Enqueued     int64 `json:"enqueued"`
	Failed       int64 `json:"failed"` // attempts that ended dead or to be retried
	Fenced       int64 `json:"fenced"`
	Deduplicated int64 `json:"deduplicated"`
	// UncertainStarted counts jobs that became uncertain during the step
	// (uncertain episodes started); ReviewStarted those sent to review.
	UncertainStarted int64 `json:"uncertain_started"`
	ReviewStarted    int64 `json:"review_started"`
	// Jobs in a state at the end of the step, from the leader's snapshots
	// (zero where none was taken).
	Uncertain int64 `json:"uncertain"`
	Review    int64 `json:"review"`
	Pending   int64 `json:"pending"`
}

type seriesView struct {
	Queue       string        `json:"queue,omitempty"`
	Window      string        `json:"window"`
	StepSeconds int64         `json:"step_seconds"`
	ServerTime  time.Time     `json:"server_time"`
	Points      []seriesPoint `json:"points"`
	// Now are the jobs per state at ServerTime (every queue asked for).
	Now map[jobs.State]int64 `json:"now"`
	partial
}

// windows are the chart windows and their steps.
var windows = map[string]struct{ span, step time.Duration }{
	"1h":  {time.Hour, time.Minute},
	"24h": {24 * time.Hour, 5 * time.Minute},
}

// add adds one minute's counts to the point.
func (p *seriesPoint) add(c map[string]int64) {
	for k, v := range c {
		switch {
		case k == "succeeded":
			p.Succeeded += v
		case k == "attempted":
			p.Attempted += v
		case k == "enqueued":
			p.Enqueued += v
		case k == "dead" || k == "retried":
			p.Failed += v
		case k == "uncertain":
			p.UncertainStarted += v
		case k == "resolved_review":
			p.ReviewStarted += v
		case strings.HasPrefix(k, "fenced_"):
			p.Fenced += v
		case strings.HasPrefix(k, "deduplicated_"):
			p.Deduplicated += v
		}
	}
}

// apiSeries returns a queue's (or every queue's) history over the last
// hour (window=1h, one point a minute) or day (window=24h, one point per
// five minutes): the exact counts the scripts keep per minute
// (jobs.Inspector.Minutes), the current minute included, and the state
// counts of the maintenance leader's per-minute snapshots
// (jobs.Inspector.Series). Every queue's is read in a fixed number of
// round trips (jobs.Inspector.AllHistory), skipping the minutes the
// snapshots prove idle.
func (h *Handler) apiSeries(w http.ResponseWriter, r *http.Request) {
	queue := r.URL.Query().Get("queue")
	if !queueParam(w, queue) {
		return
	}
	name := r.URL.Query().Get("window")
	if name == "" {
		name = "1h"
	}
	win, ok := windows[name]
	if !ok {
		writeError(w, http.StatusBadRequest, "invalid", "window must be 1h or 24h")
		return
	}
	ctx, cancel := h.ctx(r)
	defer cancel()
	now, err := h.insp.ServerTime(ctx)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	// The window's first step is the one holding now - span, truncated.
	since := now.Add(-win.span).Truncate(win.step)
	var hs []jobs.QueueHistory
	out := seriesView{Queue: queue, Window: name, StepSeconds: int64(win.step / time.Second), ServerTime: now,
		Points: []seriesPoint{}, Now: map[jobs.State]int64{}}
	if queue == "" {
		hs, err = h.insp.AllHistory(ctx, since, now)
		if !h.degrade(w, r, &out.partial, err) {
			return
		}
	} else {
		one := jobs.QueueHistory{Queue: queue}
		one.Minutes, err = h.insp.Minutes(ctx, queue, since, now)
		if !h.degrade(w, r, &out.partial, err) {
			return
		}
		one.Series, err = h.insp.Series(ctx, queue, since)
		if !h.degrade(w, r, &out.partial, err) {
			return
		}
		one.Counts, err = h.insp.Counts(ctx, queue)
		if !h.degrade(w, r, &out.partial, err) {
			return
		}
		hs = append(hs, one)
	}
	steps := map[int64]*seriesPoint{}
	point := func(t time.Time) *seriesPoint {
		key := t.Truncate(win.step).UnixMilli()
		p := steps[key]
		if p == nil {
			p = &seriesPoint{At: time.UnixMilli(key).UTC()}
			steps[key] = p
		}
		return p
	}
	for _, q := range hs {
		for _, m := range q.Minutes {
			point(m.At).add(m.Counts)
		}
		// State counts: each queue's last snapshot within each step.
		last := map[int64]jobs.SeriesBucket{}
		for _, b := range q.Series {
			last[b.At.Truncate(win.step).UnixMilli()] = b
		}
		for _, b := range last {
			p := point(b.At)
			p.Uncertain += b.Counts[jobs.Uncertain]
			p.Review += b.Counts[jobs.Review]
			p.Pending += b.Counts[jobs.Pending]
		}
		for s, n := range q.Counts {
			out.Now[s] += n
		}
	}
	for _, p := range steps {
		out.Points = append(out.Points, *p)
	}
	slices.SortFunc(out.Points, func(a, b seriesPoint) int { return a.At.Compare(b.At) })
	writeJSON(w, http.StatusOK, out)
}
