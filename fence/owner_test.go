package fence_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/lease"
)

// Validate refuses exactly the owners package lease refuses to issue a
// lease to: a fence whose owner holds a line break can come from no lease,
// so stores refuse it before writing it into a mark. Owners a lease
// accepts (other control characters included) stay valid.
func TestValidateOwnerAsLeaseDoes(t *testing.T) {
	ctx := t.Context()
	c := redistest.Start(t, redistest.Options{}).Client()
	m := lease.NewManager(c, lease.Config{Namespace: redistest.Namespace(t)})
	for _, owner := range []string{
		"w", "w\n", "\nw", "a\r\nb", "w\r", "a\tb", "a\x00b", "a\x1bb", "a\x7fb", "é",
		strings.Repeat("o", lease.MaxOwnerLen), strings.Repeat("o", lease.MaxOwnerLen+1), "",
	} {
		l, err := m.Acquire(ctx, "r", owner, time.Minute)
		leaseRefuses := errors.Is(err, lease.ErrInvalid)
		if err != nil && !leaseRefuses {
			t.Fatalf("owner %q: Acquire: %v", owner, err)
		}
		if err == nil {
			if err := m.Release(ctx, l); err != nil {
				t.Fatal(err)
			}
		}
		verr := fence.Fence{Resource: "r", Token: 1, Owner: owner, OperationID: "op"}.Validate()
		if fenceRefuses := errors.Is(verr, fence.ErrInvalid); fenceRefuses != leaseRefuses || (verr != nil && !fenceRefuses) {
			t.Errorf("owner %q: lease refuses %v (%v), Validate %v", owner, leaseRefuses, err, verr)
		}
	}
}
