package dashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
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
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid", "body must be "+shape+", at most "+strconv.FormatInt(limit, 10)+" bytes")
		return false
	}
	// encoding/json keeps the last of two equal keys and matches keys
	// without regard to case, so {"decision":"succeeded","Decision":"dead"}
	// would act on a value a reader of the body (a proxy's log, a review)
	// takes for another: refuse such a body.
	if key, dup := duplicateKey(b); dup {
		writeError(w, http.StatusBadRequest, "invalid", "body must be "+shape+", each field once: "+strconv.Quote(key)+" is repeated")
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(b))
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

// duplicateKey reports the first key that an object of the JSON text b
// repeats, at any depth, comparing keys as encoding/json matches them to
// fields (Unicode case folding). Text that is not JSON reports none (the
// decoder refuses it).
func duplicateKey(b []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	type frame struct {
		object bool
		key    bool // the next token of the object is a key
		keys   map[string]bool
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		var top *frame
		if n := len(stack); n > 0 {
			top = stack[n-1]
		}
		if top != nil && top.object && top.key {
			if k, ok := tok.(string); ok {
				f := foldKey(k)
				if top.keys[f] {
					return k, true
				}
				top.keys[f] = true
				top.key = false
				continue
			}
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{object: true, key: true, keys: map[string]bool{}})
			continue
		case json.Delim('['):
			stack = append(stack, &frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		// A value ended: the object it was in expects a key next.
		if n := len(stack); n > 0 && stack[n-1].object {
			stack[n-1].key = true
		}
	}
}

// foldKey maps k to one representative of the keys encoding/json takes
// for the same field: each rune becomes the smallest of its simple case
// folding orbit (so K, k and the Kelvin sign fold alike).
func foldKey(k string) string {
	return strings.Map(func(r rune) rune {
		m := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			m = min(m, f)
		}
		return m
	}, k)
}

// note trims an operator's note, answering 400 when it is too long, holds
// a control character other than a line feed or a tab (jobs.ValidateNote),
// or is missing though required: a bulk action refuses it once, before
// touching any job.
func note(w http.ResponseWriter, s string, required bool) (string, bool) {
	s = strings.TrimSpace(s)
	if len(s) > maxNoteLength {
		writeError(w, http.StatusBadRequest, "invalid", "note longer than 2000 bytes")
		return "", false
	}
	if err := jobs.ValidateNote(s); err != nil {
		writeError(w, http.StatusBadRequest, "invalid", err.Error())
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

// jobActionRequest is an action on one job. State, Token and Runs are
// what the page showed (the job's state, token, "" for a job never
// claimed, and run count): given, the action applies only while the job is
// still there, else 409.
type jobActionRequest struct {
	Note  string     `json:"note"`
	State jobs.State `json:"state"`
	Token string     `json:"token"`
	Runs  int        `json:"runs"`
}

// jobAction is an operator action on one job: it checks credentials, the
// CSRF token, the path, the note and what the page saw, runs do with the
// operator's name, logs the result with the job id, and answers with the
// job (plus extra).
type jobAction struct {
	name         string // in logs
	noteRequired bool
	do           func(ctx context.Context, queue, id string, seen *jobs.Seen, actor, note string) (*jobs.Record, error)
	extra        func(ctx context.Context, rec *jobs.Record) map[string]any
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
		var req jobActionRequest
		if !decodeBody(w, r, maxResolveBody, &req, `{"note": "why", "state": "...", "token": "...", "runs": 0}`) {
			return
		}
		n, ok := note(w, req.Note, a.noteRequired)
		if !ok {
			return
		}
		seen, ok := seenOf(w, req.State, req.Token, req.Runs)
		if !ok {
			return
		}
		ctx, cancel := h.actionContext(r)
		defer cancel()
		log := h.log.With("queue", queue, "job_id", id, "action", a.name, "actor", who.actor)
		rec, err := a.do(ctx, queue, id, seen, who.actor, n)
		if err != nil {
			log.WarnContext(ctx, "dashboard: operator action failed", "error", err)
			h.failAction(w, r, err)
			return
		}
		log.InfoContext(ctx, "dashboard: operator action done", "state", string(rec.State))
		out := map[string]any{"job": viewOf(rec)}
		if a.extra != nil {
			for k, v := range a.extra(ctx, rec) {
				out[k] = v
			}
		}
		writeJSON(w, http.StatusOK, out)
	}
}

// seenOf parses the state, token and run count a page showed (nil when
// none was sent; a token "" is a job never claimed), answering 400 when it
// cannot.
func seenOf(w http.ResponseWriter, state jobs.State, token string, runs int) (*jobs.Seen, bool) {
	if state == "" && token == "" && runs == 0 {
		return nil, true
	}
	if runs < 0 {
		writeError(w, http.StatusBadRequest, "invalid", "runs must be the job's run count as shown")
		return nil, false
	}
	if !state.Valid() {
		writeError(w, http.StatusBadRequest, "invalid", "state must be the state the job was seen in, one of "+stateNames)
		return nil, false
	}
	seen := &jobs.Seen{State: state, Runs: runs}
	if token != "" {
		t, err := strconv.ParseUint(token, 10, 64)
		if err != nil {
			writeError(w, http.StatusBadRequest, "invalid", "token must be the job's token as shown (decimal), or empty")
			return nil, false
		}
		seen.Token = lease.Token(t)
	}
	return seen, true
}

// apiCancel cancels a pending (due or scheduled) job, or asks a running
// job's attempt to stop (its outcome is still committed by its token).
func (h *Handler) apiCancel() http.HandlerFunc {
	return h.serveJobAction(jobAction{name: "cancel", noteRequired: true,
		do: func(ctx context.Context, queue, id string, seen *jobs.Seen, actor, note string) (*jobs.Record, error) {
			if seen != nil {
				return h.client.CancelSeen(ctx, queue, id, *seen, actor, note)
			}
			return h.client.Cancel(ctx, queue, id, actor, note)
		},
		extra: func(_ context.Context, rec *jobs.Record) map[string]any {
			return map[string]any{"stop_requested": rec.State == jobs.Running}
		}})
}

// apiRunNow makes a scheduled job due at once, and says who paused its
// queue when it is paused (queue_paused): then it starts only once the
// queue is resumed.
func (h *Handler) apiRunNow() http.HandlerFunc {
	return h.serveJobAction(jobAction{name: "run_now",
		do: func(ctx context.Context, queue, id string, seen *jobs.Seen, actor, note string) (*jobs.Record, error) {
			if seen != nil {
				return h.client.RunNowSeen(ctx, queue, id, *seen, actor, note)
			}
			return h.client.RunNow(ctx, queue, id, actor, note)
		},
		extra: func(ctx context.Context, rec *jobs.Record) map[string]any {
			p, err := h.insp.Paused(ctx, rec.Queue)
			if err != nil { // the job is due: only the note about a pause is missing
				h.log.WarnContext(ctx, "dashboard: reading whether the queue is paused failed", "queue", rec.Queue, "error", err)
			}
			return map[string]any{"queue_paused": p}
		}})
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
		// Read before the action, which lists the queue: a queue no job or
		// pool has used is most likely a mistyped name, and the answer says
		// so ("known": false), as the CLI does.
		queues, err := h.insp.Queues(ctx)
		if err != nil {
			log.WarnContext(ctx, "dashboard: reading the queues before the action failed; nothing was done", "error", err)
			h.fail(w, r, err)
			return
		}
		known := slices.Contains(queues, queue)
		changed, err := set(ctx, queue, who.actor, n)
		if err != nil {
			log.WarnContext(ctx, "dashboard: operator action failed", "error", err)
			h.failAction(w, r, err)
			return
		}
		log.InfoContext(ctx, "dashboard: operator "+action+"d queue", "changed", changed)
		paused, err := h.insp.Paused(ctx, queue)
		if err != nil {
			// The action stands: say it was done, and that the queue's
			// state could not be read back, rather than that it failed.
			log.WarnContext(ctx, "dashboard: reading the queue back after the action failed; the action stands", "error", err)
			writeJSON(w, http.StatusOK, map[string]any{"queue": queue, "changed": changed, "known": known, "unread": true})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"queue": queue, "paused": paused, "changed": changed, "known": known})
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
	// State is the state the jobs were selected in (optional): the action
	// then applies only to the jobs still in it, so a job that moved on (a
	// scheduled job now running, a dead one now uncertain) is left alone.
	State jobs.State `json:"state"`
}

type bulkFailure struct {
	Queue string `json:"queue"`
	ID    string `json:"id"`
	Code  string `json:"code"` // not_found, wrong_state, invalid, unacknowledged, write_refused, not_fenced_out, unavailable
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
// since it was selected; given the state they were selected in, the
// action skips those no longer in it).
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
	listed := make(map[jobRef]bool, len(req.Jobs))
	for _, j := range req.Jobs {
		if err := jobs.ValidateQueueRef(j.Queue); err != nil {
			writeError(w, http.StatusBadRequest, "invalid", err.Error())
			return
		}
		if j.ID == "" || len(j.ID) > maxIDLength {
			writeError(w, http.StatusBadRequest, "invalid", "bad job id")
			return
		}
		// A job listed twice would be counted done twice.
		if listed[j] {
			writeError(w, http.StatusBadRequest, "invalid", "jobs must list each job once")
			return
		}
		listed[j] = true
	}
	n, ok := note(w, req.Note, true)
	if !ok {
		return
	}
	ctx, cancel := h.actionContext(r)
	defer cancel()
	out := bulkResult{Action: req.Action, Requested: len(req.Jobs), Failed: []bulkFailure{}}
	for i, j := range req.Jobs {
		if ctx.Err() != nil {
			// Out of time (Options.Timeout): the jobs left are not tried,
			// nor each logged as a ledger failure.
			h.log.WarnContext(ctx, "dashboard: bulk action ran out of time", "action", req.Action, "actor", who.actor,
				"not_attempted", len(req.Jobs)-i, "error", ctx.Err())
			for _, k := range req.Jobs[i:] {
				out.Failed = append(out.Failed, bulkFailure{Queue: k.Queue, ID: k.ID, Code: "unavailable",
					Error: "not attempted: the action ran out of time; it is left as it was (select the jobs left and act again)"})
			}
			break
		}
		var err error
		seen := jobs.Seen{State: req.State, AnyToken: true}
		switch {
		case req.Action == "cancel" && req.State != "":
			_, err = h.client.CancelSeen(ctx, j.Queue, j.ID, seen, who.actor, n)
		case req.Action == "cancel":
			_, err = h.client.Cancel(ctx, j.Queue, j.ID, who.actor, n)
		case req.Action == "run_now" && req.State != "":
			_, err = h.client.RunNowSeen(ctx, j.Queue, j.ID, seen, who.actor, n)
		case req.Action == "run_now":
			_, err = h.client.RunNow(ctx, j.Queue, j.ID, who.actor, n)
		case req.State != "":
			_, err = h.client.ResolveSeen(ctx, j.Queue, j.ID, seen, jobs.DecideRerun, who.actor, n)
		default:
			_, err = h.client.Resolve(ctx, j.Queue, j.ID, jobs.DecideRerun, who.actor, n)
		}
		if err == nil {
			out.Done++
			continue
		}
		code := "unavailable"
		switch {
		case errors.Is(err, jobs.ErrNotFencedOut):
			code = "not_fenced_out"
			h.log.ErrorContext(ctx, "dashboard: a bulk re-run was not recorded on a job: its last attempt could not be fenced out of the Config.Fencer store; nothing was decided", "queue", j.Queue, "job_id", j.ID, "error", err)
		case errors.Is(err, jobs.ErrNotFound):
			code = "not_found"
		case errors.Is(err, jobs.ErrWrongState):
			code = "wrong_state"
		case errors.Is(err, jobs.ErrInvalid):
			code = "invalid"
		case errors.Is(err, jobs.ErrActionUnknown):
			code = "unacknowledged"
		case refusedWrite(err):
			code = "write_refused"
			h.log.WarnContext(ctx, "dashboard: Redis refused a bulk action's writes on a job; nothing was done", "queue", j.Queue, "job_id", j.ID, "error", err)
		default:
			h.log.WarnContext(ctx, "dashboard: bulk action failed on a job", "queue", j.Queue, "job_id", j.ID, "error", err)
		}
		msg := err.Error()
		switch code {
		case "unavailable":
			msg = mayHaveBeenDone
		case "unacknowledged":
			msg = unacknowledgedMsg
		case "write_refused":
			msg = writeRefusedMsg
		case "not_fenced_out":
			msg = notFencedOutMsg
		}
		out.Failed = append(out.Failed, bulkFailure{Queue: j.Queue, ID: j.ID, Code: code, Error: msg})
	}
	h.log.InfoContext(ctx, "dashboard: operator bulk action", "action", req.Action, "actor", who.actor,
		"requested", out.Requested, "done", out.Done, "failed", len(out.Failed))
	writeJSON(w, http.StatusOK, out)
}
