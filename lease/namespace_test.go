package lease_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/lease"
)

// A Manager's namespace prefixes its keys as the ledger's does, so it
// follows the ledger's rule (jobs.ValidateNamespace): a brace would move
// the keys' hash tag ("fq:{q}" writes into queue q's slot and key space of
// namespace fq), a newline, a glob character or a megabyte would reach
// every key. Every call refuses such a namespace before anything is sent.
func TestNamespaceFollowsTheLedgersRule(t *testing.T) {
	ctx := context.Background()
	c := redistest.Start(t, redistest.Options{}).Client()
	for _, ns := range []string{"fq:{q}", "a{b", "a}b", "a\nb", "a*", "a?", "a[b]", "a\x00b", "a b", "\xff",
		strings.Repeat("n", 65)} {
		m := lease.NewManager(c, lease.Config{Namespace: ns})
		if _, err := m.Acquire(ctx, "r", "w", time.Minute); !errors.Is(err, lease.ErrInvalid) || !strings.Contains(err.Error(), "namespace") {
			t.Errorf("namespace %q: acquire: want ErrInvalid naming the namespace, got %v", ns, err)
		}
	}
	if n, err := redistest.CountKeys(ctx, c); err != nil || n != 0 {
		t.Fatalf("refused namespaces wrote %d keys (%v)", n, err)
	}
	m := lease.NewManager(c, lease.Config{Namespace: "a.b_c:d-" + strings.Repeat("n", 56)})
	if _, err := m.Acquire(ctx, "r", "w", time.Minute); err != nil {
		t.Fatalf("a valid 64-byte namespace: %v", err)
	}
}
