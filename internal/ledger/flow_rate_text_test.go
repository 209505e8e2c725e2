package ledger_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
)

// TestRateWaitTextAsDocumented: a job its rate deferred says what it
// waits for as README.md shows it, its whole key quoted and the key set
// apart from the rest by a comma (as a limit's wait is), so a key of the
// README's form (provider:api) reads as one: the README showed
// "rate provider: next start at …", which the code never wrote.
func TestRateWaitTextAsDocumented(t *testing.T) {
	rdb := redistest.Start(t, redistest.Options{}).Client()
	ctx := context.Background()
	l := ledger.New(rdb, ledger.Config{Namespace: "rtext"})
	const q = "q"
	job := func(id string) *ledger.NewJob {
		return &ledger.NewJob{ID: id, Kind: "k", Queue: q, Payload: []byte(`{}`), MaxRetries: 1,
			Flow: &ledger.Flow{RateKey: "provider:api", RateMax: 1, RatePer: time.Hour}}
	}
	if _, err := l.Insert(ctx, []*ledger.NewJob{job("a"), job("b")}); err != nil {
		t.Fatal(err)
	}
	r, err := l.Claim(ctx, q, "p", time.Minute, 10)
	if err != nil || len(r.Jobs) != 1 || len(r.Dropped) != 1 {
		t.Fatalf("claim %+v (%v), want one started and one deferred", r, err)
	}
	got, err := l.Get(ctx, q, r.Dropped[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	const want = "rate provider:api, next start at "
	if !strings.HasPrefix(got.WaitingFor, want) {
		t.Errorf("a deferred job waits for %q, want it to start with %q", got.WaitingFor, want)
	}
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if text := strings.Join(strings.Fields(string(raw)), " "); !strings.Contains(text, "`"+want+"…`") {
		t.Errorf("README.md does not show a rate's wait as %q", want+"…")
	}
}
