package jobs

import (
	"testing"

	"github.com/fencedq/fencedq/internal/ledger"
)

// TestVocabularyMatchesTheEngine: the public constants are written out for
// readable docs; they must equal the engine's.
func TestVocabularyMatchesTheEngine(t *testing.T) {
	for _, c := range []struct{ got, want any }{
		{DefaultNamespace, ledger.DefaultNamespace}, {DefaultRetention, ledger.DefaultRetention}, {SeriesStep, ledger.SeriesStep},
		{MaxNamespaceLen, ledger.MaxNamespaceLen}, {MaxQueueLen, ledger.MaxQueueLen}, {MaxKindLen, ledger.MaxKindLen},
		{MaxResourceLen, ledger.MaxResourceLen}, {MaxOperationIDLen, ledger.MaxOperationIDLen}, {MaxScheduleIDLen, ledger.MaxScheduleIDLen},
		{PeriodicOperationPrefix, ledger.PeriodicOperationPrefix}, {ByJobIDPrefix, ledger.ByJobIDPrefix}, {ByOperationIDPrefix, ledger.ByOperationIDPrefix},
	} {
		if c.got != c.want {
			t.Errorf("%v != engine's %v", c.got, c.want)
		}
	}
	states := []State{Waiting, Pending, Running, Uncertain, Review, Succeeded, Dead, Cancelled}
	for i, s := range ledger.States {
		if states[i] != s {
			t.Errorf("state %d: %s != engine's %s", i, states[i], s)
		}
	}
	for i, d := range []Decision{DecideSucceeded, DecideRerun, DecideDead, DecideReview, DecideLater} {
		if want := []Decision{ledger.DecideSucceeded, ledger.DecideRerun, ledger.DecideDead, ledger.DecideReview, ledger.DecideLater}[i]; d != want {
			t.Errorf("decision %s != engine's %s", d, want)
		}
	}
}
