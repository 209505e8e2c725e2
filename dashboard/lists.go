package dashboard

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/fencedq/fencedq/jobs"
)

// Limits on lists and searches.
const (
	// maxListLimit caps api/jobs?limit (jobs are read whole from Redis, so
	// a page is bounded by what the dashboard reads, not only by what it
	// sends).
	maxListLimit = 200
	// previewBytes is how much of a job's redacted args a list shows.
	previewBytes = 256
	// maxSelection bounds a bulk action's selection.
	maxSelection = 1000
)

// listFilter is a parsed api/jobs query.
type listFilter struct {
	state    jobs.State
	queue    string
	kind     string
	from, to time.Time // on the state index's time; zero: unbounded
	desc     bool
	offset   int
	limit    int
}

// maxTimeMillis is the first millisecond of year 10000, which no time in
// a response can be (encoding/json refuses it).
const maxTimeMillis = 253402300800000

// timeParam parses an optional time: RFC 3339 or unix milliseconds (before
// year 10000).
func timeParam(s string) (time.Time, bool) {
	if s == "" {
		return time.Time{}, true
	}
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		if ms < 0 || ms >= maxTimeMillis {
			return time.Time{}, false
		}
		return time.UnixMilli(ms), true
	}
	t, err := time.Parse(time.RFC3339, s)
	return t, err == nil
}

// parseListFilter reads the list filters, writing a 400 when one is bad.
func parseListFilter(w http.ResponseWriter, r *http.Request) (listFilter, bool) {
	q := r.URL.Query()
	f := listFilter{state: jobs.State(q.Get("state")), queue: q.Get("queue"), kind: q.Get("kind")}
	if !f.state.Valid() {
		writeError(w, http.StatusBadRequest, "invalid", "state must be one of "+stateNames)
		return f, false
	}
	if !queueParam(w, f.queue) {
		return f, false
	}
	if f.kind != "" {
		if err := jobs.ValidateKind(f.kind); err != nil {
			writeError(w, http.StatusBadRequest, "invalid", err.Error())
			return f, false
		}
	}
	var ok1, ok2 bool
	f.from, ok1 = timeParam(q.Get("from"))
	f.to, ok2 = timeParam(q.Get("to"))
	if !ok1 || !ok2 {
		writeError(w, http.StatusBadRequest, "invalid", "from and to must be RFC 3339 times or unix milliseconds, before year 10000")
		return f, false
	}
	if !f.from.IsZero() && !f.to.IsZero() && f.to.Before(f.from) {
		writeError(w, http.StatusBadRequest, "invalid", "to is before from")
		return f, false
	}
	switch q.Get("sort") {
	case "", "asc":
	case "desc":
		f.desc = true
	default:
		writeError(w, http.StatusBadRequest, "invalid", "sort must be asc (oldest first) or desc (newest first)")
		return f, false
	}
	limit, ok := limitParam(w, r, defaultLimit, maxListLimit)
	if !ok {
		return f, false
	}
	// Refused past the bound, not cut to it: the page asked for would not
	// be the page shown.
	offset, ok := intParam(w, r, "offset", 0, 0, maxOffset,
		"narrow the filters (queue, kind, time range) or reverse the order to see the jobs beyond")
	if !ok {
		return f, false
	}
	f.offset, f.limit = offset, limit
	return f, true
}

type jobRef struct {
	Queue string `json:"queue"`
	ID    string `json:"id"`
}

type jobList struct {
	State jobs.State `json:"state"`
	Queue string     `json:"queue,omitempty"`
	Kind  string     `json:"kind,omitempty"`
	From  time.Time  `json:"from,omitzero"`
	To    time.Time  `json:"to,omitzero"`
	// Sort is asc (oldest index time first) or desc.
	Sort   string `json:"sort"`
	Offset int    `json:"offset"`
	Limit  int    `json:"limit"`
	// MaxOffset is the deepest offset served: a larger one is refused.
	MaxOffset int `json:"max_offset"`
	// Total is the number of jobs that pass the filters (across queues when
	// no queue was given); TotalExact is false when a kind filter stopped
	// reading a long index, making Total a lower bound.
	Total      int64      `json:"total"`
	TotalExact bool       `json:"total_exact"`
	Jobs       []*jobView `json:"jobs"`
	// Selection, with select=1, lists every job that passes the filters
	// (at most 1000, in order) for a bulk action; SelectionTruncated says
	// there were more.
	Selection          []jobRef `json:"selection,omitempty"`
	SelectionTruncated bool     `json:"selection_truncated,omitempty"`
	// ServerTime is the namespace's time, which the jobs' times are on
	// (the pages measure ages on it); absent when it could not be read.
	ServerTime time.Time `json:"server_time,omitzero"`
	// partial names the queues (partitions) not read: their jobs are
	// neither listed nor counted in Total.
	partial
}

// apiJobs lists the jobs of one state, filtered by queue, kind and index
// time (from, to), sorted by index time (sort=asc|desc), a page at a time
// (offset, limit). List entries carry a preview of their args and its
// size; the whole args are only on the job's own page.
func (h *Handler) apiJobs(w http.ResponseWriter, r *http.Request) {
	f, ok := parseListFilter(w, r)
	if !ok {
		return
	}
	withHistory, ok := boolParam(w, r, "history", false)
	if !ok {
		return
	}
	sel, ok := boolParam(w, r, "select", false)
	if !ok {
		return
	}
	ctx, cancel := h.ctx(r)
	defer cancel()
	p := jobs.ListParams{State: f.state, Queue: f.queue, Kind: f.kind, From: f.from, To: f.to,
		Desc: f.desc, Offset: f.offset, Limit: f.limit}
	if sel {
		p.Select = maxSelection
	}
	var missed partial
	list, err := h.insp.List(ctx, p)
	if !h.degrade(w, r, &missed, err) {
		return
	}
	out := jobList{partial: missed,
		State: f.state, Queue: f.queue, Kind: f.kind, From: f.from, To: f.to, Sort: "asc",
		Offset: f.offset, Limit: f.limit, MaxOffset: maxOffset, Total: list.Total, TotalExact: list.TotalExact, Jobs: []*jobView{},
		SelectionTruncated: list.SelectionTruncated,
	}
	if f.desc {
		out.Sort = "desc"
	}
	out.ServerTime = h.serverTime(ctx, r)
	if p.Select > 0 {
		out.Selection = []jobRef{}
		for _, ref := range list.Selection {
			out.Selection = append(out.Selection, jobRef{Queue: ref.Queue, ID: ref.ID})
		}
	}
	for _, l := range list.Jobs {
		v := listViewOf(l.Record)
		v.IndexAt = l.IndexAt
		out.Jobs = append(out.Jobs, v)
	}
	if withHistory {
		for _, j := range out.Jobs {
			hist, err := h.insp.History(ctx, j.Queue, j.ID)
			if errors.Is(err, jobs.ErrNotFound) {
				continue // expired since the list was read
			}
			if err != nil {
				h.fail(w, r, err)
				return
			}
			if len(hist) > historyInline {
				hist = hist[len(hist)-historyInline:]
			}
			j.History = hist
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// listViewOf is a job as a list shows it: its args cut to a preview.
func listViewOf(r *jobs.Record) *jobView {
	v := viewOf(r)
	v.ArgsSize = len(v.Args)
	v.ArgsPreview = preview(v.Args, previewBytes)
	v.Args, v.Headers = nil, nil
	return v
}

// preview cuts b to at most n bytes at a rune boundary, marking a cut.
func preview(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(b[cut]) {
		cut--
	}
	return string(b[:cut]) + "…"
}

type searchMatch struct {
	// By says what matched: "job_id", "operation_id", "job_id_prefix" or
	// "operation_id_prefix".
	By  string   `json:"by"`
	Job *jobView `json:"job"`
}

type searchResult struct {
	Query   string        `json:"query"`
	Matches []searchMatch `json:"matches"`
	// Partial is true when the prefix search stopped before it had looked
	// at every key (a large keyspace); an exact id still matches.
	Partial bool `json:"partial"`
}

// apiSearch finds jobs by job id, then by operation id (in every queue),
// then by a job id or operation id starting with the text (prefix=0 or
// false turns the prefix search off).
func (h *Handler) apiSearch(w http.ResponseWriter, r *http.Request) {
	text := strings.TrimSpace(r.URL.Query().Get("q"))
	if text == "" || len(text) > maxIDLength {
		writeError(w, http.StatusBadRequest, "invalid", "q must be a job id, an operation id or a prefix of one (1-200 bytes)")
		return
	}
	prefix, ok := boolParam(w, r, "prefix", true)
	if !ok {
		return
	}
	ctx, cancel := h.ctx(r)
	defer cancel()
	matches, partial, err := h.insp.Search(ctx, text, prefix)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out := searchResult{Query: text, Matches: []searchMatch{}, Partial: partial}
	for _, m := range matches {
		out.Matches = append(out.Matches, searchMatch{By: m.By, Job: listViewOf(m.Record)})
	}
	writeJSON(w, http.StatusOK, out)
}
