package dashboard_test

import (
	"testing"

	"github.com/fencedq/fencedq/internal/redistest"
)

// TestExampleLeavesNoKeys: the example removes every key it wrote to the
// Redis at REDIS_ADDR, the namespace's time record included.
func TestExampleLeavesNoKeys(t *testing.T) { redistest.ExampleLeavesNoKeys(t, Example) }
