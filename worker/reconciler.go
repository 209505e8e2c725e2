package worker

import "context"

type reconciler struct{ p *Pool }

func (p *Pool) newReconciler() *reconciler { return &reconciler{p: p} }

func (r *reconciler) run(ctx context.Context) { <-ctx.Done() }
