// Package namespace holds the rule every key namespace follows: the
// ledger's (jobs.Config), a lease manager's and redisfence's. They prefix
// the keys of one Redis, so a namespace one of them accepts and another
// refuses would let the first write where the second cannot reach.
package namespace

import "fmt"

// MaxLen is the longest namespace, in bytes.
const MaxLen = 64

// Check returns why ns cannot be a namespace, nil when it can: it is 1-64
// letters, digits or ._:- (no brace, which would move the keys' hash tag;
// no glob character, white space or control character).
func Check(ns string) error {
	ok := len(ns) >= 1 && len(ns) <= MaxLen
	for i := 0; ok && i < len(ns); i++ {
		c := ns[i]
		ok = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '.' || c == '_' || c == ':' || c == '-'
	}
	if !ok {
		return fmt.Errorf("namespace %q must be 1-%d letters, digits or ._:-", clip(ns), MaxLen)
	}
	return nil
}

// clip shortens a refused namespace for the error text.
func clip(s string) string {
	if len(s) <= MaxLen {
		return s
	}
	return s[:MaxLen] + "..."
}
