// Package termsafe names the characters a terminal may act on and keeps
// them out of JSON output as it is written, for the fencedq command's
// output and the dashboard's JSON API alike: both are read in terminals
// (curl, jq), and what they show comes from Redis, users and errors.
package termsafe

import (
	"bytes"
	"fmt"
	"io"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Unsafe reports whether a terminal may act on r, or r may hide or
// reorder what is shown: control characters (C0, DEL, C1, which include
// ESC and the 8-bit CSI), the line and paragraph separators (U+2028,
// U+2029) and every format character (Unicode category Cf): the
// bidirectional formatting characters (U+200E, U+200F, U+061C,
// U+202A-U+202E, U+2066-U+2069) and the invisible ones, zero-width space,
// non-joiner and joiner (U+200B-U+200D), word joiner (U+2060), byte order
// mark (U+FEFF), soft hyphen (U+00AD) and the tag characters
// (U+E0001-U+E007F) among them, so two names that differ only by such a
// character never look the same.
func Unsafe(r rune) bool {
	return unicode.IsControl(r) || r == '\u2028' || r == '\u2029' || unicode.Is(unicode.Cf, r)
}

// JSONWriter returns w for JSON output: encoding/json escapes C0 control
// characters but writes DEL, C1 controls (the 8-bit CSI among them), line
// separators and format characters as they are, so each Write has those
// runes (the Unsafe ones above U+001F) written as \u escapes instead, a
// surrogate pair of them above U+FFFF (the tag characters). JSON holds
// them only inside strings, where the escape stands for the same
// character: the output decodes to the same values.
// Each Write must be whole runes (an Encoder's value, a log line).
func JSONWriter(w io.Writer) io.Writer { return jsonWriter{w} }

type jsonWriter struct{ w io.Writer }

func (j jsonWriter) Write(p []byte) (int, error) {
	unsafe := func(r rune) bool { return r > 0x1f && Unsafe(r) }
	i := bytes.IndexFunc(p, unsafe)
	if i < 0 {
		return j.w.Write(p)
	}
	b := make([]byte, 0, len(p)+16)
	b = append(b, p[:i]...)
	for s := p[i:]; len(s) > 0; {
		r, n := utf8.DecodeRune(s)
		switch {
		case !unsafe(r):
			b = append(b, s[:n]...)
		case r > 0xffff:
			hi, lo := utf16.EncodeRune(r)
			b = fmt.Appendf(b, `\u%04x\u%04x`, hi, lo)
		default:
			b = fmt.Appendf(b, `\u%04x`, r)
		}
		s = s[n:]
	}
	if _, err := j.w.Write(b); err != nil {
		return 0, err
	}
	return len(p), nil
}
