package dashboard

import (
	"errors"
	"net/http"
	"time"

	"github.com/fencedq/fencedq/workflow"
)

// maxWorkflowsLimit bounds api/workflows?limit: every workflow listed has
// every step's job read (up to workflow.MaxSteps each), on a read endpoint
// open to every viewer.
const maxWorkflowsLimit = 100

// maxWorkflowsOffset bounds api/workflows?offset: a page at offset reads
// the ids of the newest offset+limit workflows of every queue.
const maxWorkflowsOffset = 10_000

// apiWorkflows lists the newest workflows (state, progress n/m, started),
// limit of them from offset (at most maxWorkflowsOffset), and how many
// there are (total), and, with ?id=, shows one with each step's dependencies, state, token
// and redacted output; a step whose job could not be read (its master
// down) is unreachable, the answer flagged partial. It needs the client
// (workflow reads go through package workflow): a dashboard without one
// answers 503.
func (h *Handler) apiWorkflows(w http.ResponseWriter, r *http.Request) {
	if h.client == nil {
		writeError(w, http.StatusServiceUnavailable, "unavailable", "workflows need a dashboard with a client")
		return
	}
	n, ok := limitParam(w, r, 50, maxWorkflowsLimit)
	if !ok {
		return
	}
	offset, ok := intParam(w, r, "offset", 0, 0, maxWorkflowsOffset, "")
	if !ok {
		return
	}
	// Bounded as every id: it is looked up once per queue.
	id := r.URL.Query().Get("id")
	if len(id) > maxIDLength {
		writeError(w, http.StatusBadRequest, "invalid", "id must be a workflow id (at most 200 bytes)")
		return
	}
	ctx, cancel := h.ctx(r)
	defer cancel()
	var part partial
	if id != "" {
		// A workflow some of whose steps could not be read is shown, those
		// steps unreachable, flagged partial.
		st, err := workflow.Get(ctx, h.client, id)
		if errors.Is(err, workflow.ErrNotFound) {
			writeError(w, http.StatusNotFound, "not_found", "no such workflow")
			return
		}
		if st == nil && err != nil {
			h.fail(w, r, err)
			return
		}
		if !h.degrade(w, r, &part, err) {
			return
		}
		writeJSON(w, http.StatusOK, struct {
			*workflow.Status
			ServerTime time.Time `json:"server_time,omitzero"`
			partial
		}{st, h.serverTime(ctx, r), part})
		return
	}
	list, err := workflow.List(ctx, h.client, offset, n)
	if !h.degrade(w, r, &part, err) {
		return
	}
	total, err := workflow.Count(ctx, h.client)
	if !h.degrade(w, r, &part, err) {
		return
	}
	if list == nil {
		list = []*workflow.Status{}
	}
	writeJSON(w, http.StatusOK, struct {
		Workflows  []*workflow.Status `json:"workflows"`
		Offset     int                `json:"offset"`
		Total      int                `json:"total"`
		ServerTime time.Time          `json:"server_time,omitzero"`
		partial
	}{list, offset, max(total, offset+len(list)), h.serverTime(ctx, r), part})
}
