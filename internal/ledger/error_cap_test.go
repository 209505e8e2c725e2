package ledger_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
)

// A handler's error of a megabyte (a client error quoting a whole
// response body) is kept cut to MaxErrorLen, at a character boundary, in
// the job's record and its history, saying how much was cut.
func TestLongErrorTextIsCut(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t, redistest.Options{}).Client()
	l := ledger.New(rdb, ledger.Config{Namespace: redistest.Namespace(t)})
	const q = "default"
	j := newJob(q, "")
	j.MaxRetries = 3
	if _, err := l.Insert(ctx, []*ledger.NewJob{j}); err != nil {
		t.Fatal(err)
	}
	r, err := l.Claim(ctx, q, "p", time.Minute, 1)
	if err != nil || len(r.Jobs) != 1 {
		t.Fatalf("claim: %+v, %v", r, err)
	}
	long := "upstream said: " + strings.Repeat("é", 1<<19) // 1 MiB, two bytes a character
	out, err := l.Complete(ctx, q, []ledger.Completion{{ID: j.ID, Token: r.Jobs[0].Token,
		Outcome: ledger.Outcome{To: ledger.Pending, Error: long, RetryIn: time.Hour}}})
	if err != nil || !out[0].Applied {
		t.Fatalf("complete: %+v, %v", out, err)
	}
	rec, err := l.Get(ctx, q, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	check := func(where, got string) {
		t.Helper()
		if len(got) > ledger.MaxErrorLen+64 || !strings.HasPrefix(got, "upstream said: éé") ||
			!strings.HasSuffix(got, " bytes cut)") || !strings.Contains(got, "é…") {
			t.Fatalf("%s error: %d bytes, ends %q; want at most %d bytes, cut between characters, saying so",
				where, len(got), got[max(0, len(got)-40):], ledger.MaxErrorLen+64)
		}
	}
	check("record", rec.Error)
	hist, err := l.History(ctx, q, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range hist {
		if e.Error != "" {
			check("history", e.Error)
			found = true
		}
	}
	if !found {
		t.Fatalf("no history entry holds the error: %+v", hist)
	}
}
