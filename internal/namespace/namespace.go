// Package namespace holds the rule every key namespace follows: the
// ledger's (jobs.Config), a lease manager's and redisfence's. They prefix
// the keys of one Redis, so a namespace one of them accepts and another
// refuses would let the first write where the second cannot reach.
package namespace

import (
	"fmt"
	"strings"
)

// MaxLen is the longest namespace, in bytes.
const MaxLen = 64

// Nested are the parts a namespace ns keeps keys named after user data
// under (ns:pool:<worker id>, ns:lease:{<resource>}, ns:fence:..., the
// redisfence data keys ns:data:{<resource>}:<name>): a namespace with one
// of them as a ':'-separated part after its first would share keys with
// the namespace before it ("fq:fence" queue acct's operation key
// fq:fence:{acct}:op:<op> is namespace fq's effect record of <op> on
// resource acct).
var Nested = []string{"pool", "lease", "fence", "data"}

// IsName reports whether s is 1-max ASCII letters, digits or ._:- (the
// rule of namespaces, queue names and group names: no brace, which would
// move a key's hash tag, no glob character, white space or control
// character). A byte loop: every enqueue checks its queue.
func IsName(s string, max int) bool {
	if len(s) < 1 || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '.' || c == '_' || c == ':' || c == '-') {
			return false
		}
	}
	return true
}

// Check returns why ns cannot be a namespace, nil when it can: it is 1-64
// letters, digits or ._:- (no brace, which would move the keys' hash tag;
// no glob character, white space or control character), and no part of it
// after its first is one of Nested.
func Check(ns string) error {
	if !IsName(ns, MaxLen) {
		return fmt.Errorf("namespace %q must be 1-%d letters, digits or ._:-", clip(ns), MaxLen)
	}
	parts := strings.Split(ns, ":")
	for i := 1; i < len(parts); i++ {
		for _, n := range Nested {
			if parts[i] == n {
				return fmt.Errorf("namespace %q: its part %q names keys of namespace %q (%[3]s:%[2]s:...)", ns, n, strings.Join(parts[:i], ":"))
			}
		}
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
