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

// seriesPoint is one step of a history chart: counter deltas over the step
// and state counts at its end.
type seriesPoint struct {
	At time.Time `json:"at"`
	// Deltas of the cumulative counters over the step.
	Succeeded    int64 `json:"succeeded"`
	Attempted    int64 `json:"attempted"`
	Enqueued     int64 `json:"enqueued"`
	Failed       int64 `json:"failed"` // attempts that ended dead or to be retried
	Fenced       int64 `json:"fenced"`
	Deduplicated int64 `json:"deduplicated"`
	// Jobs in a state at the end of the step.
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
}

// windows are the chart windows and their steps.
var windows = map[string]struct{ span, step time.Duration }{
	"1h":  {time.Hour, time.Minute},
	"24h": {24 * time.Hour, 5 * time.Minute},
}

// sums are a bucket's counters the charts use.
type sums struct{ succeeded, attempted, enqueued, failed, fenced, deduped int64 }

func sumsOf(st map[string]int64) sums {
	s := sums{succeeded: st["succeeded"], attempted: st["attempted"], enqueued: st["enqueued"],
		failed: st["dead"] + st["retried"]}
	for k, v := range st {
		if strings.HasPrefix(k, "fenced_") {
			s.fenced += v
		}
		if strings.HasPrefix(k, "deduplicated_") {
			s.deduped += v
		}
	}
	return s
}

// apiSeries returns a queue's (or every queue's) history over the last
// hour (window=1h, one point a minute) or day (window=24h, one point per
// five minutes), from the buckets the maintenance leader records each
// minute (jobs.Inspector.Series).
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
	qs, err := h.queues(ctx, queue)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	// One more bucket than the window, to measure the first step from.
	since := now.Add(-win.span - jobs.SeriesStep)
	out := seriesView{Queue: queue, Window: name, StepSeconds: int64(win.step / time.Second), ServerTime: now, Points: []seriesPoint{}}
	steps := map[int64]*seriesPoint{}
	for _, q := range qs {
		bs, err := h.insp.Series(ctx, q, since)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		for i := 1; i < len(bs); i++ {
			prev, cur := sumsOf(bs[i-1].Stats), sumsOf(bs[i].Stats)
			key := bs[i].At.Truncate(win.step).UnixMilli()
			p := steps[key]
			if p == nil {
				p = &seriesPoint{At: time.UnixMilli(key).UTC()}
				steps[key] = p
			}
			d := func(a, b int64) int64 { return max(0, a-b) } // a counter reset counts nothing
			p.Succeeded += d(cur.succeeded, prev.succeeded)
			p.Attempted += d(cur.attempted, prev.attempted)
			p.Enqueued += d(cur.enqueued, prev.enqueued)
			p.Failed += d(cur.failed, prev.failed)
			p.Fenced += d(cur.fenced, prev.fenced)
			p.Deduplicated += d(cur.deduped, prev.deduped)
		}
		// State counts: each queue's last bucket within each step.
		last := map[int64]jobs.SeriesBucket{}
		for _, b := range bs[min(1, len(bs)):] {
			last[b.At.Truncate(win.step).UnixMilli()] = b
		}
		for key, b := range last {
			p := steps[key]
			if p == nil {
				p = &seriesPoint{At: time.UnixMilli(key).UTC()}
				steps[key] = p
			}
			p.Uncertain += b.Counts[jobs.Uncertain]
			p.Review += b.Counts[jobs.Review]
			p.Pending += b.Counts[jobs.Pending]
		}
	}
	for _, p := range steps {
		out.Points = append(out.Points, *p)
	}
	slices.SortFunc(out.Points, func(a, b seriesPoint) int { return a.At.Compare(b.At) })
	writeJSON(w, http.StatusOK, out)
}
