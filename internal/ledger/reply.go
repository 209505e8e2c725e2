package ledger

import (
	"errors"
	"fmt"
	"strconv"
)

// ErrReply means a script's reply did not have the shape its decoder
// expects (a Redis or script version mismatch); nothing is assumed from it.
var ErrReply = errors.New("jobs: malformed script reply")

// reply decodes one script reply. Each accessor checks the position and the
// type; the first problem is kept in err and later calls return zero values,
// so a decoder reads straight through and checks err once.
type reply struct {
	script string
	v      []any
	err    error
}

func newReply(script string, v any, err error) *reply {
	r := &reply{script: script}
	if err != nil {
		r.err = err
		return r
	}
	s, ok := v.([]any)
	if !ok {
		r.fail("reply is %T, not an array", v)
	}
	r.v = s
	return r
}

func (r *reply) fail(format string, a ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s: %s", ErrReply, r.script, fmt.Sprintf(format, a...))
	}
}

func (r *reply) len() int { return len(r.v) }

func (r *reply) at(i int) any {
	if r.err != nil {
		return nil
	}
	if i < 0 || i >= len(r.v) {
		r.fail("no value at %d (length %d)", i, len(r.v))
		return nil
	}
	return r.v[i]
}

// int reads an integer reply (or a decimal string).
func (r *reply) int(i int) int64 {
	switch x := r.at(i).(type) {
	case int64:
		return x
	case string:
		n, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			r.fail("value %d: %q is not an integer", i, x)
		}
		return n
	case nil:
		return 0
	default:
		r.fail("value %d is %T, not an integer", i, x)
		return 0
	}
}

// uint reads a token (a decimal string or an integer).
func (r *reply) uint(i int) uint64 {
	switch x := r.at(i).(type) {
	case string:
		n, err := strconv.ParseUint(x, 10, 64)
		if err != nil {
			r.fail("value %d: %q is not a token", i, x)
		}
		return n
	case int64:
		if x < 0 {
			r.fail("value %d: negative token", i)
		}
		return uint64(x)
	case nil:
		return 0
	default:
		r.fail("value %d is %T, not a token", i, x)
		return 0
	}
}

// str reads a string reply.
func (r *reply) str(i int) string {
	switch x := r.at(i).(type) {
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	case nil:
		return ""
	default:
		r.fail("value %d is %T, not a string", i, x)
		return ""
	}
}

// holder reads a {job id, op field} pair (enqueue_unique.lua's holder of
// a unique key) as the job's id and operation id (opOf).
func (r *reply) holder(i int) (id, op string) {
	p, ok := r.at(i).([]any)
	if r.err != nil {
		return "", ""
	}
	if ok && len(p) == 2 {
		id, ok = p[0].(string)
		field, fok := p[1].(string)
		if ok && fok && id != "" {
			return id, opOf(id, field)
		}
	}
	r.fail("value %d is not a job id and operation id", i)
	return "", ""
}

// need fails unless the reply has at least n values, and returns err.
func (r *reply) need(n int) error {
	if r.err == nil && len(r.v) < n {
		r.fail("want at least %d values, got %d", n, len(r.v))
	}
	return r.err
}

func wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("jobs: %s: %w", what, foreignQueueKey(err))
}
