package ledger

import (
	"fmt"
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
	ids   map[string]bool // the identifiers its code names
}

// The text work below is plain string scanning, not regular expressions:
// it runs on the first call of a process (the library) and at start (each
// script's plain form), where regular expressions over the scripts'
// sources took a noticeable part of a second, several under the race
// detector.

// splitUnits cuts lib into its top-level definitions. Text before the
// first (a file's header comment) is dropped.
func splitUnits(lib string) []luaUnit {
	var units []luaUnit
	start := -1 // the offset of the current unit
	flush := func(end int) {
		if start >= 0 {
			units = append(units, newUnit(lib[start:end]))
		}
	}
	for off := 0; off < len(lib); {
		n := strings.IndexByte(lib[off:], '\n') + 1
		if n == 0 {
			n = len(lib) - off
		}
		if strings.HasPrefix(lib[off:], "local ") {
			flush(off)
			start = off
		}
		off += n
	}
	flush(len(lib))
	return units
}

// newUnit returns the unit of text, a top-level definition.
func newUnit(text string) luaUnit {
	line, _, _ := strings.Cut(text, "\n")
	names, _ := localNames(line)
	return luaUnit{names: names, text: text, ids: identifiers(text)}
}

// luaSpace is what Lua source separates tokens with.
const luaSpace = " \t\n\f\r"

// localNames returns the names a definition starting "local " defines,
// and whether it is a local function: "local function f" defines f, "local
// a, b = ..." a and b.
func localNames(text string) (names []string, fn bool) {
	rest := strings.TrimLeft(strings.TrimPrefix(text, "local"), luaSpace)
	name, after := luaIdent(rest)
	if name == "" || len(rest) == len(text)-len("local") {
		return nil, false
	}
	if name == "function" {
		if r := strings.TrimLeft(after, luaSpace); len(r) < len(after) {
			if f, _ := luaIdent(r); f != "" {
				return []string{f}, true
			}
		}
	}
	names = []string{name}
	for {
		r := strings.TrimLeft(after, luaSpace)
		if !strings.HasPrefix(r, ",") {
			return names, false
		}
		n, a := luaIdent(strings.TrimLeft(r[1:], luaSpace))
		if n == "" {
			return names, false
		}
		names, after = append(names, n), a
	}
}

// luaIdent splits s after the identifier it starts with ("" if none).
func luaIdent(s string) (ident, rest string) {
	i := 0
	for i < len(s) && (isIdentStart(s[i]) || i > 0 && '0' <= s[i] && s[i] <= '9') {
		i++
	}
	return s[:i], s[i:]
}

func isIdentStart(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_' }

// identifiers returns the set of Lua identifiers text's code mentions
// (comments and quoted strings left out; a field name that matches a
// definition only includes a definition too many).
func identifiers(text string) map[string]bool {
	code := replaceQuoted(stripComments(text), " ")
	out := map[string]bool{}
	for i := 0; i < len(code); {
		if !isIdentStart(code[i]) {
			i++
			continue
		}
		w, _ := luaIdent(code[i:])
		out[w] = true
		i += len(w)
	}
	return out
}

// stripComments drops each line's text from its first "--".
func stripComments(text string) string {
	if !strings.Contains(text, "--") {
		return text
	}
	var b strings.Builder
	b.Grow(len(text))
	for len(text) > 0 {
		line, rest, nl := strings.Cut(text, "\n")
		if i := strings.Index(line, "--"); i >= 0 {
			line = line[:i]
		}
		b.WriteString(line)
		if nl {
			b.WriteByte('\n')
		}
		text = rest
	}
	return b.String()
}

// replaceQuoted replaces each string quoted on one line ('...' or "...",
// with backslash escapes) by repl.
func replaceQuoted(text, repl string) string {
	i := strings.IndexAny(text, `'"`)
	if i < 0 {
		return text
	}
	var b strings.Builder
	b.Grow(len(text))
	for i >= 0 {
		b.WriteString(text[:i])
		if n := quotedLen(text[i:]); n > 0 {
			b.WriteString(repl)
			text = text[i+n:]
		} else {
			b.WriteByte(text[i])
			text = text[i+1:]
		}
		i = strings.IndexAny(text, `'"`)
	}
	b.WriteString(text)
	return b.String()
}

// quotedLen returns the length of the quoted string s starts with, closed
// on its line, or 0.
func quotedLen(s string) int {
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case s[0]:
			return i + 1
		case '\n':
			return 0
		case '\\':
			if i++; i < len(s) && s[i] == '\n' {
				return 0
			}
		}
	}
	return 0
}

// link returns the definitions of lib that src needs, then src.
func link(lib, src string) string { return linkUnits(splitUnits(lib), src) }

// linkUnits returns the units src needs, then src.
func linkUnits(units []luaUnit, src string) string {
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
	var visit func(ids map[string]bool, self int)
	visit = func(ids map[string]bool, self int) {
		for w := range ids {
			i, ok := definedBy[w]
			if !ok || i == self || need[i] {
				continue
			}
			need[i] = true
			visit(units[i].ids, i)
		}
	}
	visit(identifiers(src), -1)
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
// library's top level defines, once per load, lib's functions, constants
// and caches kept across calls (keptAcrossCalls); its other top-level
// locals (the queue's prefix, the clock's reading, per-call tables and
// caches) are declared there and set at the start of each function that
// uses them, from its own KEYS and ARGV, exactly as the same lines do when
// the script runs as a whole (link). A
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
		if _, fn := localNames(u.text); fn || isConstant(u.text) || keptAcrossCalls(u.text) {
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

// keptAcrossCalls reports whether a unit's first line ends with the
// comment "-- kept across calls": a cache the library defines once per
// load, which its functions share (a script run whole makes it per call).
func keptAcrossCalls(text string) bool {
	line, _, _ := strings.Cut(text, "\n")
	return strings.HasSuffix(strings.TrimSpace(line), "-- kept across calls")
}

// isConstant reports whether a unit defines numbers and strings only
// (literals and arithmetic on them), which a library defines once.
func isConstant(text string) bool {
	code := strings.TrimSpace(stripComments(text))
	_, rhs, ok := strings.Cut(code, "=")
	if !ok {
		return false
	}
	rhs = replaceQuoted(rhs, "0")
	return strings.TrimSpace(rhs) != "" && strings.Trim(rhs, luaSpace+"0123456789.*+-,") == ""
}
