package asynqfence

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/hibiken/asynq"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/jobs"
)

// redeliverBatch bounds the jobs Redeliver reads at once per queue and
// state (it reads them all, a page at a time).
const redeliverBatch = 200

// Redeliver gives every unfinished bridged job whose asynq task is gone a
// new task, and returns how many it enqueued.
//
// A bridged job progresses only when asynq delivers its task: a job left
// pending (a retry, a re-run), running (an attempt that ended without a
// commit) or uncertain waits for that delivery. The task can be gone while
// the job is not finished: a Redis failover to a replica that missed the
// last writes rewinds asynq's record of it, asynq archives it after its
// retries (each finding the job busy or uncertain), or an operator deletes
// it. Redeliver looks up, for each such job (running ones only once their
// ledger lease has passed), the task that delivered it last; when asynq
// holds no such task, or holds it completed or archived, it enqueues a new
// task of the job's kind and payload in the same asynq queue, with
// JobHeader naming the job, the job's retry limit and timeout, the headers
// of the job's first task (a trace context, a tenant id: the ledger keeps
// them, as many as fit a job's header limits), and the headers and
// retention of the task it replaces when asynq still holds that one. Its delivery is an
// ordinary one: a pending job is claimed, an expired or uncertain one is
// reconciled (Reconcile or the effect log) before anything runs, and a job
// finished meanwhile is acknowledged as a duplicate. Nothing is applied
// twice and nothing is dropped.
//
// The new task's id is the job's id, "~", and a count of the job's
// redeliveries, recorded in the ledger first (the job's history and the
// queue's events say so, counted as "redelivered"); of several bridges that
// find the same job at once, only one enqueues. Jobs of a paused queue, in
// review, or claimed before the ledger recorded their task are left alone.
// Run calls Redeliver periodically.
func (b *Bridge) Redeliver(ctx context.Context) (int, error) {
	if b.unmade() {
		return 0, errUnmade
	}
	qs, err := b.ledger.Queues(ctx)
	if err != nil {
		return 0, fmt.Errorf("asynqfence: redeliver: %w", err)
	}
	insp := asynq.NewInspectorFromRedisClient(b.opts.Asynq)
	client := asynq.NewClientFromRedisClient(b.opts.Asynq)
	n := 0
	var errs []error
	for _, q := range qs {
		if p, err := b.ledger.Paused(ctx, q); err != nil || p != nil {
			if err != nil {
				errs = append(errs, err)
			}
			continue
		}
		// Page by page: however many jobs whose task asynq holds come
		// first, every job is looked at.
		for offset := 0; ctx.Err() == nil; offset += redeliverBatch {
			us, more, err := b.ledger.Undelivered(ctx, q, offset, redeliverBatch)
			if err != nil {
				errs = append(errs, err)
				break
			}
			for _, u := range us {
				if u.Bridge != BridgeName || u.TaskQueue == "" || u.TaskID == "" {
					continue
				}
				sent, err := b.redeliver(ctx, insp, client, q, u)
				if err != nil {
					errs = append(errs, err)
				}
				if sent {
					n++
				}
			}
			if !more {
				break
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return n, fmt.Errorf("asynqfence: redeliver: %w", err)
	}
	return n, nil
}

// redeliver enqueues a new task for job u of ledger queue q when asynq no
// longer holds a live task for it.
func (b *Bridge) redeliver(ctx context.Context, insp *asynq.Inspector, client *asynq.Client, q string, u ledger.Undelivered) (bool, error) {
	info, err := insp.GetTaskInfo(u.TaskQueue, u.TaskID)
	switch {
	case errors.Is(err, asynq.ErrTaskNotFound) || errors.Is(err, asynq.ErrQueueNotFound):
	case err != nil:
		return false, err
	case info.State != asynq.TaskStateCompleted && info.State != asynq.TaskStateArchived:
		return false, nil // asynq delivers it (again)
	}
	task, ok, err := b.ledger.Redeliver(ctx, q, u, u.TaskQueue, u.ID)
	if err != nil || !ok {
		return false, err
	}
	log := b.log.With("queue", q, "kind", u.Kind, "job_id", u.ID, "task_id", task, "job_state", u.State)
	// The headers of the job's first task, which the ledger kept (a task
	// a failover rewound or an operator deleted is gone, and its headers
	// with it), then those of the task it replaces, when asynq still
	// holds it.
	headers := maps.Clone(u.Headers)
	if headers == nil {
		headers = map[string]string{}
	}
	if info != nil {
		maps.Copy(headers, info.Headers)
	}
	headers[JobHeader] = u.ID
	t := asynq.NewTaskWithHeaders(u.Kind, u.Payload, headers)
	opts := []asynq.Option{asynq.TaskID(task), asynq.Queue(u.TaskQueue), asynq.MaxRetry(u.MaxRetries)}
	if u.Timeout > 0 {
		opts = append(opts, asynq.Timeout(u.Timeout))
	}
	if info != nil && info.Retention > 0 {
		opts = append(opts, asynq.Retention(info.Retention)) // as the task it replaces
	}
	_, err = client.EnqueueContext(ctx, t, opts...)
	if err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) {
		// The ledger names a task asynq does not hold: the next pass
		// finds it gone and tries again.
		log.Warn("could not enqueue a new asynq task for a job whose task is gone", "error", err)
		return false, err
	}
	log.Warn("the job's asynq task is gone while the job is unfinished (a Redis failover, retries used up); delivered again",
		"last_task_id", u.TaskID)
	return true, nil
}

// Run calls Redeliver every Options.RedeliverInterval until ctx ends, and
// returns ctx's error. A failed pass is logged; the next one tries again.
// A nil or zero Bridge (one New did not make) returns ErrOptions at once.
func (b *Bridge) Run(ctx context.Context) error {
	if b.unmade() {
		return errUnmade
	}
	t := time.NewTicker(b.opts.RedeliverInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		if _, err := b.Redeliver(ctx); err != nil && ctx.Err() == nil {
			b.log.Warn("looking for jobs whose asynq task is gone failed", "error", err)
		}
	}
}

// keptHeaders returns the headers of a delivering task the ledger keeps
// with the job it creates, for a task that replaces a lost one: all but
// JobHeader, in key order, as many as fit a job's header limits
// (jobs.ValidateHeaders); nil for none.
func keptHeaders(h map[string]string) map[string]string {
	var out map[string]string
	for _, k := range slices.Sorted(maps.Keys(h)) {
		if k == JobHeader {
			continue
		}
		if out == nil {
			out = make(map[string]string, len(h))
		}
		out[k] = h[k]
		if jobs.ValidateHeaders(out) != nil {
			delete(out, k)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
