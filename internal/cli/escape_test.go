package cli

import (
	"errors"
	"github.com/fencedq/fencedq/internal/termsafe"
	"github.com/fencedq/fencedq/lease"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestEscape(t *testing.T) {
	for in, want := range map[string]string{
		"":                            "",
		"plain text, café, 東京, 🙂":     "plain text, café, 東京, 🙂",
		`C:\path\x1b`:                 `C:\path\x1b`,
		"\x1b]0;pwned\a\x1b[2J":       `\x1b]0;pwned\x07\x1b[2J`,
		"a\nb\rc\td":                  `a\nb\rc\td`,
		"nul\x00del\x7f":              `nul\x00del\x7f`,
		"csi\u009b2J":                 `csi\u009b2J`,
		"bad\xffutf8\xc3":             `bad\xffutf8\xc3`,
		"rlo\u202egnp.exe":            `rlo\u202egnp.exe`,
		"isolate\u2066x\u2069":        `isolate\u2066x\u2069`,
		"line\u2028sep\u2029":         `line\u2028sep\u2029`,
		"zero\u200bwidth\u200c\u200d": `zero\u200bwidth\u200c\u200d`,
		"bom\ufeffword\u2060joiner":   `bom\ufeffword\u2060joiner`,
		"soft\u00adhyphen":            `soft\u00adhyphen`,
		"tag\U000e0041\U000e007f":     `tag\U000e0041\U000e007f`,
	} {
		if got := Escape(in); got != want {
			t.Errorf("Escape(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestEscapef(t *testing.T) {
	type state string
	got := Escapef("%s %s %v %d %s|", state("x\x1b"), []byte("{\"a\":\"\x07\"}"), errors.New("e\r"), 7, "s\n")
	if want := `x\x1b {"a":"\x07"} e\r 7 s\n|`; got != want {
		t.Fatalf("Escapef = %q, want %q", got, want)
	}
	// A number type with a String method (a token) still prints with %d.
	if got := Escapef("%d|%s", lease.Token(42), lease.Token(43)); got != "42|43" {
		t.Fatalf("Escapef of tokens = %q, want %q", got, "42|43")
	}
}

// FuzzEscape: the output is valid UTF-8 without a rune a terminal acts on,
// Escape is idempotent, and safe input is returned unchanged.
func FuzzEscape(f *testing.F) {
	for _, s := range []string{"", "abc", "\x1b]0;pwned\a\x1b[2J", "\xff\xfe", "\u202e", "a\\x1b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := Escape(s)
		if !utf8.ValidString(out) {
			t.Fatalf("Escape(%q) = %q: not UTF-8", s, out)
		}
		if i := strings.IndexFunc(out, termsafe.Unsafe); i >= 0 {
			t.Fatalf("Escape(%q) = %q: unsafe rune at %d", s, out, i)
		}
		if again := Escape(out); again != out {
			t.Fatalf("Escape not idempotent: %q -> %q", out, again)
		}
		if utf8.ValidString(s) && strings.IndexFunc(s, termsafe.Unsafe) < 0 && out != s {
			t.Fatalf("safe %q changed to %q", s, out)
		}
	})
}
