package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Rewind detection.
//
// Redis acknowledges a write before any replica has it, so a failover to a
// lagging replica (or a restart from an older snapshot) brings the ledger
// back with older data: acknowledged enqueues, claims and completions are
// gone, and nothing in the data says so. Each queue therefore keeps a write
// sequence, the stats field "seq", raised once by every script call that
// changes the queue's jobs; enqueue, claim and complete return it with the
// queue's enqueued counter and the sequence's history (when it was created).
// A Ledger remembers the highest values it saw per queue. A call sent after a
// reply that showed sequence K runs after that script, so it must find at
// least K; finding less means the ledger went back: a rewind. Finding another
// history means the ledger lost the queue's whole record (a restart without
// persistence, a flushed database), however many writes were made since. The
// detector logs it at error level, records it in Redis
// (rewind.lua: per queue, merged per replication id of the primary the loss
// was found on, so every process's detection of one loss is one record),
// reports it to Config.OnRewind (the metric) and, with a record of recent
// enqueues and workflows (Config.Recent), counts the recorded enqueues
// certainly lost and can re-submit them (Resubmit).
//
// The sequence's history also records where the current primary tenure
// began: the epoch of the clock record (raised by the first minting call
// on each new primary, internal/epoch) and the sequence when the first
// call of that epoch wrote the queue. A process whose mark is of an earlier
// tenure and above that start finds the loss even when the new primary's
// writes since (more than were lost) raised the sequence above its mark.
//
// What it cannot see: a loss no process had seen acknowledged (a process
// learns the sequence from its own calls), a loss on a queue no process
// calls again, a process that started after the loss, and, when the queue's
// record survived in part (a failover to a lagging replica), a loss that
// writes made on the new primary before its first minting call (a claim)
// outnumber; nor a tenure that got the previous one's epoch again (see
// internal/epoch: without Sentinel, when the record of it was lost).
// What it counts: LostWrites and LostEnqueues are lower bounds (the detector
// only knows what it saw).

// Rewind is one detected loss of acknowledged ledger writes on a queue.
type Rewind struct {
	// Queue is the queue whose ledger went back.
	Queue string `json:"queue"`
	// ReplicationID is the replication id of the primary the loss was
	// found on ("unknown" when the Redis user may not run INFO).
	ReplicationID string `json:"replication_id"`
	// Known is the highest write sequence a detector saw acknowledged
	// before; Found is the sequence it found the ledger at.
	Known int64 `json:"known"`
	Found int64 `json:"found"`
	// LostEnqueues is at least how many acknowledged enqueues (by any
	// client) the ledger lost: the detector's view of the queue's enqueued
	// counter minus the one found.
	LostEnqueues int64 `json:"lost_enqueues"`
	// LostRecorded counts the enqueues a client recorded (Config.Recent)
	// that were acknowledged after the sequence found: those are certainly
	// lost (others may be too).
	LostRecorded int64 `json:"lost_recorded"`
	// Resubmitted counts the jobs clients re-created from their records.
	Resubmitted int64 `json:"resubmitted"`
	// Detections counts the processes (and calls) that detected the loss;
	// DetectedBy names the first.
	Detections int64  `json:"detections"`
	DetectedBy string `json:"detected_by"`
	// FirstAt and LastAt are the first and the latest detection, by
	// Redis's clock.
	FirstAt time.Time `json:"first_at"`
	LastAt  time.Time `json:"last_at"`
}

// LostWrites is at least how many acknowledged script calls of the queue
// the ledger lost.
func (r Rewind) LostWrites() int64 { return max(0, r.Known-r.Found) }

// seqHistField is the stats field holding the write sequence's history.
const seqHistField = "hist"

// seqTenureField is the stats field holding where the primary tenure began
// (see tenure).
const seqTenureField = "tenure"

// seqMark is what a Ledger saw of one queue's write sequence: its highest
// values, the history they belong to and the epoch of the primary tenure
// of the latest reply.
type seqMark struct {
	seq, enqueued int64
	hist          string
	epoch         string
}

// tenure is where the current primary tenure began in a queue's write
// sequence: the stats field "tenure", which replies carry after the
// history and a '/' (see seq_bump in prelude.lua), its epoch ("" when none is recorded), and the sequence and
// enqueued counter the queue had when it began.
type tenure struct {
	epoch         string
	seq, enqueued int64
}

// splitHist splits a replied history into the sequence's history and the
// tenure after it.
func splitHist(h string) (string, tenure) {
	base, rest, ok := strings.Cut(h, "/")
	if !ok {
		return h, tenure{}
	}
	f := strings.Split(rest, ":")
	if len(f) != 3 {
		return base, tenure{}
	}
	seq, err1 := strconv.ParseInt(f[1], 10, 64)
	enq, err2 := strconv.ParseInt(f[2], 10, 64)
	if f[0] == "" || err1 != nil || err2 != nil {
		return base, tenure{}
	}
	return base, tenure{epoch: f[0], seq: seq, enqueued: enq}
}

// seqSeen is the mark a call was sent with: a reply is compared with what
// was known before its call went out.
type seqSeen struct {
	mark seqMark
	ok   bool   // anything was known
	gen  uint64 // detections on the queue so far
}

// seqReply is what a script reported: the sequence after it ran, whether
// it raised it (0/1), the enqueued counter after it ran, how many jobs it
// created, and the sequence's history (the stats field "hist": when the
// sequence was created; ” for one created before the field existed).
// unacknowledged marks a read that is no acknowledgement (see watch.after).
type seqReply struct {
	seq, bumped, enqueued, created int64
	hist                           string
	unacknowledged                 bool
}

// watch holds a Ledger's marks. Detections bump a queue's generation:
// replies to calls sent before a detection neither detect it again nor
// raise the mark back (they may come from the old primary).
type watch struct {
	mu    sync.Mutex
	marks map[string]seqMark
	gens  map[string]uint64
}

func (w *watch) before(q string) seqSeen {
	w.mu.Lock()
	defer w.mu.Unlock()
	m, ok := w.marks[q]
	return seqSeen{mark: m, ok: ok, gen: w.gens[q]}
}

// after compares a reply with what its call was sent with and returns the
// rewind it shows (nil: none, or one already reported). A reply of another
// history than the mark's found a ledger that lost the queue's whole record
// (a restart without persistence, a flushed database): it went back to
// nothing, however many writes the new history has had since.
//
// A reply that is not an acknowledgement (a read: CheckRewinds in durable
// mode, where a write counts as acknowledged only once replicas hold it)
// can find a rewind but does not raise the mark: the writes it shows may
// be on the primary alone, and a failover that loses them loses nothing
// anyone was told was done.
func (w *watch) after(q string, s seqSeen, r seqReply) *Rewind {
	foundSeq, foundEnq := r.seq-r.bumped, r.enqueued-r.created
	hist, ten := splitHist(r.hist)
	// Another history matters only when the mark knew writes of its own:
	// a queue first read before any write gets its history with its first.
	newHist := s.ok && hist != s.mark.hist && (s.mark.seq > 0 || s.mark.enqueued > 0)
	switch {
	case newHist:
		foundSeq, foundEnq = 0, 0
	case s.ok && ten.epoch != "" && ten.epoch != s.mark.epoch && ten.seq < s.mark.seq:
		// A primary tenure began since the mark's reply, below what the
		// mark saw: the writes between are lost, even when the new
		// primary's writes since raised the sequence above the mark.
		foundSeq, foundEnq = min(foundSeq, ten.seq), min(foundEnq, ten.enqueued)
	}
	rewound := s.ok && (foundSeq < s.mark.seq || foundEnq < s.mark.enqueued || newHist)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.marks == nil {
		w.marks, w.gens = map[string]seqMark{}, map[string]uint64{}
	}
	cur := seqMark{seq: r.seq, enqueued: r.enqueued, hist: hist, epoch: ten.epoch}
	if w.gens[q] != s.gen {
		// A rewind was reported since this call was sent: its reply may be
		// the old primary's and says nothing new.
		return nil
	}
	if !rewound {
		if r.unacknowledged {
			return nil
		}
		m, had := w.marks[q]
		next := seqMark{seq: max(m.seq, cur.seq), enqueued: max(m.enqueued, cur.enqueued), hist: m.hist, epoch: m.epoch}
		if !had || cur.seq >= m.seq {
			// The history and tenure are the latest write's: a reply that
			// comes back after a later one (pipelines in flight at once)
			// may predate the tenure the later one saw begin.
			next.hist, next.epoch = cur.hist, cur.epoch
		}
		w.marks[q] = next
		return nil
	}
	w.gens[q]++
	w.marks[q] = cur
	return &Rewind{Queue: q, Known: s.mark.seq, Found: foundSeq, LostEnqueues: max(0, s.mark.enqueued-foundEnq)}
}

// observe runs the check for one reply of queue q and reports a rewind.
func (l *Ledger) observe(ctx context.Context, q string, s seqSeen, r seqReply) {
	rw := l.watch.after(q, s, r)
	if rw == nil {
		return
	}
	if l.recent != nil {
		rw.LostRecorded = l.recent.lostAfter(q, rw.Found)
		l.recent.rewound(q)
	}
	attrs := []any{"queue", q, "known_write", rw.Known, "found_write", rw.Found,
		"lost_writes_at_least", rw.LostWrites(), "lost_enqueues_at_least", rw.LostEnqueues}
	if l.recent != nil {
		attrs = append(attrs, "recorded_enqueues_lost", rw.LostRecorded)
	}
	l.cfg.Logger.Error("the ledger lost acknowledged writes: Redis came back with older data "+
		"(a failover to a lagging replica, a restart from an older snapshot or without persistence, a flushed database)", attrs...)
	// Recorded for every reader (the dashboard's banner); the call that
	// found the loss has already returned its own result.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	// The queue registry may be among what was lost: readers find the
	// record through it.
	rec, err := l.runRewind(rctx, q, "detected", rw.Known, rw.Found, rw.LostEnqueues, rw.LostRecorded, l.cfg.Name)
	if err == nil {
		rw.ReplicationID, rw.FirstAt = rec.ReplicationID, rec.FirstAt
		err = l.RegisterQueues(rctx, q)
	}
	if err != nil {
		l.cfg.Logger.Warn("could not record the ledger rewind in Redis", "queue", q, "error", err)
	}
	if l.cfg.OnRewind != nil {
		l.cfg.OnRewind(*rw)
	}
}

// runRewind runs rewind.lua on queue q's record and returns what names
// the record: its replication id and first detection.
func (l *Ledger) runRewind(ctx context.Context, q string, args ...any) (Rewind, error) {
	keys := append(l.keys(q), l.rewindsKey(q))
	v, err := rewindScript.Run(ctx, l.rdb, keys, append([]any{l.prefix(q)}, args...)...).Result()
	r := newReply("record rewind", v, err)
	if err := r.need(3); err != nil {
		return Rewind{}, wrap("record rewind", err)
	}
	rec := Rewind{Queue: q, ReplicationID: r.str(1), FirstAt: time.UnixMilli(r.int(2))}
	return rec, wrap("record rewind", r.err)
}

// LossID names the loss rewind r (as OnRewind reports it) is of, the same
// for every detection of it by any Ledger of the namespace: the queue
// (its partitions, lost at once, are one loss of it) and the replication
// id of the primary it was found on, which records merge detections by.
// It is "" when r was not recorded or its record cannot tell losses apart
// (a replication id "unknown": every loss of the queue shares it).
func (l *Ledger) LossID(r Rewind) string {
	if r.ReplicationID == "" || r.ReplicationID == "unknown" {
		return ""
	}
	return l.cfg.Namespace + "\x00" + Logical(r.Queue) + "\x00" + r.ReplicationID
}

// CheckRewinds reads the write sequence of every queue this ledger has
// seen and reports a rewind it shows (as a call would have), so a process
// that stopped calling a queue still learns of a loss there. It returns how
// many queues it checked. In durable mode what it reads does not raise
// the marks: it may include writes no replica acknowledged yet.
func (l *Ledger) CheckRewinds(ctx context.Context) (int, error) {
	l.watch.mu.Lock()
	qs := make([]string, 0, len(l.watch.marks))
	for q := range l.watch.marks {
		qs = append(qs, q)
	}
	l.watch.mu.Unlock()
	sort.Strings(qs)
	for _, q := range qs {
		s := l.watch.before(q)
		v, err := seqScript.Run(ctx, l.rdb, []string{l.prefix(q) + "stats"}).Result()
		r := newReply("read sequence", v, err)
		if err := r.need(3); err != nil {
			return 0, wrap("check rewinds", err)
		}
		hist, _ := r.at(2).(string)
		l.observe(ctx, q, s, seqReply{seq: int64Of(r.at(0)), enqueued: int64Of(r.at(1)), hist: hist,
			unacknowledged: l.Durable()})
	}
	return len(qs), nil
}

// seqScript reads a queue's write sequence, enqueued counter and history
// (with its tenure, as seq_reply in prelude.lua returns them). A script,
// not HMGET: a client that routes reads to replicas (ReadOnly,
// RouteRandomly) still reads the primary, so a lagging replica never looks
// like a rewind.
// A read, which go-redis may send again (not luafunc's: see ARCHITECTURE.md, Scripts).
var seqScript = redis.NewScript(`local v = redis.call('HMGET', KEYS[1], 'seq', 'enqueued', 'hist', 'tenure')
if v[4] then v[3] = (v[3] or '') .. '/' .. v[4] end
return {v[1], v[2], v[3]}`)

func int64Of(v any) int64 {
	s, _ := v.(string)
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

// Rewinds returns the rewinds recorded for queue q, latest detection first.
func (l *Ledger) Rewinds(ctx context.Context, q string) ([]Rewind, error) {
	h, err := l.rdb.HGetAll(ctx, l.rewindsKey(q)).Result()
	if err != nil {
		return nil, wrap("rewinds", err)
	}
	return rewindsFrom(q, h), nil
}

// RewindsOf returns the rewinds of each of queues qs (as Rewinds returns
// them), in one pipelined round trip whatever their number.
func (l *Ledger) RewindsOf(ctx context.Context, qs []string) ([][]Rewind, error) {
	out := make([][]Rewind, len(qs))
	if len(qs) == 0 {
		return out, nil
	}
	pipe := l.rdb.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(qs))
	for i, q := range qs {
		cmds[i] = pipe.HGetAll(ctx, l.rewindsKey(q))
	}
	_, _ = pipe.Exec(ctx) // read per command below
	for i, c := range cmds {
		h, err := c.Result()
		if err != nil {
			return nil, wrap("rewinds", err)
		}
		out[i] = rewindsFrom(qs[i], h)
	}
	return out, nil
}

// rewindsFrom decodes queue q's rewinds hash, newest first.
func rewindsFrom(q string, h map[string]string) []Rewind {
	out := make([]Rewind, 0, len(h))
	for _, v := range h {
		var raw struct {
			ReplicationID string `json:"replication_id"`
			FirstAt       int64  `json:"first_at"`
			LastAt        int64  `json:"last_at"`
			Known         int64  `json:"known"`
			Found         int64  `json:"found"`
			LostEnqueues  int64  `json:"lost_enqueues"`
			LostRecorded  int64  `json:"lost_recorded"`
			Detections    int64  `json:"detections"`
			DetectedBy    string `json:"detected_by"`
			Resubmitted   int64  `json:"resubmitted"`
		}
		if json.Unmarshal([]byte(v), &raw) != nil {
			continue
		}
		out = append(out, Rewind{Queue: q, ReplicationID: raw.ReplicationID, Known: raw.Known, Found: max(0, raw.Found),
			LostEnqueues: raw.LostEnqueues, LostRecorded: raw.LostRecorded, Resubmitted: raw.Resubmitted,
			Detections: raw.Detections, DetectedBy: raw.DetectedBy,
			FirstAt: time.UnixMilli(raw.FirstAt), LastAt: time.UnixMilli(raw.LastAt)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].LastAt.After(out[j].LastAt) })
	return out
}

// DefaultRecent is how many acknowledged enqueues a client records for
// re-submission after a rewind when its configuration says nothing.
const DefaultRecent = 10000

// recentJob is one acknowledged enqueue: a job, or a workflow.
type recentJob struct {
	job *NewJob
	wf  *NewWorkflow // a workflow (job is nil), recorded under its home queue
	seq int64        // the write sequence after the call that created it
	at  time.Time    // when its acknowledgement arrived (local clock; a retry's: when its first unknown try ended)
}

// queue is the queue whose rewind loses the recorded enqueue: a workflow's
// home queue, which holds its record.
func (j recentJob) queue() string {
	if j.wf != nil {
		return j.wf.Home
	}
	return j.job.Queue
}

// jobs is how many jobs of its queue the recorded enqueue created.
func (j recentJob) jobs() int64 {
	if j.wf == nil {
		return 1
	}
	var n int64
	for _, s := range j.wf.Steps {
		if s.Job.Queue == j.wf.Home {
			n++
		}
	}
	return n
}

// recent is a bounded record of a client's acknowledged enqueues, oldest
// overwritten first, and the queues found rewound since their last
// re-submission.
type recent struct {
	mu      sync.Mutex
	ring    []recentJob
	next    int
	full    bool
	pending map[string]time.Time // queue -> when its latest rewind was detected
	handled map[string]bool      // rewind records (queue, replication id, first detection) acted on
	// unsure holds the operations whose enqueue's outcome was unknown
	// (ErrEnqueueUnknown), with when the first such try ended: a retry
	// that finds the job or workflow is its acknowledgement, recorded like
	// a creation acknowledged then (its delay counts from the try that
	// wrote it, not from the retry). Bounded like the ring, oldest dropped
	// first (unsureOrder).
	unsure      map[string]time.Time
	unsureOrder []string
}

func newRecent(n int) *recent {
	if n <= 0 {
		return nil
	}
	return &recent{ring: make([]recentJob, n), pending: map[string]time.Time{}, handled: map[string]bool{},
		unsure: map[string]time.Time{}}
}

// opKey names an operation for unsure: a job's by its queue, a workflow's
// by its home queue.
func opKey(kind, q, op string) string { return kind + "\x00" + q + "\x00" + op }

// unknown notes that the enqueue of operation key k ended unknown now,
// unless an earlier try did.
func (r *recent) unknown(k string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.unsure[k]; ok {
		return
	}
	for len(r.unsureOrder) >= len(r.ring) {
		delete(r.unsure, r.unsureOrder[0])
		r.unsureOrder = r.unsureOrder[1:]
	}
	r.unsure[k] = time.Now()
	r.unsureOrder = append(r.unsureOrder, k)
}

// settled reports whether the enqueue of operation key k had ended
// unknown, and when its first such try did, and forgets it.
func (r *recent) settled(k string) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.unsure[k]
	if !ok {
		return time.Time{}, false
	}
	delete(r.unsure, k)
	r.unsureOrder = slices.DeleteFunc(r.unsureOrder, func(o string) bool { return o == k })
	return at, true
}

// queues returns the queues of the recorded jobs.
func (r *recent) queues() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := map[string]bool{}
	var qs []string
	r.each(func(j recentJob) {
		if q := j.queue(); !seen[q] {
			seen[q] = true
			qs = append(qs, q)
		}
	})
	sort.Strings(qs)
	return qs
}

// learn marks q rewound for a record another process made, once per
// record.
func (r *recent) learn(rw Rewind) {
	key := rw.Queue + "\x00" + rw.ReplicationID + "\x00" + strconv.FormatInt(rw.FirstAt.UnixMilli(), 10)
	r.mu.Lock()
	seen := r.handled[key]
	r.handled[key] = true
	r.mu.Unlock()
	if !seen {
		// Only when this ledger has no detection of its own pending (the
		// record may be of that detection).
		r.mu.Lock()
		if _, ok := r.pending[rw.Queue]; !ok {
			r.pending[rw.Queue] = time.Now()
		}
		r.mu.Unlock()
	}
}

func (r *recent) add(j *NewJob, seq int64, at time.Time) {
	r.put(recentJob{job: j, seq: seq, at: at})
}

func (r *recent) addWorkflow(w *NewWorkflow, seq int64, at time.Time) {
	r.put(recentJob{wf: w, seq: seq, at: at})
}

func (r *recent) put(j recentJob) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ring[r.next] = j
	r.next++
	if r.next == len(r.ring) {
		r.next, r.full = 0, true
	}
}

// each calls f for every recorded job, oldest first, under the lock.
func (r *recent) each(f func(recentJob)) {
	start, n := 0, r.next
	if r.full {
		start, n = r.next, len(r.ring)
	}
	for i := range n {
		f(r.ring[(start+i)%len(r.ring)])
	}
}

// lostAfter counts the recorded jobs of q acknowledged after write
// sequence found: the rewound ledger cannot hold them.
func (r *recent) lostAfter(q string, found int64) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var n int64
	r.each(func(j recentJob) {
		if j.queue() == q && j.seq > found {
			n += j.jobs()
		}
	})
	return n
}

// rewound marks q rewound now: Resubmit sends its jobs acknowledged before
// the latest detection, so a second rewind before the re-submission (or
// during one) also brings back the jobs acknowledged between the two.
func (r *recent) rewound(q string) { r.rewoundAt(q, time.Now()) }

// rewoundAt marks q rewound as detected at t, unless a later detection is
// marked already.
func (r *recent) rewoundAt(q string, t time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if det, ok := r.pending[q]; !ok || t.After(det) {
		r.pending[q] = t
	}
}

// Resubmitted is what Resubmit did for one queue.
type Resubmitted struct {
	Queue string
	// Checked counts the recorded enqueues sent again; Restored those the
	// ledger did not have, created again (the others were left as they
	// are). A workflow's steps count one each.
	Checked, Restored int
}

// Resubmit re-submits, for every queue found rewound since the last call,
// each recorded enqueue acknowledged before the rewind was detected (the
// latest, when several were) and less than half the retention period ago
// (this ledger's, or a shorter one a pool applied to the queue: see
// retentionOf). A queue is found rewound by
// this ledger's own calls (CheckRewinds runs first) or by a rewind record
// of its queue this ledger has not acted on (another process detected the
// loss: this one may have seen too little to tell, and every recorded job
// of the queue is sent). The
// enqueue script re-creates a job only when neither its record nor its
// operation id exists, so a job the ledger kept (whatever it became), or
// whose operation was enqueued again meanwhile, is left as it is: each lost
// job comes back exactly once. A re-created job is pending, due when it
// was due (its remaining delay), with its attempts starting over. A
// recorded workflow is written again, whole, when its home queue lost its
// record (see resubmitWorkflow). Without a record (Config.Recent) it does
// nothing.
func (l *Ledger) Resubmit(ctx context.Context) ([]Resubmitted, error) {
	if l.recent == nil {
		return nil, nil
	}
	if _, err := l.CheckRewinds(ctx); err != nil {
		return nil, err
	}
	r := l.recent
	cuts := map[string]time.Time{} // per queue: the oldest enqueue sent
	for _, q := range r.queues() {
		rs, err := l.Rewinds(ctx, q)
		if err != nil {
			return nil, err
		}
		for _, rw := range rs {
			r.learn(rw)
		}
		keep, err := l.retentionOf(ctx, q)
		if err != nil {
			return nil, err
		}
		cuts[q] = time.Now().Add(-keep / 2)
	}
	r.mu.Lock()
	due := r.pending
	r.pending = map[string]time.Time{}
	byQueue := map[string][]*NewJob{}
	wfs := map[string][]*NewWorkflow{}
	r.each(func(j recentJob) {
		det, ok := due[j.queue()]
		cut, known := cuts[j.queue()]
		if !known {
			cut = time.Now().Add(-l.cfg.Retention / 2)
		}
		if !ok || !j.at.Before(det) || !j.at.After(cut) {
			return
		}
		if j.wf != nil {
			w := *j.wf
			w.Steps = slices.Clone(w.Steps)
			for i := range w.Steps {
				sj := *w.Steps[i].Job
				if sj.Delay != 0 {
					sj.Delay -= time.Since(j.at) // not before when it was
				}
				w.Steps[i].Job = &sj
			}
			wfs[w.Home] = append(wfs[w.Home], &w)
			return
		}
		nj := *j.job
		nj.Delay -= time.Since(j.at) // due when it was due (a job due at once too)
		if nj.Unique != nil {
			u := *nj.Unique
			u.Age = time.Since(j.at) // its key in its enqueue's period
			nj.Unique = &u
		}
		byQueue[nj.Queue] = append(byQueue[nj.Queue], &nj)
	})
	r.mu.Unlock()
	qs := make([]string, 0, len(due))
	for q := range due {
		qs = append(qs, q)
	}
	sort.Strings(qs)
	var out []Resubmitted
	var firstErr error
	for _, q := range qs {
		js := byQueue[q]
		res := Resubmitted{Queue: q, Checked: len(js)}
		if len(js) > 0 {
			ins, err := l.insert(ctx, js, "resubmit")
			for _, in := range ins {
				if in != nil && !in.Deduplicated {
					res.Restored++
				}
			}
			if err != nil {
				// Not every job was sent: the queue stays due for another call.
				r.rewoundAt(q, due[q])
				if firstErr == nil {
					firstErr = err
				}
			}
		}
		for _, w := range wfs[q] {
			res.Checked += len(w.Steps)
			restored, err := l.resubmitWorkflow(ctx, w)
			res.Restored += restored
			if err != nil {
				r.rewoundAt(q, due[q])
				if firstErr == nil {
					firstErr = err
				}
			}
		}
		if res.Restored > 0 {
			if _, err := l.runRewind(ctx, q, "resubmitted", res.Restored, l.cfg.Name); err != nil && firstErr == nil {
				firstErr = err
			}
		}
		l.cfg.Logger.Log(ctx, levelFor(res.Restored), "recorded enqueues re-submitted after a ledger rewind",
			"queue", q, "sent", res.Checked, "restored", res.Restored)
		out = append(out, res)
	}
	return out, firstErr
}

// retentionField is the stats field holding the shortest retention (ms)
// applied to the queue's finished jobs (finish in prelude.lua).
const retentionField = "retention"

// retentionOf is how long queue q's finished jobs are kept: this ledger's
// retention, or a shorter one a pool applied there.
func (l *Ledger) retentionOf(ctx context.Context, q string) (time.Duration, error) {
	v, err := l.rdb.HGet(ctx, l.prefix(q)+"stats", retentionField).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, wrap("read retention", err)
	}
	if ms, perr := strconv.ParseInt(v, 10, 64); perr == nil && ms > 0 { // none, or not a number: this ledger's
		return min(l.cfg.Retention, time.Duration(ms)*time.Millisecond), nil
	}
	return l.cfg.Retention, nil
}

// resubmitWorkflow writes recorded workflow w again when its home queue
// lost its record, and returns how many steps it wrote. A workflow the
// ledger kept is left alone (its steps are not written again: one that
// finished would come back waiting), as is one whose operation id, or a
// step's, was enqueued again since. One the maintenance leader abandoned
// meanwhile (the rewind lost its commit, not its steps of other queues,
// and the grace passed) was acknowledged all the same: it is committed
// now, its steps that abandon cancelled waiting again.
func (l *Ledger) resubmitWorkflow(ctx context.Context, w *NewWorkflow) (int, error) {
	rec, err := l.rdb.HMGet(ctx, l.workflowKey(w.Home, w.ID), "def", "cancel").Result()
	if err != nil {
		return 0, wrap("resubmit workflow "+w.ID, err)
	}
	revive := rec[1] == UncommittedActor
	if rec[0] != nil && !revive {
		return 0, nil
	}
	_, dedup, err := l.enqueueWorkflow(ctx, w, false, revive)
	if err == nil && dedup && !revive {
		// The maintenance leader abandoned it between the read above and
		// the commit, which found its record: revived now.
		cancel, rerr := l.rdb.HGet(ctx, l.workflowKey(w.Home, w.ID), "cancel").Result()
		if rerr != nil && !errors.Is(rerr, redis.Nil) {
			return 0, wrap("resubmit workflow "+w.ID, rerr)
		}
		if cancel == UncommittedActor {
			_, dedup, err = l.enqueueWorkflow(ctx, w, false, true)
		}
	}
	switch {
	case errors.Is(err, ErrInvalid):
		// a step's operation id names another job: it was enqueued again
		l.cfg.Logger.Warn("a workflow lost in a ledger rewind was not re-submitted: an operation of its steps was enqueued again since",
			"workflow", w.ID, "queue", w.Home, "error", err)
		return 0, nil
	case err != nil || dedup:
		return 0, err
	}
	return len(w.Steps), nil
}

func levelFor(restored int) slog.Level {
	if restored > 0 {
		return slog.LevelWarn
	}
	return slog.LevelInfo
}
