package httpfence_test

import (
	"strings"
	"testing"

	"github.com/fencedq/fencedq/fence/httpfence"
)

// TestNilGuardPanicsAtOnce: Middleware given a nil Guard panics when it is
// built, naming the mistake, not on the first fenced request.
func TestNilGuardPanicsAtOnce(t *testing.T) {
	defer func() {
		if r, ok := recover().(string); !ok || !strings.Contains(r, "nil Guard") {
			t.Fatalf("recovered %v, want a panic naming the nil Guard", r)
		}
	}()
	httpfence.Middleware(nil, httpfence.Options{})
}
