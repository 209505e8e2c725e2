package redisfence_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/fence/redisfence"
	"github.com/fencedq/fencedq/internal/redistest"
)

// A store's namespace follows the ledger's rule (jobs.ValidateNamespace),
// as the pools and lease managers sharing its Redis do: New refuses any
// other, not only one with a brace.
func TestNamespaceFollowsTheLedgersRule(t *testing.T) {
	c := redistest.Start(t, redistest.Options{}).Client()
	for _, ns := range []string{"a{b", "a}b", "a\nb", "a*", "a?", "a[b]", "a\x00b", "a b", "\xff", strings.Repeat("n", 65)} {
		if _, err := redisfence.New(c, redisfence.Config{Namespace: ns}); !errors.Is(err, redisfence.ErrConfig) {
			t.Errorf("namespace %q: want ErrConfig, got %v", ns, err)
		}
	}
	if _, err := redisfence.New(c, redisfence.Config{Namespace: "a.b_c:d-" + strings.Repeat("n", 56)}); err != nil {
		t.Fatalf("a valid 64-byte namespace: %v", err)
	}
}
