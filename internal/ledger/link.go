package ledger

import (
	"fmt"
	"regexp"
	"strings"
)

// The shared Lua (internal/epoch's library, then prelude.lua) runs in full
// on every call of a script it is prepended to: each top-level local it
// defines, each closure and table, and the TIME call are made again per
// call. link prepends only the definitions a script uses, directly or
// through another definition it uses, in their original order, so a
// script's per-call prelude is what it needs. The Lua files are unchanged:
// a top-level definition is a line starting with "local " at column 0 and
// runs to the next one (its comments go with the one before).

// luaUnit is one top-level definition of the shared Lua.
type luaUnit struct {
	names []string // the locals it defines
	text  string
}

var (
	localFunc  = regexp.MustCompile(`^local\s+function\s+([A-Za-z_][A-Za-z0-9_]*)`)
	localNames = regexp.MustCompile(`^local\s+([A-Za-z_][A-Za-z0-9_]*(?:\s*,\s*[A-Za-z_][A-Za-z0-9_]*)*)`)
)

// splitUnits cuts lib into its top-level definitions. Text before the
// first (a file's header comment) is dropped.
func splitUnits(lib string) []luaUnit {
	var units []luaUnit
	var cur *luaUnit
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
			cur = &luaUnit{}
			if m := localFunc.FindStringSubmatch(line); m != nil {
				cur.names = []string{m[1]}
			} else if m := localNames.FindStringSubmatch(line); m != nil {
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

// identifiers returns the set of Lua identifiers text's code mentions
// (comments and quoted strings left out; a field name that matches a
// definition only includes a definition too many).
func identifiers(text string) map[string]bool {
	code := luaQuoted.ReplaceAllString(luaComment.ReplaceAllString(text, ""), "''")
	out := map[string]bool{}
	for _, w := range luaWord.FindAllString(code, -1) {
		out[w] = true
	}
	return out
}

var (
	luaWord    = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)
	luaComment = regexp.MustCompile(`(?m)--.*$`)
	luaQuoted  = regexp.MustCompile(`'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*"`)
)

// link returns the definitions of lib that src needs, then src.
func link(lib, src string) string {
	units := splitUnits(lib)
	need := needed(units, src)
	var b strings.Builder
	for i, u := range units {
		if need[i] {
			b.WriteString(u.text)
		}
	}
	b.WriteString(src)
	return b.String()
}

// needed marks the units src uses, directly or through another unit.
func needed(units []luaUnit, src string) []bool {
	definedBy := map[string]int{}
	for i, u := range units {
		for _, n := range u.names {
			definedBy[n] = i
		}
	}
	need := make([]bool, len(units))
	var visit func(text string, self int)
	visit = func(text string, self int) {
		for w := range identifiers(text) {
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

// libScript is one script of a function library: its function's name, the
// expression its EPOCH_RID is set to ("nil", or "ARGV[n]" for a minting
// script), and its source.
type libScript struct {
	fn, rid, src string
}

// library returns the code of the Redis function library name holding
// scripts, each a function over the shared definitions of lib. The
// library's top level defines, once per load, lib's functions and
// constants; its other top-level locals (the queue's prefix and keys, the
// clock's reading, per-call tables and caches) are declared there and set
// at the start of each function that uses them, from its own KEYS and ARGV,
// exactly as the same lines do when the script runs as a whole (link). A
// function sets only the ones it uses, so it reads nothing another
// script's call left.
//
// The settings run in begin functions of their own (see beginChunks), so a
// script's function has as upvalues only the locals its own code names:
// Lua 5.1 refuses a function with more than 60 upvalues, and the claim
// alone sets about 40 per-call locals.
func library(name, lib string, scripts []libScript) string {
	units := splitUnits(lib)
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
		if localFunc.MatchString(u.text) || isConstant(u.text) {
			b.WriteString(u.text)
			continue
		}
		perCall[i] = true
		b.WriteString("local " + strings.Join(u.names, ", ") + "\n")
	}
	nbegin := 0
	for _, s := range scripts {
		need := needed(units, s.src)
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
		for _, chunk := range beginChunks(sets, libNames) {
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

// maxBeginUpvalues bounds the library locals one begin function names,
// below Lua 5.1's 60 upvalues per function.
const maxBeginUpvalues = 50

// beginChunks cuts a function's per-call settings, in their order, into
// chunks that each name at most maxBeginUpvalues of the library's locals
// (libNames), one begin function each.
func beginChunks(sets []string, libNames map[string]bool) [][]string {
	var chunks [][]string
	var cur []string
	used := map[string]bool{}
	for _, set := range sets {
		add := 0
		ids := identifiers(set)
		for w := range ids {
			if libNames[w] && !used[w] {
				add++
			}
		}
		if len(cur) > 0 && len(used)+add > maxBeginUpvalues {
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

// isConstant reports whether a unit defines numbers and strings only
// (literals and arithmetic on them), which a library defines once.
func isConstant(text string) bool {
	code := strings.TrimSpace(luaComment.ReplaceAllString(text, ""))
	_, rhs, ok := strings.Cut(code, "=")
	if !ok {
		return false
	}
	rhs = luaQuoted.ReplaceAllString(rhs, "0")
	return strings.TrimSpace(rhs) != "" && luaLiteral.MatchString(rhs)
}

var luaLiteral = regexp.MustCompile(`^[\s0-9.*+\-,]+$`)
