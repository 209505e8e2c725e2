package ledger_test

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/internal/redistest"
)

// TestReadmeFunctionListFindsTheLibrary: the runbook's command for finding
// the ledger's function library (to delete an old one after an upgrade)
// lists it on a server the ledger loaded it on.
func TestReadmeFunctionListFindsTheLibrary(t *testing.T) {
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("`(FUNCTION LIST LIBRARYNAME [^`]+)`").FindSubmatch(raw)
	if m == nil {
		t.Fatal("README.md names no FUNCTION LIST LIBRARYNAME command")
	}
	rdb := redistest.Start(t, redistest.Options{}).Client()
	f := newFixture(t, rdb)
	f.enqueue() // loads the library
	var args []any
	for _, a := range strings.Fields(string(m[1])) {
		args = append(args, strings.Trim(a, `'"`))
	}
	reply, err := rdb.Do(f.ctx, args...).Result()
	if err != nil {
		t.Fatalf("%s: %v", m[1], err)
	}
	if !strings.Contains(fmt.Sprint(reply), "fencedq_") {
		t.Errorf("%s lists %v, not the ledger's library", m[1], reply)
	}
}
