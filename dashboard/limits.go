package dashboard

import (
	"net/http"

	"github.com/fencedq/fencedq/jobs"
)

// queueLimits is one queue's flow control on the limits page: its limits,
// rates and fair groups with pending jobs.
type queueLimits struct {
	Queue string `json:"queue"`
	*jobs.FlowStatus
	Groups []jobs.GroupStatus `json:"groups"`
}

// apiLimits lists, per queue, the concurrency limits that hold jobs back,
// with parked jobs or at their limit once a job parked on them (see
// jobs.Inspector.Limits; keys at their limit first: holders,
// waiting count), the rate limits with deferred jobs (starts in the last
// period, deferred jobs; not a full window that deferred none), and the
// fair groups with pending jobs (deepest first: their depth and head).
func (h *Handler) apiLimits(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := h.ctx(r)
	defer cancel()
	out := struct {
		Queues []queueLimits `json:"queues"`
		partial
	}{Queues: []queueLimits{}}
	qs, err := h.insp.AllLimits(ctx)
	if !h.degrade(w, r, &out.partial, err) {
		return
	}
	for _, q := range qs {
		if len(q.Flow.Limits)+len(q.Flow.Rates)+len(q.Groups) > 0 {
			out.Queues = append(out.Queues, queueLimits{Queue: q.Queue, FlowStatus: q.Flow, Groups: q.Groups})
		}
	}
	writeJSON(w, http.StatusOK, out)
}
