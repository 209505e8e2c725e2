package ledger

import "testing"

// TestLateReplyKeepsTheLatestTenure: replies of calls in flight at once can
// come back out of order. A late reply from before a primary tenure began
// must not make the mark forget that tenure: the next reply, of the same
// tenure and above the mark, would otherwise look like a loss hidden by
// the new primary's writes.
func TestLateReplyKeepsTheLatestTenure(t *testing.T) {
	const q = "default"
	var w watch
	if rw := w.after(q, w.before(q), seqReply{seq: 5, enqueued: 2, hist: "h"}); rw != nil {
		t.Fatalf("first reply: %+v", rw)
	}
	early, late := w.before(q), w.before(q) // two calls in flight at once
	if rw := w.after(q, early, seqReply{seq: 19, enqueued: 4, hist: "h/1:8:3"}); rw != nil {
		t.Fatalf("reply of the new tenure: %+v", rw)
	}
	if rw := w.after(q, late, seqReply{seq: 6, enqueued: 3, hist: "h"}); rw != nil {
		t.Fatalf("late reply from before the tenure: %+v", rw)
	}
	if rw := w.after(q, w.before(q), seqReply{seq: 20, enqueued: 5, hist: "h/1:8:3"}); rw != nil {
		t.Fatalf("a reply of the same tenure above the mark reported as a rewind: %+v", rw)
	}
	// A real loss is still found: the tenure began below the mark.
	if rw := w.after(q, w.before(q), seqReply{seq: 21, enqueued: 5, hist: "h/2:10:3"}); rw == nil || rw.Found != 10 {
		t.Fatalf("a new tenure below the mark: %+v, want a rewind found at 10", rw)
	}
}
