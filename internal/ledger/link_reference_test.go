package ledger

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// TestLinkMatchesRegexpReference: the string scanning of link.go gives, for
// the ledger's sources, the same library and plain scripts, byte for byte,
// as the regular-expression reference below (its earlier implementation).
func TestLinkMatchesRegexpReference(t *testing.T) {
	if got, want := ledgerLib.Code(), refLibrary(ledgerLib.Name(), sharedLua, namedScripts(ledgerLib.Name())); got != want {
		t.Fatalf("the library differs from the reference's (%d bytes, want %d)", len(got), len(want))
	}
	for _, s := range libScripts {
		lib := strings.Replace(sharedLua, "local EPOCH_RID = nil\n", "local EPOCH_RID = "+s.rid+"\n", 1)
		if got, want := linkUnits(sharedUnits(s.rid), s.src), refLink(lib, s.src); got != want {
			t.Errorf("%s: the plain script differs from the reference's", s.fn)
		}
	}
	for _, text := range []string{"local function\nf() end", "local a,\nb = 1, 2", "local x = 'a--b' .. c", "local y = \"q\\\"\" .. 'r\\'s' -- z", "local functionx = 0x1F", "local k = 3 * 2, '='", "local k = {} -- kept across calls"} {
		lib := "local a = 1\n" + text + "\nlocal c = 2\n"
		if got, want := library("t", lib, []libScript{{fn: "t_f", rid: "nil", src: "return a + c + f + b + x + y + functionx + k"}}),
			refLibrary("t", lib, []libScript{{fn: "t_f", rid: "nil", src: "return a + c + f + b + x + y + functionx + k"}}); got != want {
			t.Errorf("%q: library\n%s\nwant\n%s", text, got, want)
		}
	}
}

// namedScripts returns libScripts as ledgerLib's build names them.
func namedScripts(name string) []libScript {
	out := make([]libScript, len(libScripts))
	for i, s := range libScripts {
		out[i] = libScript{fn: name + "_" + s.fn, rid: s.rid, src: s.src}
	}
	return out
}

// refLuaUnit is one top-level definition of the shared Lua.
type refLuaUnit struct {
	names []string // the locals it defines
	text  string
}

var (
	refLocalFunc  = regexp.MustCompile(`^local\s+function\s+([A-Za-z_][A-Za-z0-9_]*)`)
	refLocalNames = regexp.MustCompile(`^local\s+([A-Za-z_][A-Za-z0-9_]*(?:\s*,\s*[A-Za-z_][A-Za-z0-9_]*)*)`)
)

// refSplitUnits cuts lib into its top-level definitions. Text before the
// first (a file's header comment) is dropped.
func refSplitUnits(lib string) []refLuaUnit {
	var units []refLuaUnit
	var cur *refLuaUnit
	var b strings.Builder
	flush := func() {
		if cur != nil {
			cur.text = b.String()
			units = append(units, *cur)
		}
		b.Reset()
	}
	for _, line := range strings.SplitAfter(lib, "\n") {
		if strings.HasPrefix(line, "local ") {
			flush()
			cur = &refLuaUnit{}
			if m := refLocalFunc.FindStringSubmatch(line); m != nil {
				cur.names = []string{m[1]}
			} else if m := refLocalNames.FindStringSubmatch(line); m != nil {
				for _, n := range strings.Split(m[1], ",") {
					cur.names = append(cur.names, strings.TrimSpace(n))
				}
			}
		}
		if cur != nil {
			b.WriteString(line)
		}
	}
	flush()
	return units
}

// refIdentifiers returns the set of Lua refIdentifiers text's code mentions
// (comments and quoted strings left out; a field name that matches a
// definition only includes a definition too many).
func refIdentifiers(text string) map[string]bool {
	code := refLuaQuoted.ReplaceAllString(refLuaComment.ReplaceAllString(text, ""), "''")
	out := map[string]bool{}
	for _, w := range refLuaWord.FindAllString(code, -1) {
		out[w] = true
	}
	return out
}

var (
	refLuaWord    = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)
	refLuaComment = regexp.MustCompile(`(?m)--.*$`)
	refLuaQuoted  = regexp.MustCompile(`'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*"`)
)

// refLink returns the definitions of lib that src needs, then src.
func refLink(lib, src string) string {
	units := refSplitUnits(lib)
	need := refNeeded(units, src)
	var b strings.Builder
	for i, u := range units {
		if need[i] {
			b.WriteString(u.text)
		}
	}
	b.WriteString(src)
	return b.String()
}

// refNeeded marks the units src uses, directly or through another unit.
func refNeeded(units []refLuaUnit, src string) []bool {
	definedBy := map[string]int{}
	for i, u := range units {
		for _, n := range u.names {
			definedBy[n] = i
		}
	}
	need := make([]bool, len(units))
	var visit func(text string, self int)
	visit = func(text string, self int) {
		for w := range refIdentifiers(text) {
			i, ok := definedBy[w]
			if !ok || i == self || need[i] {
				continue
			}
			need[i] = true
			visit(units[i].text, i)
		}
	}
	visit(src, -1)
	return need
}

// refLibrary returns the code of the Redis function refLibrary name holding
// scripts, each a function over the shared definitions of lib. The
// refLibrary's top level defines, once per load, lib's functions and
// constants; its other top-level locals (the queue's prefix and keys, the
// clock's reading, per-call tables and caches) are declared there and set
// at the start of each function that uses them, from its own KEYS and ARGV,
// exactly as the same lines do when the script runs as a whole (refLink). A
// function sets only the ones it uses, so it reads nothing another
// script's call left.
//
// The settings run in begin functions of their own (see refBeginChunks), so a
// script's function has as upvalues only the locals its own code names:
// Lua 5.1 refuses a function with more than 60 upvalues, and the claim
// alone sets about 40 per-call locals.
func refLibrary(name, lib string, scripts []libScript) string {
	units := refSplitUnits(lib)
	perCall := make([]bool, len(units))
	libNames := map[string]bool{"KEYS": true, "ARGV": true}
	var b strings.Builder
	b.WriteString("#!lua name=" + name + "\n")
	b.WriteString("local KEYS, ARGV -- each function's own, set at its start\n")
	b.WriteString("local BEGIN = {} -- each function's per-call settings (see beginChunks)\n")
	for i, u := range units {
		for _, n := range u.names {
			libNames[n] = true
		}
		if refLocalFunc.MatchString(u.text) || refIsConstant(u.text) || refKeptAcrossCalls.MatchString(u.text) {
			b.WriteString(u.text)
			continue
		}
		perCall[i] = true
		b.WriteString("local " + strings.Join(u.names, ", ") + "\n")
	}
	nbegin := 0
	for _, s := range scripts {
		need := refNeeded(units, s.src)
		var sets []string
		for i, u := range units {
			switch {
			case !need[i] || !perCall[i]:
			case len(u.names) == 1 && u.names[0] == "EPOCH_RID":
				sets = append(sets, "EPOCH_RID = "+s.rid+"\n")
			default:
				sets = append(sets, strings.TrimPrefix(u.text, "local "))
			}
		}
		var calls strings.Builder
		for _, chunk := range refBeginChunks(sets, libNames) {
			nbegin++
			fmt.Fprintf(&b, "BEGIN[%d] = function()\n%send\n", nbegin, strings.Join(chunk, ""))
			fmt.Fprintf(&calls, "BEGIN[%d]()\n", nbegin)
		}
		b.WriteString("redis.register_function('" + s.fn + "', function(keys, args)\nKEYS, ARGV = keys, args\n")
		b.WriteString(calls.String())
		b.WriteString(s.src)
		b.WriteString("\nend)\n")
	}
	return b.String()
}

// refMaxBeginUpvalues bounds the refLibrary locals one begin function names,
// below Lua 5.1's 60 upvalues per function.
const refMaxBeginUpvalues = 50

// refBeginChunks cuts a function's per-call settings, in their order, into
// chunks that each name at most refMaxBeginUpvalues of the refLibrary's locals
// (libNames), one begin function each.
func refBeginChunks(sets []string, libNames map[string]bool) [][]string {
	var chunks [][]string
	var cur []string
	used := map[string]bool{}
	for _, set := range sets {
		add := 0
		ids := refIdentifiers(set)
		for w := range ids {
			if libNames[w] && !used[w] {
				add++
			}
		}
		if len(cur) > 0 && len(used)+add > refMaxBeginUpvalues {
			chunks, cur, used = append(chunks, cur), nil, map[string]bool{}
		}
		cur = append(cur, set)
		for w := range ids {
			if libNames[w] {
				used[w] = true
			}
		}
	}
	if len(cur) > 0 {
		chunks = append(chunks, cur)
	}
	return chunks
}

// refIsConstant reports whether a unit defines numbers and strings only
// (literals and arithmetic on them), which a refLibrary defines once.
func refIsConstant(text string) bool {
	code := strings.TrimSpace(refLuaComment.ReplaceAllString(text, ""))
	_, rhs, ok := strings.Cut(code, "=")
	if !ok {
		return false
	}
	rhs = refLuaQuoted.ReplaceAllString(rhs, "0")
	return strings.TrimSpace(rhs) != "" && refLuaLiteral.MatchString(rhs)
}

var refKeptAcrossCalls = regexp.MustCompile(`\A[^\n]*-- kept across calls[ \t]*(\n|$)`)

var refLuaLiteral = regexp.MustCompile(`^[\s0-9.*+\-,]+$`)
