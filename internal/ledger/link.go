package ledger

import (
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
	var b strings.Builder
	for i, u := range units {
		if need[i] {
			b.WriteString(u.text)
		}
	}
	b.WriteString(src)
	return b.String()
}
