package jobs

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/fencedq/fencedq/internal/ledger"
)

// UniqueOpts makes a job unique (the Unique option): while a job of the
// same kind with the same unique key is in one of the chosen states,
// enqueueing another writes nothing and returns the existing job with
// Result.Deduplicated set. The check and the write are one script call, so
// concurrent enqueues of one key (from any number of goroutines or
// processes) create exactly one job.
//
// The key is the kind, plus the args when ByArgs or ByFields says so, plus
// the period when ByPeriod is set, and is always scoped to the job's queue:
// every key of a queue lives in one Redis hash slot, so uniqueness across
// queues would need a script spanning two slots (on Redis Cluster, two
// nodes), which no enqueue does. A kind enqueued on two queues is unique
// per queue.
type UniqueOpts struct {
	// ByArgs includes all of the args in the key (their JSON, object keys
	// sorted at every level, so field order does not matter, and numbers
	// by their value: 1, 1.0 and 1e0 are one).
	ByArgs bool
	// ByFields includes only these top-level fields of the args' JSON (by
	// their JSON names; a field absent from the args counts as null). In
	// raw args a key is matched as a handler's decoding matches it: one
	// differing only in case is the field, and of several the last wins.
	// Setting it makes ByArgs unnecessary. A name the args' type can never
	// encode (a typo, or the Go name of a field whose JSON name differs) is
	// refused with ErrInvalid, since it would make every job of the kind a
	// duplicate of the first.
	ByFields []string
	// ByPeriod, when set, scopes the key to a period of the namespace's
	// time (Redis TIME plus the offset a failover carries it on with, see
	// Inspector.ServerTime): jobs enqueued in the same period (that time
	// truncated to a multiple of ByPeriod since the Unix epoch) are
	// duplicates, the first job of the next period is new. A failover to a
	// node whose clock is behind does not move an enqueue back into an
	// earlier period. At least a millisecond (whole milliseconds are
	// kept, a fraction rounded up).
	ByPeriod time.Duration
	// ByState lists the states in which a job holds its key (default
	// DefaultUniqueStates). Pending and Running must be among them, and
	// Uncertain is added to them (its attempt may still run, and the
	// reconciler may run it again). A job
	// that moves to a state outside the list (for example dead, with the
	// default) releases the key: the next enqueue creates a new job. A job
	// that expires after the retention period releases it too.
	ByState []State
}

// DefaultUniqueStates are the states in which a unique job holds its key
// when UniqueOpts.ByState is empty: every state but dead and cancelled.
var DefaultUniqueStates = []State{Pending, Running, Uncertain, Review, Succeeded}

// Unique makes the job unique (see UniqueOpts). An operator's re-run of a
// dead or cancelled job does not check uniqueness again; the re-run job
// holds its key again unless another job took it meanwhile. A job re-submitted
// after a ledger rewind (Client.Resubmit) is restored holding its key, or
// left out when another job holds the key by then.
func Unique(u UniqueOpts) Option {
	return func(o *options) { o.unique = &u }
}

// uniqueOf validates u and builds the ledger's unique key for a job of kind
// with payload (valid JSON, an object).
func uniqueOf(kind string, payload []byte, u *UniqueOpts) (*ledger.Unique, error) {
	if u.ByPeriod < 0 || u.ByPeriod > MaxDelay {
		return nil, invalid("unique period %v must be 0 (none) or positive, at most %v", u.ByPeriod, MaxDelay)
	}
	states := u.ByState
	if len(states) == 0 {
		states = DefaultUniqueStates
	}
	var seen []State
	for _, s := range states {
		if !s.Valid() {
			return nil, invalid("unique state %q is not a job state", ledger.Clip(string(s)))
		}
		if !slices.Contains(seen, s) {
			seen = append(seen, s)
		}
	}
	if !slices.Contains(seen, Pending) || !slices.Contains(seen, Running) {
		return nil, invalid("unique states %v must include pending and running", seen) // each once: the list given may be long
	}
	if !slices.Contains(seen, Uncertain) {
		// its handler may still run, and the reconciler may run it again
		seen = append(seen, Uncertain)
	}
	h := sha256.New()
	h.Write([]byte(kind))
	h.Write([]byte{0})
	switch {
	case len(u.ByFields) > 0:
		fields, ok := topFields(payload)
		if !ok { // its error may quote a value of the args
			return nil, invalid("%s args are not a JSON object, which unique fields need", kind)
		}
		names := slices.Clone(u.ByFields)
		slices.Sort(names)
		names = slices.Compact(names)
		for _, name := range names {
			if name == "" {
				return nil, invalid("an empty unique field name")
			}
			v, err := canonicalJSON(fieldValue(fields, name))
			if err != nil {
				return nil, invalid("%s args field %q: %v", kind, name, err)
			}
			n, _ := json.Marshal(name)
			h.Write(n)
			h.Write([]byte{':'})
			h.Write(v)
			h.Write([]byte{0})
		}
	case u.ByArgs:
		v, err := canonicalJSON(payload)
		if err != nil {
			return nil, invalid("%s args: %v", kind, err)
		}
		h.Write(v)
	}
	return &ledger.Unique{Digest: hex.EncodeToString(h.Sum(nil)[:16]), Period: roundUpMS(u.ByPeriod), States: seen}, nil
}

// argField is one top-level member of a JSON object, its key folded as
// encoding/json folds it.
type argField struct {
	key, folded string
	value       json.RawMessage
}

// topFields returns the members of JSON object payload in their order;
// false when it is not one.
func topFields(payload []byte) ([]argField, bool) {
	d := json.NewDecoder(bytes.NewReader(payload))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return nil, false
	}
	var out []argField
	for d.More() {
		t, err := d.Token()
		if err != nil {
			return nil, false
		}
		k, _ := t.(string)
		var v json.RawMessage
		if err := d.Decode(&v); err != nil {
			return nil, false
		}
		out = append(out, argField{key: k, folded: foldName(k), value: v})
	}
	return out, true
}

// fieldValue returns the value encoding/json decodes into a struct field
// of JSON name name: the last member whose key is name or equals it but
// for case (raw args written by another producer: "Customer" for
// "customer"); nil when none is.
func fieldValue(fields []argField, name string) json.RawMessage {
	folded := foldName(name)
	var v json.RawMessage
	for _, f := range fields {
		if f.key == name || f.folded == folded {
			v = f.value
		}
	}
	return v
}

// foldName folds a key as encoding/json's case-insensitive match does:
// ASCII letters upper-cased, other runes mapped to upper(lower(r)).
func foldName(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r < utf8.RuneSelf && 'a' <= r && r <= 'z':
			r -= 'a' - 'A'
		case r >= utf8.RuneSelf:
			r = unicode.ToUpper(unicode.ToLower(r))
		}
		b.WriteRune(r)
	}
	return b.String()
}

// canonicalJSON re-encodes JSON with object keys sorted at every level and
// each number written one way for its value (canonicalNumber); absent
// (nil) is null.
func canonicalJSON(raw json.RawMessage) ([]byte, error) {
	if len(raw) == 0 {
		return []byte("null"), nil
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return json.Marshal(canonicalNumbers(v)) // maps encode with sorted keys
}

// canonicalNumbers replaces the numbers of decoded JSON v by their
// canonical form, in place.
func canonicalNumbers(v any) any {
	switch v := v.(type) {
	case json.Number:
		return json.Number(canonicalNumber(string(v)))
	case map[string]any:
		for k, e := range v {
			v[k] = canonicalNumbers(e)
		}
	case []any:
		for i, e := range v {
			v[i] = canonicalNumbers(e)
		}
	}
	return v
}

// maxPlainZeros bounds the zeros canonicalNumber writes out to show a
// number without an exponent (as encoding/json, which writes 1e21 and up
// with one); beyond it the number keeps one, so a short number never
// grows much.
const maxPlainZeros = 21

// canonicalNumber writes valid JSON number n one way for its value, so
// that args written by another encoder deduplicate: 1, 1.0, 1e0 and 10e-1
// are "1", -0 is "0". An integer or decimal already written without
// superfluous zeros or exponent (what encoding/json writes for integers and
// for floats from 1e-6 to 1e21) stays as written; otherwise the exponent
// form is digits without trailing zeros and an exponent ("15e-200"). Its
// cost is linear in n, whatever the exponent.
func canonicalNumber(n string) string {
	neg := strings.HasPrefix(n, "-")
	mant, exps, _ := strings.Cut(strings.ToLower(strings.TrimPrefix(n, "-")), "e")
	intPart, frac, _ := strings.Cut(mant, ".")
	exp := 0
	if exps != "" {
		e, err := strconv.ParseInt(exps, 10, 32)
		if err != nil {
			return n // an exponent beyond any float: left as written
		}
		exp = int(e)
	}
	digits := strings.TrimLeft(intPart+frac, "0")
	exp -= len(frac)
	if digits == "" {
		return "0"
	}
	trimmed := strings.TrimRight(digits, "0")
	exp += len(digits) - len(trimmed)
	digits = trimmed
	var out string
	switch point := len(digits) + exp; {
	case exp >= 0 && exp <= maxPlainZeros:
		out = digits + strings.Repeat("0", exp)
	case exp < 0 && point > 0:
		out = digits[:point] + "." + digits[point:]
	case exp < 0 && -point <= maxPlainZeros:
		out = "0." + strings.Repeat("0", -point) + digits
	default:
		out = digits + "e" + strconv.Itoa(exp)
	}
	if neg {
		return "-" + out
	}
	return out
}

// checkUniqueFields refuses a UniqueOpts.ByFields name that args' type
// can never encode: a typo, or a Go field name where the JSON name
// differs, would count as null in every job and make all jobs of the kind
// duplicates of the first. Types whose JSON names cannot be known from
// their fields (maps, custom MarshalJSON) are not checked. kind is args'
// kind as the enqueue read it (its Kind method is not called again: it
// may panic, or answer differently).
func checkUniqueFields(args JobArgs, kind string, u *UniqueOpts) error {
	if u == nil || len(u.ByFields) == 0 {
		return nil
	}
	names, ok := jsonNames(reflect.TypeOf(args))
	if !ok {
		return nil
	}
	for _, f := range u.ByFields {
		if f != "" && !names[f] {
			known := slices.Sorted(maps.Keys(names))
			return invalid("%s: unique field %q is not a JSON field of %T (its fields: %s)", kind, ledger.Clip(f), args, strings.Join(known, ", "))
		}
	}
	return nil
}

var jsonNamesCache sync.Map // reflect.Type → map[string]bool (nil: not known)

// jsonNames returns the top-level object keys encoding/json can write for
// a value of type t (a superset: conflicting embedded names are all
// listed), and false when they cannot be known from t's fields.
func jsonNames(t reflect.Type) (map[string]bool, bool) {
	if v, ok := jsonNamesCache.Load(t); ok {
		m := v.(map[string]bool)
		return m, m != nil
	}
	m := map[string]bool{}
	if !structNames(t, m, map[reflect.Type]bool{}) {
		m = nil
	}
	jsonNamesCache.Store(t, m)
	return m, m != nil
}

func structNames(t reflect.Type, out map[string]bool, seen map[reflect.Type]bool) bool {
	if t.Implements(marshalerType) || reflect.PointerTo(t).Implements(marshalerType) {
		return false
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
		if t.Implements(marshalerType) {
			return false
		}
	}
	if t.Kind() != reflect.Struct {
		return false
	}
	if seen[t] {
		return true
	}
	seen[t] = true
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				if !structNames(ft, out, seen) {
					return false
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = true
	}
	return true
}
