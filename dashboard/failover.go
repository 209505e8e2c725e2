package dashboard

import (
	"context"
	"net/http"
	"time"

	"github.com/fencedq/fencedq/jobs"
)

// rewindWindow is how long a recorded ledger rewind stays in the banner.
const rewindWindow = 24 * time.Hour

type rewindView struct {
	jobs.Rewind
	LostWrites int64 `json:"lost_writes"`
}

type rewindList struct {
	ServerTime  time.Time    `json:"server_time"`
	WindowHours int          `json:"window_hours"`
	Rewinds     []rewindView `json:"rewinds"`
	// Replicas are the live pools whose last check found fewer Redis
	// replicas connected than their Durability.Replicas requires.
	Replicas []replicaShortfall `json:"replicas"`
}

// replicaShortfall is a live pool missing replicas its durability
// requires: its durable claims, completions and enqueues fail.
type replicaShortfall struct {
	Pool     string `json:"pool"`
	Missing  int    `json:"missing"`
	Required int    `json:"required"`
}

// apiRewinds lists the ledger rewinds detected in the last rewindWindow
// (by Redis time), latest first, and the live pools missing Redis replicas
// their durability requires: the banner every page shows.
func (h *Handler) apiRewinds(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := h.ctx(r)
	defer cancel()
	now, err := h.insp.ServerTime(ctx)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	rs, err := h.insp.Rewinds(ctx)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	ps, err := h.insp.Pools(ctx)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out := rewindList{ServerTime: now, WindowHours: int(rewindWindow / time.Hour), Rewinds: []rewindView{}, Replicas: []replicaShortfall{}}
	for _, rw := range rs {
		if now.Sub(rw.LastAt) <= rewindWindow {
			out.Rewinds = append(out.Rewinds, rewindView{Rewind: rw, LostWrites: rw.LostWrites()})
		}
	}
	for _, p := range ps {
		if p.ReplicasMissing > 0 {
			out.Replicas = append(out.Replicas, replicaShortfall{Pool: p.ID, Missing: p.ReplicasMissing, Required: p.ReplicasRequired})
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// poolClock is one pool's latest offset, for the stuck page.
type poolClock struct {
	Pool string `json:"pool"`
	// OffsetMS is the namespace's time minus the pool's clock: the pool's
	// measurement of Redis's clock plus the namespace's offset.
	OffsetMS float64 `json:"offset_ms"`
	Jumps    int64   `json:"jumps"`
}

// clockView says which clock a page's times are on and how far the other
// clocks are from it.
type clockView struct {
	// DashboardOffsetMS is the namespace's time (the one every deadline
	// and due time is on) minus this dashboard's clock, within
	// ±DashboardRTTMS/2.
	DashboardOffsetMS float64 `json:"dashboard_offset_ms"`
	DashboardRTTMS    float64 `json:"dashboard_rtt_ms"`
	// NamespaceOffsetMS is the namespace's time minus Redis's clock: the
	// offset that carries the time across a failover to a node whose
	// clock is behind, or a clock stepped back (0 while none is needed).
	NamespaceOffsetMS float64 `json:"namespace_offset_ms"`
	// Pools are the live pools' latest offsets from the namespace's time.
	Pools []poolClock `json:"pools"`
	// WarnMS is the offset beyond which the page warns; Warning says
	// what is off ("" when nothing is).
	WarnMS  int64  `json:"warn_ms"`
	Warning string `json:"warning,omitempty"`
}

// clocks measures the namespace's time against this dashboard's clock and
// Redis's, and places the pools' latest measurements of Redis's clock on
// it.
func (h *Handler) clocks(ctx context.Context) (clockView, error) {
	s, held, err := h.insp.NamespaceClock(ctx)
	if err != nil {
		return clockView{}, err
	}
	ps, err := h.insp.Pools(ctx)
	if err != nil {
		return clockView{}, err
	}
	v := clockView{DashboardOffsetMS: s.OffsetMS, DashboardRTTMS: s.RTTMS, NamespaceOffsetMS: ms(held),
		Pools: []poolClock{}, WarnMS: jobs.ClockOffsetWarn.Milliseconds()}
	worst, who := s.Offset(), "this dashboard's"
	jumps := int64(0)
	for _, p := range ps {
		if p.Clock.At.IsZero() {
			continue
		}
		po := p.Clock.Offset() + held
		v.Pools = append(v.Pools, poolClock{Pool: p.ID, OffsetMS: ms(po), Jumps: p.ClockJumps})
		if po.Abs() > worst.Abs() {
			worst, who = po, "pool "+p.ID+"'s"
		}
		jumps += p.ClockJumps
	}
	switch {
	case worst.Abs() > jobs.ClockOffsetWarn:
		dir := "ahead of"
		if worst < 0 {
			dir = "behind"
		}
		v.Warning = "The namespace's time, which deadlines here are on, is " + roundOffset(worst.Abs()) + " " + dir + " " + who +
			" clock: read a deadline here against the namespace's time above, not that clock, and fix the clock that is off (NTP)."
	case jumps > 0 && held.Abs() > jobs.ClockOffsetWarn:
		dir := "ahead of"
		if held < 0 {
			dir = "behind"
		}
		v.Warning = "Pools saw Redis's clock jump backwards (a failover to a node whose clock is behind, or a clock stepped back). " +
			"The namespace's time went on from where it was: its offset holds it " + roundOffset(held.Abs()) + " " + dir +
			" Redis's clock, so no deadline or due time moved. Fix the node's clock (NTP); the offset drops to 0 once the clock is back."
	case jumps > 0:
		v.Warning = "Pools saw Redis's clock jump backwards (a failover to a node whose clock is behind, or a clock stepped back). " +
			"The namespace's time went on from where it was, so no deadline or due time moved, and it is on Redis's clock again; " +
			"if the jumps go on, fix the clock of the node they name (NTP)."
	}
	return v, nil
}

// roundOffset writes a measured clock offset as an operator reads it: to
// the millisecond under a minute, to the second above (a measured
// 9m59.999s is 10m0s).
func roundOffset(d time.Duration) string {
	if d.Abs() < time.Minute {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// ms returns d in milliseconds, to the microsecond.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
