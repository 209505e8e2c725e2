package jobs_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencedq/fencedq/fence/redisfence"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
)

// TestNamespaceNamingAnotherNamespacesKeysIsRefused: namespace ns keeps
// keys named after user data under ns:pool:, ns:lease:, ns:fence: and
// ns:data: (a worker id, a resource, an operation id), so the keys of a
// namespace "ns:fence" would be some of ns's: queue acct's operation key
// ns:fence:{acct}:op:order:7 is the effect record redisfence (namespace
// ns) writes for operation order:7 on resource acct, and queue acct's
// clock on Redis Cluster, ns:lease:{acct}:clock, is the lease clock of
// resource acct. A namespace with one of those parts after its first is
// refused by every entry point (the client, a lease manager, a redisfence
// store), before anything is written; other names keep working.
func TestNamespaceNamingAnotherNamespacesKeysIsRefused(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t, redistest.Options{}).Client()
	ns := redistest.Namespace(t)
	for _, bad := range []string{ns + ":pool", ns + ":lease", ns + ":fence", ns + ":data",
		ns + ":fence:opindex", ns + ":pool:x", "a:data:b"} {
		if err := jobs.ValidateNamespace(bad); !errors.Is(err, jobs.ErrInvalid) {
			t.Errorf("ValidateNamespace(%q) = %v, want ErrInvalid", bad, err)
		}
		c := jobs.NewClient(rdb, jobs.Config{Namespace: bad})
		if _, err := c.Enqueue(ctx, noteArgs{}, jobs.Queue("acct"), jobs.OperationID("order:7"), jobs.Unchecked()); !errors.Is(err, jobs.ErrInvalid) {
			t.Errorf("enqueue in namespace %q: %v, want ErrInvalid", bad, err)
		}
		m := lease.NewManager(rdb, lease.Config{Namespace: bad})
		if _, err := m.Acquire(ctx, "acct", "w", time.Minute); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("lease acquire in namespace %q: %v, want ErrInvalid", bad, err)
		}
		if _, err := redisfence.New(rdb, redisfence.Config{Namespace: bad}); !errors.Is(err, redisfence.ErrConfig) {
			t.Errorf("redisfence in namespace %q: %v, want ErrConfig", bad, err)
		}
	}
	if n, err := redistest.CountKeys(ctx, rdb); err != nil || n != 0 {
		t.Fatalf("refused namespaces wrote %d keys (%v)", n, err)
	}
	for _, good := range []string{"pool", "data:x", "fq:pools", "fq:database", "fq:fences", "a:lease-b", "fq:Data"} {
		if err := jobs.ValidateNamespace(good); err != nil {
			t.Errorf("ValidateNamespace(%q) = %v, want nil", good, err)
		}
	}
}
