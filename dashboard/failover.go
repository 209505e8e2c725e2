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
}

// apiRewinds lists the ledger rewinds detected in the last rewindWindow
// (by Redis time), latest first: the banner every page shows.
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
	out := rewindList{ServerTime: now, WindowHours: int(rewindWindow / time.Hour), Rewinds: []rewindView{}}
	for _, rw := range rs {
		if now.Sub(rw.LastAt) <= rewindWindow {
			out.Rewinds = append(out.Rewinds, rewindView{Rewind: rw, LostWrites: rw.LostWrites()})
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// poolClock is one pool's latest offset, for the stuck page.
type poolClock struct {
	Pool     string  `json:"pool"`
	OffsetMS float64 `json:"offset_ms"`
	Jumps    int64   `json:"jumps"`
}

// clockView says which clock a page's times are on and how far the other
// clocks are from it.
type clockView struct {
	// DashboardOffsetMS is Redis's clock minus this dashboard's, within
	// ±DashboardRTTMS/2.
	DashboardOffsetMS float64 `json:"dashboard_offset_ms"`
	DashboardRTTMS    float64 `json:"dashboard_rtt_ms"`
	// Pools are the live pools' latest measurements of Redis's clock
	// against theirs.
	Pools []poolClock `json:"pools"`
	// WarnMS is the offset beyond which the page warns; Warning says
	// what is off ("" when nothing is).
	WarnMS  int64  `json:"warn_ms"`
	Warning string `json:"warning,omitempty"`
}

// clocks measures this dashboard's offset from Redis and collects the
// pools' latest ones.
func (h *Handler) clocks(ctx context.Context) (clockView, error) {
	s, err := h.insp.Clock(ctx)
	if err != nil {
		return clockView{}, err
	}
	ps, err := h.insp.Pools(ctx)
	if err != nil {
		return clockView{}, err
	}
	v := clockView{DashboardOffsetMS: s.OffsetMS, DashboardRTTMS: s.RTTMS, Pools: []poolClock{},
		WarnMS: jobs.ClockOffsetWarn.Milliseconds()}
	worst, who := s.Offset(), "this dashboard's"
	jumps := int64(0)
	for _, p := range ps {
		if p.Clock.At.IsZero() {
			continue
		}
		v.Pools = append(v.Pools, poolClock{Pool: p.ID, OffsetMS: p.Clock.OffsetMS, Jumps: p.ClockJumps})
		if p.Clock.Offset().Abs() > worst.Abs() {
			worst, who = p.Clock.Offset(), "pool "+p.ID+"'s"
		}
		jumps += p.ClockJumps
	}
	switch {
	case worst.Abs() > jobs.ClockOffsetWarn:
		dir := "ahead of"
		if worst < 0 {
			dir = "behind"
		}
		v.Warning = "Redis's clock is " + worst.Abs().Round(time.Millisecond).String() + " " + dir + " " + who +
			": deadlines here are Redis's, and a deadline that looks far away may be near for the pools (or the reverse)."
	case jumps > 0:
		v.Warning = "Pools saw Redis's clock jump backwards (a failover to a node whose clock is behind?): lease deadlines set before the jump end later than they should."
	}
	return v, nil
}
