package ledger

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/internal/epoch"
	"github.com/fencedq/fencedq/internal/redistest"
)

// TestLinkTakesWhatAScriptUses: link prepends the definitions a script
// uses, directly or through another, in their order; a name mentioned only
// in a comment or a string pulls nothing in; the header comment is dropped.
func TestLinkTakesWhatAScriptUses(t *testing.T) {
	lib := `-- header: uses_c is documented here
local a = 1
local function b() return a end
-- c's comment names d, which c does not use
local c, c2 = 3, 'd'
local function d() return b() + 1 end
local function e(x)
  return x .. 'e'
end
`
	got := link(lib, "return d() .. 'c' -- e\n")
	want := "local a = 1\nlocal function b() return a end\n-- c's comment names d, which c does not use\n" +
		"local function d() return b() + 1 end\nreturn d() .. 'c' -- e\n"
	if got != want {
		t.Fatalf("linked:\n%s\nwant:\n%s", got, want)
	}
	if got := link(lib, "return c2"); !strings.HasPrefix(got, "local c, c2 = 3, 'd'\n") {
		t.Fatalf("a second name of a multi-name local: %q", got)
	}
}

// TestLinkedScriptsAreShorter: each ledger script carries less than the
// whole shared Lua; the renewal (with the claim and the completion the most
// frequent call) carries neither the minting nor the history helpers.
func TestLinkedScriptsAreShorter(t *testing.T) {
	lib := epoch.Lua + prelude
	for name, src := range map[string]string{"claim": claimSrc, "complete": completeSrc, "enqueue": enqueueSrc, "renew": renewSrc} {
		if out := link(lib, src); len(out) >= len(lib+src) {
			t.Errorf("%s: linked %d bytes of %d", name, len(out), len(lib+src))
		}
	}
	renew := link(lib, renewSrc)
	if strings.Contains(renew, "local function token_mint") || strings.Contains(renew, "local function record(") {
		t.Errorf("the renewal carries the minting or history helpers:\n%s", renew)
	}
}

// TestLibraryDefinesOnceAndSetsPerCallState: a function library defines the
// shared functions and constants once at its top level; every other shared
// local (derived from KEYS and ARGV, per-call tables) is declared there and
// set at the start of each function that uses it, EPOCH_RID from the
// function's own argument; a function sets nothing it does not use.
func TestLibraryDefinesOnceAndSetsPerCallState(t *testing.T) {
	lib := `-- header
local LIMIT, NAME = 10, 'x' -- constants
local EPOCH_RID = nil
local P = ARGV[1]
local now = redis.call('TIME')[1] .. EPOCH_RID
local seen = {}
local function mark(id) seen[id] = true return P .. id end
local function unused() return LIMIT end
`
	got := library("lib1", lib, []libScript{
		{fn: "lib1_a", rid: "ARGV[5]", src: "return mark(ARGV[2]) .. now"},
		{fn: "lib1_b", rid: "nil", src: "return LIMIT"},
	})
	want := "#!lua name=lib1\n" +
		"local KEYS, ARGV -- each function's own, set at its start\n" +
		"local BEGIN = {} -- each function's per-call settings (see beginChunks)\n" +
		"local LIMIT, NAME = 10, 'x' -- constants\n" +
		"local EPOCH_RID\nlocal P\nlocal now\nlocal seen\n" +
		"local function mark(id) seen[id] = true return P .. id end\n" +
		"local function unused() return LIMIT end\n" +
		"BEGIN[1] = function()\nEPOCH_RID = ARGV[5]\nP = ARGV[1]\nnow = redis.call('TIME')[1] .. EPOCH_RID\nseen = {}\nend\n" +
		"redis.register_function('lib1_a', function(keys, args)\nKEYS, ARGV = keys, args\nBEGIN[1]()\n" +
		"return mark(ARGV[2]) .. now\nend)\n" +
		"redis.register_function('lib1_b', function(keys, args)\nKEYS, ARGV = keys, args\n" +
		"return LIMIT\nend)\n"
	if got != want {
		t.Fatalf("library:\n%s\nwant:\n%s", got, want)
	}
}

// TestLibraryFunctionNeedingManyLocals: a function whose per-call settings
// name more locals than Lua's 60 upvalues per function still loads: they
// are set by begin functions of at most maxBeginUpvalues each, in order.
func TestLibraryFunctionNeedingManyLocals(t *testing.T) {
	var lib strings.Builder
	lib.WriteString("local v1 = ARGV[1]\n")
	for i := 2; i <= 130; i++ {
		fmt.Fprintf(&lib, "local v%d = v%d .. 'x'\n", i, i-1)
	}
	code := library("lib2", lib.String(), []libScript{{fn: "lib2_f", rid: "nil", src: "return v130"}})
	if n := strings.Count(code, "= function()"); n < 3 {
		t.Fatalf("%d begin functions for 130 chained locals, want at least 3", n)
	}
	rdb, _ := redistest.New(t)
	ctx := context.Background()
	if err := rdb.FunctionLoadReplace(ctx, code).Err(); err != nil {
		t.Fatalf("the library does not load: %v", err)
	}
	got, err := rdb.FCall(ctx, "lib2_f", nil, "a").Text()
	if want := "a" + strings.Repeat("x", 129); err != nil || got != want {
		t.Fatalf("lib2_f: %q, %v; want %q", got, err, want)
	}
}

// BenchmarkAssembleScripts reports what a process pays once for the
// ledger's Lua: the function library (on its first ledger call) and every
// script's plain form (at start).
func BenchmarkAssembleScripts(b *testing.B) {
	for i := 0; i < b.N; i++ {
		library("fencedq_bench", sharedLua, libScripts)
		for _, s := range libScripts {
			linkUnits(sharedUnits(s.rid), s.src)
		}
	}
}
