package ledger

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/fencedq/fencedq/internal/namespace"
	"github.com/fencedq/fencedq/lease"
)

// Limits on the names every entry point accepts (the client, the worker's
// configuration, the operator commands). A name outside them is rejected
// with an error matching ErrInvalid that states the rule, before anything
// is written.
//
//	namespace     1-64 bytes of letters, digits and . _ : -
//	queue         1-100 bytes of letters, digits and . _ : -
//	kind          1-100 bytes of UTF-8, no whitespace, control characters or braces
//	resource      1-512 bytes of UTF-8, no control characters or braces
//	operation id  1-200 bytes of UTF-8, no control characters
//
// Namespaces and queues become parts of Redis keys and hash tags ({queue}),
// and queues label metrics, hence the small alphabet. Kinds label metrics
// too. Resources name leases and fence records, whose Redis keys are
// hash-tagged by the resource, so a brace would split the tag.
const (
	MaxNamespaceLen   = namespace.MaxLen
	MaxQueueLen       = 100
	MaxKindLen        = 100
	MaxResourceLen    = lease.MaxResourceLen
	MaxOperationIDLen = 200
)

// ValidateNamespace checks a key namespace: 1-64 letters, digits or ._:-
// (no braces, which would break the keys' hash tags). Lease managers and
// redisfence stores check theirs by the same rule (internal/namespace).
func ValidateNamespace(ns string) error {
	if err := namespace.Check(ns); err != nil {
		return invalid("%v", err)
	}
	return nil
}

// ValidateKind checks a job kind: 1-100 bytes of valid UTF-8 without
// whitespace, control characters or braces.
func ValidateKind(kind string) error {
	if kind == "" || len(kind) > MaxKindLen || !utf8.ValidString(kind) ||
		strings.ContainsFunc(kind, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) || r == '{' || r == '}' }) {
		return invalid("kind %q must be 1-%d bytes of UTF-8 without whitespace, control characters or braces", Clip(kind), MaxKindLen)
	}
	return nil
}

// Reserved resource prefixes: the leases and fences fencedq keeps for
// itself (the maintenance leader's lease, outbox relay fences) start with
// InternalResourcePrefix, and a job that names no resource leases
// JobResourcePrefix + its id. No user resource may start with either, so
// none can take or raise an internal one.
const (
	InternalResourcePrefix = "fencedq:"
	JobResourcePrefix      = "job:"
)

// ValidateResource checks a resource name (what a job's lease and fence
// protect): 1-512 bytes (lease.MaxResourceLen) of valid UTF-8 without
// control characters or braces, not starting with a reserved prefix.
func ValidateResource(resource string) error {
	if resource == "" || len(resource) > MaxResourceLen || !utf8.ValidString(resource) ||
		strings.ContainsFunc(resource, func(r rune) bool { return unicode.IsControl(r) || r == '{' || r == '}' }) {
		return invalid("resource %q must be 1-%d bytes of UTF-8 without control characters or braces", Clip(resource), MaxResourceLen)
	}
	if strings.HasPrefix(resource, InternalResourcePrefix) || strings.HasPrefix(resource, JobResourcePrefix) {
		return invalid("resource %q: the prefixes %q and %q are reserved", Clip(resource), InternalResourcePrefix, JobResourcePrefix)
	}
	return nil
}

// ValidateOperationID checks an operation id: 1-200 bytes of valid UTF-8
// without control characters.
func ValidateOperationID(op string) error {
	if op == "" || len(op) > MaxOperationIDLen || !utf8.ValidString(op) || strings.ContainsFunc(op, unicode.IsControl) {
		return invalid("operation id %q must be 1-%d bytes of UTF-8 without control characters", Clip(op), MaxOperationIDLen)
	}
	return nil
}

// JobKeySuffixes are the suffixes the layout appends to a job's key for
// its sibling keys (ns:{q}:job:<id>:history, :waits, :wf_failed): a job id
// ending in one would name another job's sibling key.
var JobKeySuffixes = []string{":history", ":waits", ":wf_failed"}

// siblingID reports whether id ends with one of JobKeySuffixes: no job has
// such an id (ValidateJobID, OpJobID), and its job key would be another
// job's sibling key, so a read or an action on it must find no job rather
// than the sibling.
func siblingID(id string) bool {
	for _, s := range JobKeySuffixes {
		if strings.HasSuffix(id, s) {
			return true
		}
	}
	return false
}

// ValidateJobID checks a job id a caller chooses (a bridged delivery's):
// an operation id (ValidateOperationID) other than "." and ".." (path
// elements, which URLs clean away: the dashboard could not reach the job)
// and not ending in one of JobKeySuffixes.
func ValidateJobID(id string) error {
	if err := ValidateOperationID(id); err != nil {
		return invalid("job id %q must be 1-%d bytes of UTF-8 without control characters", Clip(id), MaxOperationIDLen)
	}
	if id == "." || id == ".." {
		return invalid("job id %q is a path element, not a name", id)
	}
	for _, s := range JobKeySuffixes {
		if strings.HasSuffix(id, s) {
			return invalid("job id %q: the suffix %q names a job's own keys", Clip(id), s)
		}
	}
	return nil
}

// Limits on a job's headers (see ValidateHeaders).
const (
	MaxHeaders        = 16
	MaxHeaderKeyLen   = 64
	MaxHeaderValueLen = 1024
	MaxHeadersBytes   = 4096
)

var headerKey = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// ValidateHeaders checks a job's headers: at most 16, each key 1-64
// letters, digits or ._- and each value at most 1024 bytes of UTF-8
// without control characters, 4096 bytes in all (keys and values).
func ValidateHeaders(h map[string]string) error {
	if len(h) > MaxHeaders {
		return invalid("%d headers: at most %d", len(h), MaxHeaders)
	}
	total := 0
	for k, v := range h {
		if !headerKey.MatchString(k) {
			return invalid("header key %q must be 1-%d letters, digits or ._-", Clip(k), MaxHeaderKeyLen)
		}
		if len(v) > MaxHeaderValueLen || !utf8.ValidString(v) || strings.ContainsFunc(v, unicode.IsControl) {
			return invalid("header %s: the value must be at most %d bytes of UTF-8 without control characters", k, MaxHeaderValueLen)
		}
		total += len(k) + len(v)
	}
	if total > MaxHeadersBytes {
		return invalid("headers of %d bytes exceed %d", total, MaxHeadersBytes)
	}
	return nil
}

// clip shortens a rejected value for the error text.
func Clip(s string) string {
	const n = 64
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
