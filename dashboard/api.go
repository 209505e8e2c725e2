package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fencedq/fencedq/internal/termsafe"
	"github.com/fencedq/fencedq/jobs"
)

// Limits on what one request reads.
const (
	defaultLimit = 50
	maxLimit     = 500
	maxOffset    = 100_000
	maxEvents    = 1000 // the ledger keeps at most this many per queue
	// eventBudget bounds the events api/events reads over all queues: past
	// eventBudget/maxEvents queues, each queue's newest share of it.
	eventBudget    = 20 * maxEvents
	historyInline  = 20 // history entries shown with each job of a list
	maxIDLength    = 200
	maxNoteLength  = 2000
	maxResolveBody = 8 << 10
)

// stateNames lists the job states for error messages.
var stateNames = func() string {
	names := make([]string, len(jobs.States))
	for i, s := range jobs.States {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}()

// eventTypes maps the api/events type filter to the event types it selects:
// operator actions are cancellations, resolutions, runs now, pauses and
// resumptions.
var eventTypes = map[string][]string{
	"deduplicated": {"deduplicated"},
	"fenced":       {"fenced"},
	"operator":     {"cancel", "resolve", "pause", "resume", "run_now"},
}

// writeJSON sends v as JSON; encoding/json escapes <, > and & in strings,
// termsafe.JSONWriter the characters a terminal may act on.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, `{"error":"encoding failed"}`, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	// read in terminals too (curl): no character there may act on one
	_, _ = termsafe.JSONWriter(w).Write(append(b, '\n'))
}

type apiError struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, apiError{Error: msg, Code: code})
}

// unacknowledgedMsg answers an action that applied on the primary but too
// few replicas acknowledged (durable mode: jobs.ErrActionUnknown).
const unacknowledgedMsg = "the action applied on the primary, but too few Redis replicas acknowledged it in time: " +
	"it may be lost in a failover; look at the job again once the replicas are back and repeat the action if it is not as wanted"

// fail answers a ledger error: 404 for a missing job, 400 for invalid
// input, 409 for a wrong state, 503 "unacknowledged" for an action too
// few replicas acknowledged, 503 otherwise (logged, not shown).
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, jobs.ErrActionUnknown):
		writeError(w, http.StatusServiceUnavailable, "unacknowledged", unacknowledgedMsg)
	case errors.Is(err, jobs.ErrNotFound):
		writeError(w, http.StatusNotFound, "not_found", "no such job (it may have expired after the retention period)")
	case errors.Is(err, jobs.ErrInvalid):
		writeError(w, http.StatusBadRequest, "invalid", err.Error())
	case errors.Is(err, jobs.ErrWrongState):
		writeError(w, http.StatusConflict, "wrong_state", err.Error())
	default:
		h.log.ErrorContext(r.Context(), "dashboard: ledger request failed", "path", r.URL.Path, "error", err)
		writeError(w, http.StatusServiceUnavailable, "unavailable", "the ledger could not be read; see the server log")
	}
}

// mayHaveBeenDone answers an action that failed for the ledger (Redis
// down, a timeout, a lost reply): Redis may have run it all the same.
const mayHaveBeenDone = "the ledger did not answer: the action may have been done; look at the job or queue before acting again (see the server log)"

// writeRefusedMsg answers an action Redis refused before writing
// (jobs.ErrWriteRefused, jobs.ErrOutOfMemory): nothing was done.
const writeRefusedMsg = "Redis refused the write (a read-only replica, as a primary a failover demoted is; too few replicas; " +
	"or out of memory): nothing was done; act again once Redis accepts writes (see the server log)"

// notFencedOutMsg answers a decision that a job's last attempt did not
// apply its operation (a re-run, or dead) when the dashboard's client
// could not cut that attempt off from its jobs.Config.Fencer store first
// (jobs.ErrNotFencedOut): nothing was decided.
const notFencedOutMsg = "the job's last attempt could not be fenced out of the store your handlers write through " +
	"(jobs.Config.Fencer: the store, or Redis for a named resource's lease, did not answer): nothing was decided; " +
	"act again once that store answers (see the server log)"

// refusedWrite reports whether err is Redis's refusal of an action's
// writes, which wrote nothing.
func refusedWrite(err error) bool {
	return errors.Is(err, jobs.ErrWriteRefused) || errors.Is(err, jobs.ErrOutOfMemory)
}

// failAction answers an action's ledger error as fail does, but an action
// Redis refused before writing is answered 503 write_refused, and a
// decision whose attempt could not be fenced out 503 not_fenced_out, both
// saying nothing was done, and any other failure than not found, invalid, a
// wrong state or too few replicas (503) says the action may have been
// done, never that nothing happened: the reply may have been lost after
// Redis ran it.
func (h *Handler) failAction(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, jobs.ErrNotFencedOut) {
		h.log.ErrorContext(r.Context(), "dashboard: an operator's decision was not recorded: the job's last attempt could not be fenced out of the Config.Fencer store; nothing was decided", "path", r.URL.Path, "error", err)
		writeError(w, http.StatusServiceUnavailable, "not_fenced_out", notFencedOutMsg)
		return
	}
	if errors.Is(err, jobs.ErrNotFound) || errors.Is(err, jobs.ErrInvalid) || errors.Is(err, jobs.ErrWrongState) ||
		errors.Is(err, jobs.ErrActionUnknown) {
		h.fail(w, r, err)
		return
	}
	if refusedWrite(err) {
		h.log.ErrorContext(r.Context(), "dashboard: Redis refused an operator action's writes; nothing was done", "path", r.URL.Path, "error", err)
		writeError(w, http.StatusServiceUnavailable, "write_refused", writeRefusedMsg)
		return
	}
	h.log.ErrorContext(r.Context(), "dashboard: operator action failed at the ledger; it may have been done", "path", r.URL.Path, "error", err)
	writeError(w, http.StatusServiceUnavailable, "unavailable", mayHaveBeenDone)
}

// partial marks a view showing part of what it reads: on Redis Cluster
// with a master down, the queue names (partitions) it could not read.
type partial struct {
	Partial     bool     `json:"partial,omitempty"`
	Unreachable []string `json:"unreachable,omitempty"`
}

// degrade takes a read's error for a view that shows what it can: nil or a
// *jobs.PartialError (recorded in p, logged) lets the view go on; any other
// error fails the request, and degrade returns false.
func (h *Handler) degrade(w http.ResponseWriter, r *http.Request, p *partial, err error) bool {
	var pe *jobs.PartialError
	switch {
	case err == nil:
		return true
	case errors.As(err, &pe):
		h.log.WarnContext(r.Context(), "dashboard: view shown without unreachable queue names", "path", r.URL.Path, "error", err)
		p.Partial = true
		for _, n := range pe.Unreachable {
			if !slices.Contains(p.Unreachable, n) {
				p.Unreachable = append(p.Unreachable, n)
			}
		}
		return true
	}
	h.fail(w, r, err)
	return false
}

func (h *Handler) ctx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), h.opts.Timeout)
}

// serverTime is the namespace's time for a view that shows it beside what
// it read (the pages measure ages on it), zero when it cannot be read: the
// view is shown all the same.
func (h *Handler) serverTime(ctx context.Context, r *http.Request) time.Time {
	now, err := h.insp.ServerTime(ctx)
	if err != nil {
		h.log.WarnContext(ctx, "dashboard: view shown without the namespace's time", "path", r.URL.Path, "error", err)
		return time.Time{}
	}
	return now
}

// intParam reads the optional integer query parameter name of a JSON API
// endpoint, by the one rule every numeric parameter follows: absent, def;
// an integer from lo to hi, as given; anything else answers 400 naming the
// parameter and its range (then hint, when given), never cut to the range
// (a page, margin or count other than the one asked, silently).
func intParam(w http.ResponseWriter, r *http.Request, name string, def, lo, hi int, hint string) (int, bool) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return def, true
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		msg := name + " must be an integer from " + strconv.Itoa(lo) + " to " + strconv.Itoa(hi)
		if hint != "" {
			msg += ": " + hint
		}
		writeError(w, http.StatusBadRequest, "invalid", msg)
		return 0, false
	}
	return n, true
}

// limitParam reads the optional limit query parameter of a JSON API
// endpoint: an integer from 1 to maxV (intParam's rule), def when absent.
func limitParam(w http.ResponseWriter, r *http.Request, def, maxV int) (int, bool) {
	return intParam(w, r, "limit", def, 1, maxV, "")
}

// boolParam parses an optional yes-or-no query parameter (1 or true, 0 or
// false), answering 400 for any other value: a script's prefix=false or
// select=yes is never read as its opposite.
func boolParam(w http.ResponseWriter, r *http.Request, name string, def bool) (v, ok bool) {
	switch r.URL.Query().Get(name) {
	case "":
		return def, true
	case "1", "true":
		return true, true
	case "0", "false":
		return false, true
	}
	writeError(w, http.StatusBadRequest, "invalid", name+" must be 1 (or true) or 0 (or false)")
	return false, false
}

// queueParam validates an optional queue name.
func queueParam(w http.ResponseWriter, q string) bool {
	if q == "" {
		return true
	}
	if err := jobs.ValidateQueueRef(q); err != nil {
		writeError(w, http.StatusBadRequest, "invalid", err.Error())
		return false
	}
	return true
}

// queueView is one queue on the overview.
type queueView struct {
	Name   string               `json:"name"`
	Counts map[jobs.State]int64 `json:"counts"`
	// Paused says who paused the queue and why; null while it runs.
	Paused *jobs.Pause `json:"paused"`
	// Stats are the ledger's cumulative counters for the queue (of a
	// partitioned queue, summed over its partitions, without seq: see
	// jobs.Inspector.Stats).
	Stats map[string]int64 `json:"stats"`
	// FencedRejections sums the fenced_* counters; Fenced splits them by stage.
	FencedRejections int64            `json:"fenced_rejections"`
	Fenced           map[string]int64 `json:"fenced"`
	// Deduplicated sums the deduplicated_* counters; Deduplications splits
	// them by stage (enqueue, execute).
	Deduplicated   int64            `json:"deduplicated"`
	Deduplications map[string]int64 `json:"deduplications"`
	// Throughput is null until the dashboard has watched the counters for a
	// second.
	Throughput *throughput `json:"throughput"`
	// Partitions break a partitioned queue down (absent for other queues).
	Partitions []partitionView `json:"partitions,omitempty"`
	// Unreachable names the queue's names (its own, or its partitions')
	// that could not be read, their Redis master down most likely: Counts,
	// Stats and Paused leave them out.
	Unreachable []string `json:"unreachable,omitempty"`
	// LayoutChanges are a partitioned queue's newest changes of its
	// partition count (who, when, why), newest first, at most
	// overviewLayoutChanges (absent for other queues).
	LayoutChanges []jobs.PartitionChange `json:"layout_changes,omitempty"`
}

// overviewLayoutChanges bounds the layout changes the overview shows per
// queue; fencedq partitions --queue shows every one kept.
const overviewLayoutChanges = 5

// partitionView is one partition of a partitioned queue on the overview:
// its depth, its rate and the Redis master holding it.
type partitionView struct {
	Name string `json:"name"`
	// Index is its number in the current layout; -1 for an earlier
	// layout's partition (draining).
	Index      int                  `json:"index"`
	Master     string               `json:"master,omitempty"`
	Counts     map[jobs.State]int64 `json:"counts"`
	Paused     bool                 `json:"paused"`
	Throughput *throughput          `json:"throughput"`
	// Unreachable is true when the partition could not be read (Counts is
	// then null): its master is down, most likely.
	Unreachable bool `json:"unreachable,omitempty"`
}

// leaderView is the maintenance leader's state: the live leader from the
// leader lease (ledger.LeaderResource), and the last scan from what the
// leader last published (jobs.Inspector.LeaderStatus).
type leaderView struct {
	// Present is true while a pool holds the leader lease; false
	// shows as "no leader".
	Present bool `json:"present"`
	// Leader names the live leader (empty without one); never its lease's
	// token, which with its name is the lease's credential.
	Leader string `json:"leader,omitempty"`
	// LeaseDeadline is when the leader's lease ends unless renewed.
	LeaseDeadline time.Time `json:"lease_deadline,omitzero"`
	// RecordedLeader is the leader that published the status last (it may
	// have died since).
	RecordedLeader string    `json:"recorded_leader,omitempty"`
	LastScan       time.Time `json:"last_scan,omitzero"`
	LastScanAgeMS  *int64    `json:"last_scan_age_ms,omitempty"`
	Expired        int64     `json:"expired"`
	Resolved       int64     `json:"resolved"`
}

type overview struct {
	Namespace      string               `json:"namespace"`
	ServerTime     time.Time            `json:"server_time"`
	ActionsEnabled bool                 `json:"actions_enabled"`
	Maintenance    leaderView           `json:"maintenance"`
	Totals         map[jobs.State]int64 `json:"totals"`
	// Paused lists the names of the paused queues.
	Paused []string    `json:"paused"`
	Queues []queueView `json:"queues"`
	// Partial is true when some of the ledger could not be read (on Redis
	// Cluster, a master down): Unreachable says what (queue and partition
	// names, "time" when the namespace's time was taken from this process's
	// clock, "maintenance" when the leader's state is unknown); the error
	// is in the server log.
	partial
}

func (h *Handler) leader(ctx context.Context, now time.Time) (leaderView, error) {
	var v leaderView
	st, err := h.insp.LeaderStatus(ctx)
	if err != nil {
		return leaderView{}, err
	}
	if st != nil {
		v.RecordedLeader, v.Expired, v.Resolved = st.Leader, st.Expired, st.Resolved
		if !st.LastScan.IsZero() {
			v.LastScan = st.LastScan
			age := now.Sub(v.LastScan).Milliseconds()
			v.LastScanAgeMS = &age
		}
	}
	l, err := h.insp.Leader(ctx)
	if err != nil {
		return leaderView{}, err
	}
	if l != nil && (l.Deadline.IsZero() || l.Deadline.After(now)) {
		v.Present, v.Leader, v.LeaseDeadline = true, l.Owner, l.Deadline
	}
	return v, nil
}

// apiOverview answers with what it could read: on Redis Cluster with a
// master down, the queues and partitions it holds are marked unreachable
// (and the namespace's time and the leader's state, when they live there),
// the rest shown; only an unreadable queue registry fails it.
func (h *Handler) apiOverview(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := h.ctx(r)
	defer cancel()
	qs, err := h.insp.Overview(ctx)
	if err != nil && !errors.Is(err, jobs.ErrPartial) {
		h.fail(w, r, err)
		return
	}
	out := overview{
		Namespace: h.insp.Namespace(), ActionsEnabled: h.ActionsEnabled(),
		Totals: map[jobs.State]int64{}, Paused: []string{}, Queues: []queueView{},
	}
	degraded := func(what string, err error) {
		h.log.WarnContext(r.Context(), "dashboard: overview shown without "+what, "error", err)
		out.Partial, out.Unreachable = true, append(out.Unreachable, what)
	}
	now, err := h.insp.ServerTime(ctx)
	if err != nil {
		now = time.Now()
		degraded("time", err)
	}
	out.ServerTime = now
	if out.Maintenance, err = h.leader(ctx, now); err != nil {
		degraded("maintenance", err)
	}
	for _, s := range jobs.States {
		out.Totals[s] = 0
	}
	seen := make([]string, 0, len(qs)) // the names whose rates are kept
	for _, q := range qs {
		seen = append(seen, q.Queue)
	}
	for _, q := range qs {
		counts, stats, paused := q.Counts, q.Stats, q.Paused
		if paused != nil {
			out.Paused = append(out.Paused, q.Queue)
		}
		v := queueView{Name: q.Queue, Counts: counts, Paused: paused, Stats: stats, Fenced: map[string]int64{}, Deduplications: map[string]int64{},
			Unreachable: q.Unreachable}
		if len(q.Unreachable) > 0 {
			h.log.WarnContext(r.Context(), "dashboard: overview shown without unreachable queue names", "queue", q.Queue, "names", q.Unreachable)
			out.Partial, out.Unreachable = true, append(out.Unreachable, q.Unreachable...)
		}
		for k, n := range stats {
			if stage, ok := strings.CutPrefix(k, "fenced_"); ok {
				v.Fenced[stage] = n
				v.FencedRejections += n
			}
			if stage, ok := strings.CutPrefix(k, "deduplicated_"); ok {
				v.Deduplications[stage] = n
				v.Deduplicated += n
			}
		}
		for s, n := range counts {
			out.Totals[s] += n
		}
		if len(q.Unreachable) == 0 { // else the counters lack some: no rate
			v.Throughput = h.rates.observe(q.Queue, counters{
				at: now, enqueued: stats["enqueued"], attempted: stats["attempted"], succeeded: stats["succeeded"],
				dead: stats["dead"], retried: stats["retried"], uncertain: stats["uncertain"],
				fenced: v.FencedRejections, deduped: v.Deduplicated,
			})
		}
		v.Partitions = h.partitions(q, now)
		for _, p := range v.Partitions {
			seen = append(seen, p.Name)
		}
		if v.Partitions != nil {
			v.LayoutChanges = q.Changes[:min(len(q.Changes), overviewLayoutChanges)]
		}
		out.Queues = append(out.Queues, v)
	}
	h.rates.forget(seen)
	writeJSON(w, http.StatusOK, out)
}

// partitions returns queue q's partitions for the overview, nil for a
// queue without partitions.
func (h *Handler) partitions(q jobs.QueueOverview, now time.Time) []partitionView {
	if q.Layout == nil {
		return nil
	}
	out := make([]partitionView, 0, len(q.Layout.Partitions))
	for i, p := range q.Layout.Partitions {
		v := partitionView{Name: p.Name, Index: p.Index, Master: p.Master, Counts: p.Counts, Paused: p.Paused != nil,
			Unreachable: p.Unreachable != ""}
		if !v.Unreachable {
			stats := q.PartitionStats[i]
			v.Throughput = h.rates.observe(p.Name, counters{at: now, enqueued: stats["enqueued"], attempted: stats["attempted"],
				succeeded: stats["succeeded"], dead: stats["dead"], retried: stats["retried"], uncertain: stats["uncertain"]})
		}
		out = append(out, v)
	}
	return out
}

type jobDetail struct {
	Job      *jobView     `json:"job"`
	Attempts []*attempt   `json:"attempts"`
	History  []jobs.Entry `json:"history"`
	// Decisions are the operator decisions the job's state allows.
	Decisions []jobs.Decision `json:"decisions"`
	// Cancellable is true for a pending job or a waiting workflow step
	// (cancelled at once) and a running one (its attempt is asked to stop).
	Cancellable bool `json:"cancellable"`
	// RunnableNow is true for a scheduled job (pending, not yet due) that
	// an operator can make due at once.
	RunnableNow    bool `json:"runnable_now"`
	ActionsEnabled bool `json:"actions_enabled"`
	// ServerTime is the namespace's time, which run_at and deadline are on.
	ServerTime time.Time `json:"server_time"`
	// Overdue is set when the job is late: a running job whose lease
	// deadline has passed or is within the stuck margin (OverdueMS is then
	// how long ago the deadline passed, negative before), or a pending job
	// due for longer than the stuck margin that no pool has claimed
	// (OverdueMS: how long since it was due).
	Overdue   bool   `json:"overdue"`
	OverdueMS *int64 `json:"overdue_ms,omitempty"`
	// QueuePaused says who paused the job's queue, when it is paused.
	QueuePaused *jobs.Pause `json:"queue_paused"`
}

// pathJob validates the {queue} and {id} path values.
func pathJob(w http.ResponseWriter, r *http.Request) (queue, id string, ok bool) {
	queue, id = r.PathValue("queue"), r.PathValue("id")
	if !queueParam(w, queue) {
		return "", "", false
	}
	if id == "" || len(id) > maxIDLength {
		writeError(w, http.StatusBadRequest, "invalid", "bad job id")
		return "", "", false
	}
	return queue, id, true
}

func (h *Handler) apiJob(w http.ResponseWriter, r *http.Request) {
	queue, id, ok := pathJob(w, r)
	if !ok {
		return
	}
	ctx, cancel := h.ctx(r)
	defer cancel()
	rec, err := h.insp.Get(ctx, queue, id)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	hist, err := h.insp.History(ctx, queue, id)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	now, err := h.insp.ServerTime(ctx)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	paused, err := h.insp.Paused(ctx, queue)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out := jobDetail{
		Job: viewOf(rec), Attempts: attemptsOf(hist), History: hist,
		Decisions: decisionsFor(rec.State), ActionsEnabled: h.ActionsEnabled(),
		Cancellable: rec.State == jobs.Pending || rec.State == jobs.Waiting || (rec.State == jobs.Running && rec.CancelledBy == ""),
		RunnableNow: rec.State == jobs.Pending && rec.Bridge == "" && rec.RunAt.After(now),
		ServerTime:  now, QueuePaused: paused,
	}
	switch rec.State {
	case jobs.Running:
		if !rec.Deadline.IsZero() && !rec.Deadline.After(now.Add(h.opts.StuckMargin)) {
			over := now.Sub(rec.Deadline).Milliseconds()
			out.Overdue, out.OverdueMS = true, &over
		}
	case jobs.Pending:
		if !rec.RunAt.IsZero() && now.Sub(rec.RunAt) > h.opts.StuckMargin {
			over := now.Sub(rec.RunAt).Milliseconds()
			out.Overdue, out.OverdueMS = true, &over
		}
	}
	if out.Attempts == nil {
		out.Attempts = []*attempt{}
	}
	if out.History == nil {
		out.History = []jobs.Entry{}
	}
	if out.Decisions == nil {
		out.Decisions = []jobs.Decision{}
	}
	writeJSON(w, http.StatusOK, out)
}

type eventList struct {
	Events []eventView `json:"events"`
	partial
}

// apiEvents merges the queues' event feeds (fenced rejections,
// deduplications and operator actions), newest first, optionally of one
// type (deduplicated, fenced or operator).
func (h *Handler) apiEvents(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	queue, typ := q.Get("queue"), q.Get("type")
	if !queueParam(w, queue) {
		return
	}
	want, ok := eventTypes[typ]
	if typ != "" && !ok {
		writeError(w, http.StatusBadRequest, "invalid", "type must be deduplicated, fenced or operator")
		return
	}
	limit, ok := limitParam(w, r, 100, maxEvents)
	if !ok {
		return
	}
	ctx, cancel := h.ctx(r)
	defer cancel()
	read := limit
	if typ != "" {
		read = maxEvents // filter from the whole feed
	}
	out := eventList{Events: []eventView{}}
	var byQueue map[string][]jobs.Event
	if queue != "" {
		evs, err := h.insp.Events(ctx, queue, read)
		if !h.degrade(w, r, &out.partial, err) {
			return
		}
		byQueue = map[string][]jobs.Event{queue: evs}
	} else {
		var err error
		byQueue, err = h.insp.AllEvents(ctx, read, eventBudget)
		if !h.degrade(w, r, &out.partial, err) {
			return
		}
	}
	for _, name := range slices.Sorted(maps.Keys(byQueue)) { // equal times in queue order
		for _, e := range byQueue[name] {
			if typ != "" && !slices.Contains(want, e.Type) {
				continue
			}
			out.Events = append(out.Events, eventView{
				Queue: name, Type: e.Type, Stage: e.Stage, At: e.At, Job: e.Job, Op: e.Op,
				Token: e.Token, Current: e.Current, Actor: e.Actor, Note: e.Note, Decision: e.Decision,
			})
		}
	}
	slices.SortStableFunc(out.Events, func(a, b eventView) int { return b.At.Compare(a.At) })
	if len(out.Events) > limit {
		out.Events = out.Events[:limit]
	}
	writeJSON(w, http.StatusOK, out)
}

type stuckList struct {
	ServerTime time.Time  `json:"server_time"`
	MarginMS   int64      `json:"margin_ms"`
	Jobs       []*jobView `json:"jobs"`
	// Clock says how far this dashboard's and the pools' clocks are from
	// Redis's, which the page's deadlines are on.
	Clock clockView `json:"clock"`
	// More says more running jobs are due than the limit listed (those
	// due first).
	More bool `json:"more,omitempty"`
	partial
}

// apiStuck lists running jobs whose lease deadline is past or within the
// margin, by Redis time (the clock every ledger deadline uses), most
// overdue first, with the offsets of the other clocks.
func (h *Handler) apiStuck(w http.ResponseWriter, r *http.Request) {
	margin := h.opts.StuckMargin
	if ms, ok := intParam(w, r, "margin_ms", -1, 0, int(time.Hour/time.Millisecond), ""); !ok {
		return
	} else if ms >= 0 {
		margin = time.Duration(ms) * time.Millisecond
	}
	limit, ok := limitParam(w, r, 100, maxLimit)
	if !ok {
		return
	}
	queue := r.URL.Query().Get("queue")
	if !queueParam(w, queue) {
		return
	}
	ctx, cancel := h.ctx(r)
	defer cancel()
	now, err := h.insp.ServerTime(ctx)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	clock, err := h.clocks(ctx)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out := stuckList{ServerTime: now, MarginMS: margin.Milliseconds(), Jobs: []*jobView{}, Clock: clock}
	// One more than the limit, to tell whether there are more.
	var recs []*jobs.Record
	if queue != "" {
		recs, err = h.insp.DueRunning(ctx, queue, now.Add(margin), limit+1)
	} else {
		recs, err = h.insp.AllDueRunning(ctx, now.Add(margin), limit+1)
	}
	if !h.degrade(w, r, &out.partial, err) {
		return
	}
	out.More = len(recs) > limit
	for _, rec := range recs {
		if rec.State != jobs.Running { // committed since the index was read
			continue
		}
		v := viewOf(rec)
		over := now.Sub(rec.Deadline).Milliseconds()
		v.OverdueMS = &over
		out.Jobs = append(out.Jobs, v)
	}
	slices.SortStableFunc(out.Jobs, func(a, b *jobView) int { return a.Deadline.Compare(b.Deadline) })
	if len(out.Jobs) > limit {
		out.Jobs = out.Jobs[:limit]
	}
	writeJSON(w, http.StatusOK, out)
}

type session struct {
	ActionsEnabled bool   `json:"actions_enabled"`
	BasicAuth      bool   `json:"basic_auth"`
	Authenticated  bool   `json:"authenticated"`
	Actor          string `json:"actor,omitempty"`
}

// apiSession tells the pages whether to offer actions and a sign-in link.
func (h *Handler) apiSession(w http.ResponseWriter, r *http.Request) {
	s := session{ActionsEnabled: h.ActionsEnabled(), BasicAuth: h.opts.Username != ""}
	if id, ok := h.authenticate(r); ok {
		s.Authenticated, s.Actor = true, id.actor
	} else if s.ActionsEnabled { // else there are no credentials to guess
		h.logRejected(r)
	}
	writeJSON(w, http.StatusOK, s)
}

// apiCSRF returns the CSRF token, setting its cookie when missing.
func (h *Handler) apiCSRF(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"token": h.csrfToken(w, r), "header": csrfHeader})
}

// apiLogin makes the browser ask for basic-auth credentials, then sends it
// back to the pages (which then send the credentials with every request).
func (h *Handler) apiLogin(w http.ResponseWriter, r *http.Request) {
	if h.opts.Username == "" {
		writeError(w, http.StatusForbidden, "read_only", "no username and password are configured")
		return
	}
	if _, ok := h.authenticate(r); !ok {
		h.challenge(w, r, "sign in to act on jobs")
		return
	}
	w.Header().Set("Location", "../") // relative: the dashboard's root under any prefix
	w.WriteHeader(http.StatusSeeOther)
}

type resolveRequest struct {
	Decision jobs.Decision `json:"decision"`
	Note     string        `json:"note"`
	// State, Token and Runs are what the page showed (the job's state,
	// token, "" for a job never claimed, and run count): given, the
	// decision applies only while the job is still there
	// (jobs.Client.ResolveSeen), so a decision about one attempt never
	// lands on a newer one, nor on a job another operator re-ran since.
	State jobs.State `json:"state"`
	Token string     `json:"token"`
	Runs  int        `json:"runs"`
}

// apiResolve applies an operator's decision to an uncertain, review (or,
// for a re-run, dead or cancelled) job; with the state and token the page
// showed, only while the job is still there.
func (h *Handler) apiResolve(w http.ResponseWriter, r *http.Request) {
	who, ok := h.authorizeAction(w, r)
	if !ok {
		return
	}
	queue, id, ok := pathJob(w, r)
	if !ok {
		return
	}
	var req resolveRequest
	if !decodeBody(w, r, maxResolveBody, &req, `{"decision": "succeeded|rerun|dead", "note": "...", "state": "...", "token": "...", "runs": 0}`) {
		return
	}
	switch req.Decision {
	case jobs.DecideSucceeded, jobs.DecideRerun, jobs.DecideDead:
	default:
		writeError(w, http.StatusBadRequest, "invalid", "decision must be succeeded, rerun or dead")
		return
	}
	req.Note = strings.TrimSpace(req.Note)
	if len(req.Note) > maxNoteLength {
		writeError(w, http.StatusBadRequest, "invalid", "note longer than 2000 bytes")
		return
	}
	seen, ok := seenOf(w, req.State, req.Token, req.Runs)
	if !ok {
		return
	}
	// Finish a decision that was sent even if the browser goes away, so
	// what the ledger did is always logged.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), h.opts.Timeout)
	defer cancel()
	log := h.log.With("queue", queue, "job_id", id, "decision", string(req.Decision), "actor", who.actor)
	var rec *jobs.Record
	var err error
	if seen != nil {
		rec, err = h.client.ResolveSeen(ctx, queue, id, *seen, req.Decision, who.actor, req.Note)
	} else {
		rec, err = h.client.Resolve(ctx, queue, id, req.Decision, who.actor, req.Note)
	}
	if err != nil {
		log.WarnContext(ctx, "dashboard: operator decision failed", "error", err)
		h.failAction(w, r, err)
		return
	}
	log.InfoContext(ctx, "dashboard: operator resolved job", "operation_id", rec.OperationID, "state", string(rec.State))
	writeJSON(w, http.StatusOK, map[string]any{"job": viewOf(rec)})
}
