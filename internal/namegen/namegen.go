// Package namegen generates the names users give fencedq (queues, kinds,
// resources, operation ids, schedule ids, namespaces) for property tests
// of everything that turns names into Redis keys: hash-tag braces in every
// position, separators, multi-byte UTF-8, control characters and lengths
// up to past the limits, plus the hand-picked cases that broke key
// builders before.
package namegen

import (
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// EdgeCases are names that split or empty a Redis hash tag ("{...}"), or
// otherwise sit at the edge of what key builders handle.
var EdgeCases = []string{
	"}x{", "}", "{", "{}", "}{", "}}", "{{", "{x}", "x{y}z", "a}b", "a{b", "}a", "{a", "a}", "a{",
	"x:{y}:z", "::", ":", "-", ".", "_", "*", "?", "[a]", `\`, "a b", " ", "🙂", "é{}", "\x00", "\x01}",
}

// pieces are what generated names are made of.
var pieces = []string{
	"a", "b", "z", "Z", "0", "9", "{", "}", ":", "-", "_", ".", "/", "*", "?", "[", "]", `\`,
	" ", "\t", "\x01", "\x1b", "é", "東", "🙂", "{periodic}", "job:", "op:", "}x{",
}

// Name returns a generated name of 1 to max pieces from r.
func Name(r *rand.Rand, max int) string {
	n := 1 + r.IntN(max)
	var b strings.Builder
	for range n {
		b.WriteString(pieces[r.IntN(len(pieces))])
	}
	return b.String()
}

// Names returns EdgeCases followed by n generated names of up to max
// pieces each.
func Names(r *rand.Rand, n, max int) []string {
	out := append([]string(nil), EdgeCases...)
	for range n {
		out = append(out, Name(r, max))
	}
	return out
}

// SeedEnv names the environment variable that replays a run: set it to
// the seed a failing run logged.
const SeedEnv = "FENCEDQ_NAMES_SEED"

// Rand returns the generator of one test, seeded from SeedEnv or the
// clock; the seed is logged so that a failure can be replayed.
func Rand(tb testing.TB) *rand.Rand {
	tb.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(SeedEnv); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			tb.Fatalf("%s=%q: %v", SeedEnv, s, err)
		}
		seed = v
	}
	tb.Logf("names generated from seed %d (%s=%d replays them)", seed, SeedEnv, seed)
	return rand.New(rand.NewPCG(seed, seed>>1))
}
