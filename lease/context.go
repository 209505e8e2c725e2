package lease

import "context"

type ctxKey struct{}

// NewContext returns a copy of ctx carrying l.
func NewContext(ctx context.Context, l *Lease) context.Context {
	return context.WithValue(ctx, ctxKey{}, l)
}

// FromContext returns the lease carried by ctx, if any.
func FromContext(ctx context.Context) (*Lease, bool) {
	l, ok := ctx.Value(ctxKey{}).(*Lease)
	return l, ok && l != nil
}
