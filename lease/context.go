package lease

import "context"

type ctxKey struct{}

// NewContext returns a copy of ctx carrying l.
func NewContext(ctx context.Context, l *Lease) context.Context {
	return context.WithValue(ctx, ctxKey{}, l)
}

// FromContext returns the lease carried by ctx, if any. In a worker pool's
// handler it is the attempt's: Resource, Owner and Token are its fence, and
// Deadline is the job's lease deadline as the claim set it (by Redis's
// clock). The pool's renewals extend the lease in Redis, not this copy:
// the handler's context, cancelled before the lease's deadline when a
// renewal fails, is what tells that the lease was lost. Read it; do not
// modify it.
func FromContext(ctx context.Context) (*Lease, bool) {
	l, ok := ctx.Value(ctxKey{}).(*Lease)
	return l, ok && l != nil
}
