package cli

import (
	"fmt"
	"io"
	"reflect"
	"strings"
	"unicode/utf8"

	"github.com/fencedq/fencedq/internal/termsafe"
)

// Escape returns s safe to write to a terminal as one field of text
// output: every character a terminal could act on is written as a Go
// escape instead, so a job's kind, queue, args, error text or an
// operator's note can neither move the cursor, retitle the window, clear
// the screen, fake a line of output, reorder what is shown nor pass for
// another name by an invisible character:
//
//   - control characters (C0, DEL, C1, which include ESC and the 8-bit
//     CSI): \n, \r and \t by those names, others as \x1b or \u009b;
//   - line and paragraph separators and the format characters (Unicode
//     category Cf: the bidirectional formatting characters U+200E,
//     U+200F, U+061C, U+202A-U+202E, U+2066-U+2069, and the invisible
//     ones, zero-width space and joiners, word joiner, byte order mark,
//     soft hyphen, tag characters), as termsafe.Unsafe names them: as
//     \u2028, \u200b and so on, \U000e0041 above U+FFFF;
//   - bytes that are not UTF-8: as \xff.
//
// Everything else, printable Unicode and backslashes included, is kept
// as is. Every text (non-JSON) output of the commands passes each value
// from Redis, a user or an error through Escape; JSON output goes through
// JSONWriter.
func Escape(s string) string {
	i := strings.IndexFunc(s, func(r rune) bool { return r == utf8.RuneError || termsafe.Unsafe(r) })
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for s = s[i:]; s != ""; {
		r, n := utf8.DecodeRuneInString(s)
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[0])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x80 && termsafe.Unsafe(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case r > 0xffff && termsafe.Unsafe(r):
			fmt.Fprintf(&b, `\U%08x`, r)
		case termsafe.Unsafe(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[:n])
		}
		s = s[n:]
	}
	return b.String()
}

// Escapef is fmt.Sprintf with every argument that prints as text passed
// through Escape first: strings and string types, byte slices (raw JSON),
// errors and fmt.Stringers. The format itself is the caller's; numbers
// print as Sprintf prints them, number types with a String method too (a
// token prints with %d).
func Escapef(format string, a ...any) string {
	for i, v := range a {
		if v != nil && isNumber(reflect.ValueOf(v).Kind()) {
			continue
		}
		switch x := v.(type) {
		case nil:
		case error:
			a[i] = Escape(x.Error())
		case fmt.Stringer:
			a[i] = Escape(x.String())
		default:
			switch rv := reflect.ValueOf(v); {
			case rv.Kind() == reflect.String:
				a[i] = Escape(rv.String())
			case rv.Kind() == reflect.Slice && rv.Type().Elem().Kind() == reflect.Uint8:
				a[i] = Escape(string(rv.Bytes()))
			}
		}
	}
	return fmt.Sprintf(format, a...)
}

func isNumber(k reflect.Kind) bool {
	return (k >= reflect.Int && k <= reflect.Uint64) || k == reflect.Float32 || k == reflect.Float64
}

// JSONWriter returns w for JSON output (the commands' --json output, JSON
// log lines): termsafe.JSONWriter, which writes the runes Escape escapes
// (above U+001F) as \u escapes; the output decodes to the same values.
// Each Write must be whole runes (an Encoder's value, a log line).
func JSONWriter(w io.Writer) io.Writer { return termsafe.JSONWriter(w) }
