package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/fencedq/fencedq/jobs"
)

// maxBulkBody bounds a bulk action's body (maxSelection job references).
const maxBulkBody = 512 << 10

// decodeBody reads r's JSON body into v, strictly (one object of v's
// fields, nothing after it but white space, at most limit bytes),
// answering 415 or 400 when it cannot. Every action's body is read here.
func decodeBody(w http.ResponseWriter, r *http.Request, limit int64, v any, shape string) bool {
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		writeError(w, http.StatusUnsupportedMediaType, "invalid", "send the body as application/json")
		return false
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, limit))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, "invalid", "body must be "+shape)
		return false
	}
	// A second value ({...}{"action":"rerun"}) or any other trailing data
	// would be ignored by Decode: refuse the body instead.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		writeError(w, http.StatusBadRequest, "invalid", "body must be "+shape+", with nothing after it")
		return false
	}
	return true
}

// note trims an operator's note, answering 400 when it is too long or
// missing though required.
func note(w http.ResponseWriter, s string, required bool) (string, bool) {
	s = strings.TrimSpace(s)
	if len(s) > maxNoteLength {
		writeError(w, http.StatusBadRequest, "invalid", "note longer than 2000 bytes")
		return "", false
	}
	if required && s == "" {
		writeError(w, http.StatusBadRequest, "invalid", "say why in the note (it is recorded with the action)")
		return "", false
	}
	return s, true
}

// actionContext finishes an action that was sent even if the browser goes
// away, so what the ledger did is always logged.
func (h *Handler) actionContext(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(r.Context()), h.opts.Timeout)
}

type noteRequest struct {
	Note string `json:"note"`
}

// jobAction is an operator action on one job: it checks credentials, the
// CSRF token, the path and the note, runs do with the operator's name, logs
// the result with the job id, and answers with the job (plus extra).
type jobAction struct {
	name         string // in logs
	noteRequired bool
	do           func(ctx context.Context, queue, id, actor, note string) (*jobs.Record, error)
	extra        func(rec *jobs.Record) map[string]any
}

func (h *Handler) serveJobAction(a jobAction) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		who, ok := h.authorizeAction(w, r)
		if !ok {
			return
		}
		queue, id, ok := pathJob(w, r)
		if !ok {
			return
		}
		var req noteRequest
		if !decodeBody(w, r, maxResolveBody, &req, `{"note": "why"}`) {
			return
		}
		n, ok := note(w, req.Note, a.noteRequired)
		if !ok {
			return
		}
		ctx, cancel := h.actionContext(r)
		defer cancel()
		log := h.log.With("queue", queue, "job_id", id, "action", a.name, "actor", who.actor)
		rec, err := a.do(ctx, queue, id, who.actor, n)
		if err != nil {
			log.WarnContext(ctx, "dashboard: operator action failed", "error", err)
			h.fail(w, r, err)
			return
		}
		log.InfoContext(ctx, "dashboard: operator action done", "state", string(rec.State))
		out := map[string]any{"job": viewOf(rec)}
		if a.extra != nil {
			for k, v := range a.extra(rec) {
				out[k] = v
			}
		}
		writeJSON(w, http.StatusOK, out)
	}
}

// apiCancel cancels a pending (due or scheduled) job, or asks a running
// job's attempt to stop (its outcome is still committed by its token).
func (h *Handler) apiCancel() http.HandlerFunc {
	return h.serveJobAction(jobAction{name: "cancel", noteRequired: true, do: h.client.Cancel,
		extra: func(rec *jobs.Record) map[string]any {
			return map[string]any{"stop_requested": rec.State == jobs.Running}
		}})
}

// apiRunNow makes a scheduled job due at once.
func (h *Handler) apiRunNow() http.HandlerFunc {
	return h.serveJobAction(jobAction{name: "run_now", do: h.client.RunNow})
}

// apiPause pauses (pause=true) or resumes a queue.
func (h *Handler) apiPause(pause bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		who, ok := h.authorizeAction(w, r)
		if !ok {
			return
		}
		queue := r.PathValue("queue")
		if queue == "" || !queueParam(w, queue) {
			if queue == "" {
				writeError(w, http.StatusBadRequest, "invalid", "bad queue")
			}
			return
		}
		var req pauseRequest
		if !decodeBody(w, r, maxResolveBody, &req, `{"note": "why"}`) {
			return
		}
		n, ok := note(w, req.Note, pause)
		if !ok {
			return
		}
		ctx, cancel := h.actionContext(r)
		defer cancel()
		action, set := "resume", h.client.Resume
		switch {
		case pause:
			action, set = "pause", h.client.Pause
		case req.PauseID != nil:
			set = func(ctx context.Context, queue, actor, note string) (bool, error) {
				return h.client.ResumeSeen(ctx, queue, *req.PauseID, actor, note)
			}
		}
		log := h.log.With("queue", queue, "action", action, "actor", who.actor)
		changed, err := set(ctx, queue, who.actor, n)
		if err != nil {
			log.WarnContext(ctx, "dashboard: operator action failed", "error", err)
			h.fail(w, r, err)
			return
		}
		paused, err := h.insp.Paused(ctx, queue)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		log.InfoContext(ctx, "dashboard: operator "+action+"d queue", "changed", changed)
		writeJSON(w, http.StatusOK, map[string]any{"queue": queue, "paused": paused, "changed": changed})
	}
}

// pauseRequest is a pause or a resume. PauseID (a resume, optional) names
// the pause the page showed ("" one recorded without an id): a queue
// paused again since by another pause stays paused (409 wrong_state).
type pauseRequest struct {
	Note    string  `json:"note"`
	PauseID *string `json:"pause_id"`
}

// bulkRequest is a bulk action over jobs the page selected (api/jobs with
// select=1) and the operator confirmed.
type bulkRequest struct {
	// Action is "cancel", "rerun" or "run_now".
	Action string   `json:"action"`
	Jobs   []jobRef `json:"jobs"`
	Note   string   `json:"note"`
	// State is the state the jobs were selected in (optional): a re-run
	// then applies only to the jobs still in it, so a job that moved on
	// (to uncertain, say) is not run again blindly.
	State jobs.State `json:"state"`
}

type bulkFailure struct {
	Queue string `json:"queue"`
	ID    string `json:"id"`
	Code  string `json:"code"` // not_found, wrong_state, invalid, unavailable
	Error string `json:"error"`
}

type bulkResult struct {
	Action    string        `json:"action"`
	Requested int           `json:"requested"`
	Done      int           `json:"done"`
	Failed    []bulkFailure `json:"failed"`
}

// apiBulk cancels, re-runs or runs now each listed job, recording the actor and the
// note with each, and reports which could not be (a job may have moved on
// since it was selected; a re-run given the state they were selected in
// skips those no longer in it).
func (h *Handler) apiBulk(w http.ResponseWriter, r *http.Request) {
	who, ok := h.authorizeAction(w, r)
	if !ok {
		return
	}
	var req bulkRequest
	shape := `{"action": "cancel|rerun|run_now", "jobs": [{"queue": "...", "id": "..."}], "note": "why", "state": "..."}`
	if !decodeBody(w, r, maxBulkBody, &req, shape) {
		return
	}
	if req.Action != "cancel" && req.Action != "rerun" && req.Action != "run_now" {
		writeError(w, http.StatusBadRequest, "invalid", "action must be cancel, rerun or run_now")
		return
	}
	if req.State != "" && !req.State.Valid() {
		writeError(w, http.StatusBadRequest, "invalid", "state must be the state the jobs were selected in, one of "+stateNames)
		return
	}
	if len(req.Jobs) == 0 || len(req.Jobs) > maxSelection {
		writeError(w, http.StatusBadRequest, "invalid", "jobs must list 1 to 1000 jobs")
		return
	}
	for _, j := range req.Jobs {
		if err := jobs.ValidateQueueRef(j.Queue); err != nil {
			writeError(w, http.StatusBadRequest, "invalid", err.Error())
			return
		}
		if j.ID == "" || len(j.ID) > maxIDLength {
			writeError(w, http.StatusBadRequest, "invalid", "bad job id")
			return
		}
	}
	n, ok := note(w, req.Note, true)
	if !ok {
		return
	}
	ctx, cancel := h.actionContext(r)
	defer cancel()
	out := bulkResult{Action: req.Action, Requested: len(req.Jobs), Failed: []bulkFailure{}}
	for _, j := range req.Jobs {
		var err error
		switch req.Action {
		case "cancel":
			_, err = h.client.Cancel(ctx, j.Queue, j.ID, who.actor, n)
		case "run_now":
			_, err = h.client.RunNow(ctx, j.Queue, j.ID, who.actor, n)
		case "rerun":
			if req.State != "" {
				_, err = h.client.ResolveSeen(ctx, j.Queue, j.ID, jobs.Seen{State: req.State, AnyToken: true}, jobs.DecideRerun, who.actor, n)
			} else {
				_, err = h.client.Resolve(ctx, j.Queue, j.ID, jobs.DecideRerun, who.actor, n)
			}
		}
		if err == nil {
			out.Done++
			continue
		}
		code := "unavailable"
		switch {
		case errors.Is(err, jobs.ErrNotFound):
			code = "not_found"
		case errors.Is(err, jobs.ErrWrongState):
			code = "wrong_state"
		case errors.Is(err, jobs.ErrInvalid):
			code = "invalid"
		default:
			h.log.WarnContext(ctx, "dashboard: bulk action failed on a job", "queue", j.Queue, "job_id", j.ID, "error", err)
		}
		msg := err.Error()
		if code == "unavailable" {
			msg = "the ledger could not be reached; see the server log"
		}
		out.Failed = append(out.Failed, bulkFailure{Queue: j.Queue, ID: j.ID, Code: code, Error: msg})
	}
	h.log.InfoContext(ctx, "dashboard: operator bulk action", "action", req.Action, "actor", who.actor,
		"requested", out.Requested, "done", out.Done, "failed", len(out.Failed))
	writeJSON(w, http.StatusOK, out)
}
