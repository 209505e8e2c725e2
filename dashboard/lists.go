package dashboard

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

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
	// maxScan bounds how many index entries a kind filter reads per queue
	// and request; beyond it totals are lower bounds.
	maxScan = 20_000
	// scanChunk is how many index entries a kind filter reads at once.
	scanChunk = 500
	// maxSelection bounds a bulk action's selection.
	maxSelection = 1000
	// maxPrefixMatches and maxScanCalls bound an operation-id prefix search.
	maxPrefixMatches = 20
	maxScanCalls     = 50
	scanCount        = 1000
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

// timeParam parses an optional time: RFC 3339 or unix milliseconds.
func timeParam(s string) (time.Time, bool) {
	if s == "" {
		return time.Time{}, true
	}
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		if ms < 0 {
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
		writeError(w, http.StatusBadRequest, "invalid", "from and to must be RFC 3339 times or unix milliseconds")
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
	limit, ok1 := intParam(r, "limit", defaultLimit, maxListLimit)
	offset, ok2 := intParam(r, "offset", 0, maxOffset)
	if !ok1 || !ok2 {
		writeError(w, http.StatusBadRequest, "invalid", "offset and limit must be non-negative integers")
		return f, false
	}
	if limit == 0 {
		limit = defaultLimit
	}
	f.offset, f.limit = offset, limit
	return f, true
}

// indexed is one entry of a state index.
type indexed struct {
	queue string
	id    string
	at    float64 // the index score, unix milliseconds
}

// scoreRange is the index score range of the filter.
func (f listFilter) scoreRange() (lo, hi string) {
	lo, hi = "-inf", "+inf"
	if !f.from.IsZero() {
		lo = strconv.FormatInt(f.from.UnixMilli(), 10)
	}
	if !f.to.IsZero() {
		hi = strconv.FormatInt(f.to.UnixMilli(), 10)
	}
	return lo, hi
}

// matching returns the first need entries of queue q that pass f, in f's
// order, with the number of entries that pass (exact unless the kind
// filter hit maxScan).
func (h *Handler) matching(ctx context.Context, q string, f listFilter, need int) ([]indexed, int64, bool, error) {
	rdb, key := h.ledger.Redis(), h.ledger.StateKey(q, f.state)
	lo, hi := f.scoreRange()
	rng := func(off, n int) ([]redis.Z, error) {
		a := redis.ZRangeArgs{Key: key, ByScore: true, Start: lo, Stop: hi, Offset: int64(off), Count: int64(n), Rev: f.desc}
		if f.desc {
			a.Start, a.Stop = hi, lo
		}
		zs, err := rdb.ZRangeArgsWithScores(ctx, a).Result()
		if err != nil {
			return nil, wrapRead("list "+string(f.state), err)
		}
		return zs, nil
	}
	if f.kind == "" {
		total, err := rdb.ZCount(ctx, key, lo, hi).Result()
		if err != nil {
			return nil, 0, false, wrapRead("count "+string(f.state), err)
		}
		if need == 0 {
			return nil, total, true, nil
		}
		zs, err := rng(0, need)
		if err != nil {
			return nil, 0, false, err
		}
		out := make([]indexed, len(zs))
		for i, z := range zs {
			out[i] = indexed{queue: q, id: z.Member.(string), at: z.Score}
		}
		return out, total, true, nil
	}
	// A kind filter reads the kind of each entry, a chunk at a time.
	var out []indexed
	var total int64
	for off := 0; off < maxScan; off += scanChunk {
		zs, err := rng(off, scanChunk)
		if err != nil {
			return nil, 0, false, err
		}
		pipe := rdb.Pipeline()
		kinds := make([]*redis.StringCmd, len(zs))
		for i, z := range zs {
			kinds[i] = pipe.HGet(ctx, h.ledger.JobKey(q, z.Member.(string)), "kind")
		}
		if len(zs) > 0 {
			if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
				return nil, 0, false, wrapRead("list kinds", err)
			}
		}
		for i, z := range zs {
			if kinds[i].Val() != f.kind {
				continue
			}
			total++
			if len(out) < need {
				out = append(out, indexed{queue: q, id: z.Member.(string), at: z.Score})
			}
		}
		if len(zs) < scanChunk {
			return out, total, true, nil
		}
	}
	return out, total, false, nil
}

// wrapRead names a failed Redis read (fail answers it 503).
func wrapRead(what string, err error) error {
	return fmt.Errorf("dashboard: %s: %w", what, err)
}

// selectJobs applies f across its queues: the page of entries in f's order,
// and the number of entries that pass f.
func (h *Handler) selectJobs(ctx context.Context, f listFilter, need int) ([]indexed, int64, bool, error) {
	qs, err := h.queues(ctx, f.queue)
	if err != nil {
		return nil, 0, false, err
	}
	var all []indexed
	var total int64
	exact := true
	for _, q := range qs {
		items, n, ex, err := h.matching(ctx, q, f, need)
		if err != nil {
			return nil, 0, false, err
		}
		all = append(all, items...)
		total += n
		exact = exact && ex
	}
	slices.SortStableFunc(all, func(a, b indexed) int {
		c := cmp.Compare(a.at, b.at)
		if f.desc {
			c = -c
		}
		return cmp.Or(c, cmp.Compare(a.queue, b.queue), cmp.Compare(a.id, b.id))
	})
	if len(all) > need {
		all = all[:need]
	}
	return all, total, exact, nil
}

// records reads the records of items, in order, dropping those gone.
func (h *Handler) records(ctx context.Context, s jobs.State, items []indexed) ([]*jobs.Record, []indexed, error) {
	byQueue := map[string][]string{}
	for _, it := range items {
		byQueue[it.queue] = append(byQueue[it.queue], it.id)
	}
	found := map[string]*jobs.Record{}
	for q, ids := range byQueue {
		recs, err := h.ledger.GetMany(ctx, q, s, ids)
		if err != nil {
			return nil, nil, err
		}
		for _, r := range recs {
			found[q+"\x00"+r.ID] = r
		}
	}
	var out []*jobs.Record
	var kept []indexed
	for _, it := range items {
		if r, ok := found[it.queue+"\x00"+it.id]; ok {
			out = append(out, r)
			kept = append(kept, it)
		}
	}
	return out, kept, nil
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
	withHistory := r.URL.Query().Get("history") == "1"
	selectAll := r.URL.Query().Get("select") == "1"
	ctx, cancel := h.ctx(r)
	defer cancel()
	need := f.offset + f.limit
	if selectAll {
		need = max(need, maxSelection+1)
	}
	items, total, exact, err := h.selectJobs(ctx, f, need)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out := jobList{
		State: f.state, Queue: f.queue, Kind: f.kind, From: f.from, To: f.to, Sort: "asc",
		Offset: f.offset, Limit: f.limit, Total: total, TotalExact: exact, Jobs: []*jobView{},
	}
	if f.desc {
		out.Sort = "desc"
	}
	if selectAll {
		out.Selection = []jobRef{}
		for i, it := range items {
			if i == maxSelection {
				out.SelectionTruncated = true
				break
			}
			out.Selection = append(out.Selection, jobRef{Queue: it.queue, ID: it.id})
		}
	}
	var page []indexed
	if f.offset < len(items) {
		page = items[f.offset:min(len(items), f.offset+f.limit)]
	}
	recs, page, err := h.records(ctx, f.state, page)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	for i, rec := range recs {
		v := listViewOf(rec)
		v.IndexAt = scoreTime(page[i].at)
		out.Jobs = append(out.Jobs, v)
	}
	if withHistory {
		for _, j := range out.Jobs {
			hist, err := h.ledger.History(ctx, j.Queue, j.ID)
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

// scoreTime is an index score (unix milliseconds) as a time; a score no
// ledger writes (negative, or past year 9999, which JSON cannot encode) is
// the zero time.
func scoreTime(score float64) time.Time {
	if !(score >= 0 && score < maxJSONMillis) {
		return time.Time{}
	}
	return time.UnixMilli(int64(score))
}

// maxJSONMillis is the first millisecond of year 10000: encoding/json
// refuses times from there on.
const maxJSONMillis = 253402300800000

// listViewOf is a job as a list shows it: its args cut to a preview.
func listViewOf(r *jobs.Record) *jobView {
	v := viewOf(r)
	v.ArgsSize = len(v.Args)
	v.ArgsPreview = preview(v.Args, previewBytes)
	v.Args = nil
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
// then by a job id or operation id starting with the text (prefix=0 turns
// the prefix search off).
func (h *Handler) apiSearch(w http.ResponseWriter, r *http.Request) {
	text := strings.TrimSpace(r.URL.Query().Get("q"))
	if text == "" || len(text) > maxIDLength {
		writeError(w, http.StatusBadRequest, "invalid", "q must be a job id, an operation id or a prefix of one (1-200 bytes)")
		return
	}
	ctx, cancel := h.ctx(r)
	defer cancel()
	out := searchResult{Query: text, Matches: []searchMatch{}}
	seen := map[string]bool{}
	add := func(by string, rec *jobs.Record) {
		if k := rec.Queue + "\x00" + rec.ID; !seen[k] {
			seen[k] = true
			out.Matches = append(out.Matches, searchMatch{By: by, Job: listViewOf(rec)})
		}
	}
	rec, err := h.ledger.Find(ctx, text)
	switch {
	case err == nil:
		add("job_id", rec)
	case !errors.Is(err, jobs.ErrNotFound):
		h.fail(w, r, err)
		return
	}
	rec, err = h.ledger.FindByOperation(ctx, text)
	switch {
	case err == nil:
		add("operation_id", rec)
	case !errors.Is(err, jobs.ErrNotFound):
		h.fail(w, r, err)
		return
	}
	if r.URL.Query().Get("prefix") != "0" {
		partial, err := h.prefixSearch(ctx, text, add)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		out.Partial = partial
	}
	writeJSON(w, http.StatusOK, out)
}

// globEscape quotes the glob characters of SCAN's MATCH.
func globEscape(s string) string {
	var b strings.Builder
	for _, c := range s {
		if strings.ContainsRune(`*?[]\`, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// prefixSearch adds the jobs whose id or caller-given operation id starts
// with prefix, scanning the keyspace within a budget; it reports whether
// the budget ran out first.
func (h *Handler) prefixSearch(ctx context.Context, prefix string, add func(string, *jobs.Record)) (bool, error) {
	qs, err := h.ledger.Queues(ctx)
	if err != nil || len(qs) == 0 {
		return false, err
	}
	const placeholder = "\x00queue\x00"
	pattern := func(key func(q, x string) string) string {
		k := key(placeholder, "")
		i := strings.Index(k, placeholder)
		return globEscape(k[:i]) + "*" + globEscape(k[i+len(placeholder):]) + globEscape(prefix) + "*"
	}
	found := 0
	partial := false
	for _, kind := range []struct {
		by  string
		key func(q, x string) string
	}{
		{"operation_id_prefix", h.ledger.OperationKey},
		{"job_id_prefix", h.ledger.JobKey},
	} {
		keys, more, err := h.scanKeys(ctx, pattern(kind.key), maxPrefixMatches-found)
		if err != nil {
			return false, err
		}
		partial = partial || more
		for _, k := range keys {
			if found >= maxPrefixMatches {
				return true, nil
			}
			for _, q := range qs {
				base := kind.key(q, "")
				id, ok := strings.CutPrefix(k, base)
				if !ok || !strings.HasPrefix(id, prefix) {
					continue
				}
				if kind.by == "job_id_prefix" && strings.HasSuffix(id, ":history") {
					continue
				}
				var rec *jobs.Record
				var err error
				if kind.by == "operation_id_prefix" {
					rec, err = h.opRecord(ctx, q, id)
				} else {
					rec, err = h.ledger.Get(ctx, q, id)
				}
				if errors.Is(err, jobs.ErrNotFound) {
					continue
				}
				if err != nil {
					return false, err
				}
				add(kind.by, rec)
				found++
			}
		}
		if found >= maxPrefixMatches {
			return true, nil
		}
	}
	return partial, nil
}

// opRecord returns the job owning operation id op in queue q.
func (h *Handler) opRecord(ctx context.Context, q, op string) (*jobs.Record, error) {
	id, err := h.ledger.Redis().Get(ctx, h.ledger.OperationKey(q, op)).Result()
	if errors.Is(err, redis.Nil) {
		return nil, jobs.ErrNotFound
	}
	if err != nil {
		return nil, wrapRead("operation", err)
	}
	return h.ledger.Get(ctx, q, id)
}

// scanKeys returns up to n keys matching pattern, on every master of a
// cluster, within maxScanCalls SCAN calls; more reports an unfinished scan.
func (h *Handler) scanKeys(ctx context.Context, pattern string, n int) (keys []string, more bool, err error) {
	if n <= 0 {
		return nil, true, nil
	}
	scan := func(ctx context.Context, c redis.Cmdable) error {
		var cursor uint64
		for calls := 0; calls < maxScanCalls; calls++ {
			ks, next, err := c.Scan(ctx, cursor, pattern, scanCount).Result()
			if err != nil {
				return wrapRead("scan", err)
			}
			keys = append(keys, ks...)
			if next == 0 {
				return nil
			}
			if len(keys) >= n {
				more = true
				return nil
			}
			cursor = next
		}
		more = true
		return nil
	}
	switch c := h.ledger.Redis().(type) {
	case *redis.ClusterClient:
		mu := make(chan struct{}, 1) // masters are scanned concurrently
		err = c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			mu <- struct{}{}
			defer func() { <-mu }()
			return scan(ctx, m)
		})
	default:
		err = scan(ctx, c)
	}
	slices.Sort(keys)
	return keys, more, err
}
