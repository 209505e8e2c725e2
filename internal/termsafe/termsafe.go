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
	"unicode/utf8"
)

// Unsafe reports whether a terminal may act on r: control characters
// (C0, DEL, C1, which include ESC and the 8-bit CSI), line and paragraph
// separators and the bidirectional formatting characters (U+2028,
// U+2029, U+200E, U+200F, U+061C, U+202A-U+202E, U+2066-U+2069).
func Unsafe(r rune) bool {
	if unicode.IsControl(r) {
		return true
	}
	switch r {
	case '\u2028', '\u2029', '\u200e', '\u200f', '\u061c':
		return true
	}
	return r >= '\u202a' && r <= '\u202e' || r >= '\u2066' && r <= '\u2069'
}

// JSONWriter returns w for JSON output: encoding/json escapes C0 control
// characters but writes DEL, C1 controls (the 8-bit CSI among them), line
// separators and bidirectional formatting characters as they are, so each
// Write has those runes (the Unsafe ones above U+001F) written as \u
// escapes instead. JSON holds them only inside strings, where the escape
// stands for the same character: the output decodes to the same values.
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
		if unsafe(r) {
			b = fmt.Appendf(b, `\u%04x`, r)
		} else {
			b = append(b, s[:n]...)
		}
		s = s[n:]
	}
	if _, err := j.w.Write(b); err != nil {
		return 0, err
	}
	return len(p), nil
}
