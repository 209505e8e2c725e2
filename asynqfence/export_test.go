package asynqfence

import "github.com/hibiken/asynq"

// KindLabel is the metric label the bridge gives a delivery of t to next.
func (b *Bridge) KindLabel(t *asynq.Task, next asynq.Handler) string { return b.kindLabel(t, next) }

// ForgetLayouts drops the partition layouts the bridge read, as
// jobs.PartitionRefresh passing does.
func (b *Bridge) ForgetLayouts() {
	b.layouts.mu.Lock()
	b.layouts.m = nil
	b.layouts.mu.Unlock()
}
