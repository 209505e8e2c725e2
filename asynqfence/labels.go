package asynqfence

import (
	"reflect"
	"sync"
	"sync/atomic"

	"github.com/hibiken/asynq"

	"github.com/fencedq/fencedq/internal/ledger"
)

// Label values the bridge uses in place of user-given ones.
const (
	// UnknownKind labels the metrics of a task type with no handler of its
	// own, as native pools label kinds no worker is registered for.
	UnknownKind = "unknown"
	// invalidQueue labels a delivery refused for its queue name.
	invalidQueue = "invalid"
)

// MaxKindLabels bounds the task types one bridge labels by name when it
// cannot see which pattern handles them (a plain handler under
// asynq.ServeMux.Use may serve a prefix pattern, hence any number of
// types); later types are labelled UnknownKind.
const MaxKindLabels = 100

// kindLabeler is implemented by the handlers Handler returns: their kind
// is their worker's, whatever the task type.
type kindLabeler interface{ kindLabel() string }

// notFound is asynq's handler for a task type no pattern matches, which a
// ServeMux wraps in its middleware like any handler.
var notFound = reflect.ValueOf(asynq.NotFound).Pointer()

// kinds counts the task types labelled by name (see MaxKindLabels).
type kinds struct {
	seen sync.Map // task type -> struct{}
	n    atomic.Int64
}

// kindLabel returns t's kind as a metric label, from a bounded set: the
// kind of a Handler's worker; the pattern that handles t when next is a
// ServeMux (the type itself for an exact pattern); UnknownKind when no
// handler matches t; otherwise the type, for the first MaxKindLabels
// types, and UnknownKind after.
func (b *Bridge) kindLabel(t *asynq.Task, next asynq.Handler) string {
	switch x := next.(type) {
	case *asynq.ServeMux:
		if _, pattern := x.Handler(t); pattern != "" {
			return pattern
		}
		return UnknownKind
	case kindLabeler:
		return x.kindLabel()
	case asynq.HandlerFunc:
		if reflect.ValueOf(x).Pointer() == notFound {
			return UnknownKind
		}
	}
	kind := t.Type()
	if _, ok := b.kinds.seen.Load(kind); ok {
		return kind
	}
	if b.kinds.n.Add(1) > MaxKindLabels {
		b.kinds.n.Add(-1)
		return UnknownKind
	}
	if _, loaded := b.kinds.seen.LoadOrStore(kind, struct{}{}); loaded {
		b.kinds.n.Add(-1)
	}
	return kind
}

// queueLabel is q as a metric label: "invalid" for a name the ledger
// refuses, never the user's text; a partition's queue for a partition.
func queueLabel(q string) string {
	if ledger.ValidateQueueRef(q) != nil {
		return invalidQueue
	}
	return ledger.Logical(q)
}
