package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hibiken/asynq"

	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
)

// LeaderResource is the lease resource the reconcilers of one namespace
// compete for; only its holder acts.
const LeaderResource = "reconciler"

// StatusKey returns the hash where the acting reconciler publishes its
// status (leader, token, last_scan in unix ms, expired, resolved).
func StatusKey(namespace string) string { return namespace + ":reconciler:status" }

// reconciler resolves jobs left running past their lease and uncertain
// jobs. One per pool; only the namespace's leader acts, and every ledger
// write it makes carries its leader token, so a reconciler paused past its
// leadership cannot act.
type reconciler struct {
	p         *Pool
	log       *slog.Logger
	inspector *asynq.Inspector
	scans     int
	expired   int64
	resolved  int64
	// suspects holds, by asynq task id, when a pending job's delivery was
	// first seen active with no live asynq server working on it.
	suspects map[string]time.Time
}

// asynq servers write their state, including the task of every busy
// worker, every asynqHeartbeat (fixed in asynq) with a TTL of twice that.
const asynqHeartbeat = 5 * time.Second

// A delivery is orphaned when asynq shows it active while no live server
// lists it (a dead server's entry lapses within two heartbeats). It is
// replaced once that is still so after orphanConfirm, by when a live worker
// that had just taken the task lists it. asynq alone would wait for its
// 30 s task lease and its one-minute recoverer.
const orphanConfirm = asynqHeartbeat + time.Second

// maxActiveScan bounds how many active deliveries of a queue one pass
// looks at; a queue has at most as many as its workers' total concurrency.
const maxActiveScan = 1000

func (p *Pool) newReconciler() *reconciler {
	return &reconciler{p: p, log: p.log.With("component", "reconciler"),
		inspector: asynq.NewInspectorFromRedisClient(p.rdb), suspects: map[string]time.Time{}}
}

func (r *reconciler) run(ctx context.Context) {
	interval := r.p.cfg.Reconciler.Interval
	ttl := max(r.p.cfg.LeaseTTL, 3*interval)
	var session *lease.Session
	var leaderLease lease.Lease
	defer func() {
		if session != nil {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			_ = session.Release(rctx)
			cancel()
		}
		r.p.metrics.Leader.Set(0)
	}()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		if session != nil && session.Err() != nil {
			r.log.Warn("reconciler leadership lost", "cause", session.Err())
			session = nil
			r.p.metrics.Leader.Set(0)
		}
		if session == nil {
			l, err := r.p.leases.Acquire(ctx, LeaderResource, r.p.cfg.WorkerID, ttl)
			if err == nil {
				session, err = r.p.leases.KeepAlive(ctx, l, ttl)
				if err == nil {
					leaderLease = *l
					r.p.metrics.Leader.Set(1)
					r.log.Info("reconciler is the leader", "token", l.Token.String())
				}
			} else if !errors.Is(err, lease.ErrHeld) && ctx.Err() == nil {
				r.log.Warn("reconciler leader election failed", "error", err)
			}
		}
		if session != nil {
			if err := r.scan(session.Context(), leaderLease.Token); err != nil && session.Context().Err() == nil {
				r.p.metrics.ReconcileErrors.Inc()
				r.log.Warn("reconciler scan failed", "error", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// scan does one pass over every queue.
func (r *reconciler) scan(ctx context.Context, leader lease.Token) error {
	now, err := r.p.ledger.ServerTime(ctx)
	if err != nil {
		return err
	}
	queues, err := r.p.ledger.Queues(ctx)
	if err != nil {
		return err
	}
	r.scans++
	for _, q := range queues {
		// Fence the queue with this leader's token before acting on it.
		if err := r.p.ledger.Lead(ctx, q, leader); err != nil {
			return err
		}
		if err := r.expire(ctx, q, now, leader); err != nil {
			return err
		}
		if err := r.resolveDue(ctx, q, now, leader); err != nil {
			return err
		}
		if r.scans%10 == 1 {
			r.redispatch(ctx, q, now, leader)
		}
		if r.scans%60 == 1 {
			if _, err := r.p.ledger.Prune(ctx, q, now); err != nil {
				return err
			}
		}
		counts, err := r.p.ledger.Counts(ctx, q)
		if err != nil {
			return err
		}
		for s, n := range counts {
			r.p.metrics.Jobs.WithLabelValues(q, string(s)).Set(float64(n))
		}
	}
	r.p.metrics.LastScan.Set(float64(time.Now().Unix()))
	return r.p.rdb.HSet(ctx, StatusKey(r.p.cfg.Namespace),
		"leader", r.p.cfg.WorkerID, "token", leader.String(), "last_scan", now.UnixMilli(),
		"expired", r.expired, "resolved", r.resolved).Err()
}

// expire moves running jobs whose lease deadline passed to uncertain.
func (r *reconciler) expire(ctx context.Context, q string, now time.Time, leader lease.Token) error {
	ids, err := r.p.ledger.DueIDs(ctx, q, jobs.Running, now, 100)
	if err != nil {
		return err
	}
	for _, id := range ids {
		moved, err := r.p.ledger.Expire(ctx, q, id, leader)
		if err != nil {
			return err
		}
		if moved {
			r.expired++
			r.p.metrics.Decisions.WithLabelValues(q, "expired").Inc()
			r.log.Warn("lease expired without commit: job is uncertain", "queue", q, "job_id", id)
		}
	}
	return nil
}

// resolveDue asks what happened to each uncertain job due for a look.
func (r *reconciler) resolveDue(ctx context.Context, q string, now time.Time, leader lease.Token) error {
	ids, err := r.p.ledger.DueIDs(ctx, q, jobs.Uncertain, now, 50)
	if err != nil {
		return err
	}
	for _, id := range ids {
		rec, err := r.p.ledger.Get(ctx, q, id)
		if errors.Is(err, jobs.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if rec.State != jobs.Uncertain {
			continue
		}
		if err := r.resolve(ctx, rec, leader); err != nil {
			if errors.Is(err, jobs.ErrStale) {
				return err // no longer the leader
			}
			r.p.metrics.ReconcileErrors.Inc()
			r.log.Warn("reconcile decision failed", "queue", q, "job_id", id, "error", err)
		}
	}
	return nil
}

// verdict asks the kind's Reconcile, else the effect log; asked is false
// when there is nothing to ask.
func (r *reconciler) verdict(ctx context.Context, rec *jobs.Record) (v jobs.Verdict, evidence string, asked bool) {
	h := r.p.handlerFor(rec.Kind)
	if h != nil && h.reconcile != nil {
		base := jobs.Job[jobs.JobArgs]{
			ID: rec.ID, Kind: rec.Kind, Queue: rec.Queue, OperationID: rec.OperationID, Attempt: rec.Attempts,
			MaxRetries: rec.MaxRetries, Resource: rec.LeaseResource(), Token: rec.Token, Owner: rec.Owner,
		}
		cctx, cancel := context.WithTimeout(ctx, r.p.cfg.HandlerTimeout)
		v, err := h.reconcile(cctx, base, rec.Payload)
		cancel()
		if err != nil {
			return jobs.CannotTell, "Reconcile failed: " + err.Error(), true
		}
		return v, "Reconcile answered " + v.String(), true
	}
	if el := r.p.cfg.Reconciler.EffectLog; el != nil {
		applied, ok, err := el.Applied(ctx, rec.OperationID)
		switch {
		case err != nil:
			return jobs.CannotTell, "effect log unavailable: " + err.Error(), true
		case ok:
			return jobs.Applied, fmt.Sprintf("effect log: operation applied with token %d by %s", applied.Token, applied.Owner), true
		default:
			return jobs.NotApplied, "effect log: operation not applied", true
		}
	}
	return jobs.CannotTell, "kind has no Reconcile method and the pool has no effect log", false
}

func (r *reconciler) resolve(ctx context.Context, rec *jobs.Record, leader lease.Token) error {
	v, evidence, asked := r.verdict(ctx, rec)
	res := jobs.Resolution{From: []jobs.State{jobs.Uncertain}, Actor: "reconciler:" + r.p.cfg.WorkerID, Note: evidence, Leader: leader}
	result := v.String()
	switch v {
	case jobs.Applied:
		res.Decision = jobs.DecideSucceeded
	case jobs.NotApplied:
		res.Decision = jobs.DecideRerun
	default:
		if !asked || rec.ReconcileTries+1 >= r.p.cfg.Reconciler.MaxTries {
			res.Decision = jobs.DecideReview
			result = "review"
		} else {
			res.Decision = jobs.DecideLater
			res.NextTry = time.Now().Add(r.p.cfg.Reconciler.Interval << min(rec.ReconcileTries+1, 10))
		}
	}
	oldTask := rec.Task
	state, _, err := r.p.ledger.Resolve(ctx, rec, res)
	if err != nil {
		return err
	}
	r.resolved++
	r.p.metrics.Decisions.WithLabelValues(rec.Queue, result).Inc()
	r.log.Info("reconciled", "queue", rec.Queue, "job_id", rec.ID, "operation_id", rec.OperationID,
		"kind", rec.Kind, "token", rec.Token.String(), "decision", res.Decision, "state", state, "evidence", evidence)
	if res.Decision != jobs.DecideRerun {
		return nil
	}
	// Drop the orphaned delivery (a crashed worker's task); an active one
	// cannot be deleted, and its late delivery is acknowledged as a duplicate.
	_ = r.inspector.DeleteTask(r.p.ledger.AsynqQueue(rec.Queue), oldTask)
	fresh, err := r.p.ledger.Get(ctx, rec.Queue, rec.ID)
	if err != nil {
		return err
	}
	return r.p.client.Dispatch(ctx, fresh)
}

// redispatch repairs the deliveries of pending jobs. It re-enqueues, under
// the job's task id, a delivery that is
//   - missing, for more than a minute past the job's run time (a crash
//     between the ledger write and the asynq enqueue, or a lost re-run
//     dispatch);
//   - archived: asynq's retry count also counts failures before the claim
//     (Redis errors, its recoverer), so asynq can give up on a task while
//     the ledger, which decides, still has retries left.
//
// And it replaces orphaned deliveries (see replaceOrphans).
func (r *reconciler) redispatch(ctx context.Context, q string, now time.Time, leader lease.Token) {
	aq := r.p.ledger.AsynqQueue(q)
	r.replaceOrphans(ctx, q, aq, now, leader)
	ids, err := r.p.ledger.DueIDs(ctx, q, jobs.Pending, now.Add(-time.Minute), 50)
	if err != nil {
		return
	}
	for _, id := range ids {
		rec, err := r.p.ledger.Get(ctx, q, id)
		if err != nil || rec.State != jobs.Pending {
			continue
		}
		ti, err := r.inspector.GetTaskInfo(aq, rec.Task)
		switch {
		case errors.Is(err, asynq.ErrTaskNotFound) || errors.Is(err, asynq.ErrQueueNotFound):
			r.dispatchAgain(ctx, rec, "pending job had no delivery")
		case err == nil && ti.State == asynq.TaskStateArchived && r.inspector.DeleteTask(aq, rec.Task) == nil:
			r.dispatchAgain(ctx, rec, "pending job's delivery was archived by asynq")
		}
	}
}

// replaceOrphans looks at the queue's active deliveries (as many as its
// workers are busy, whatever the backlog) for ones no live asynq server
// works on: a worker died after asynq handed it the job and before the
// ledger claim (while waiting for a busy resource's lease, say). A pending
// job whose current delivery stays orphaned for orphanConfirm gets a fresh
// delivery through a "rerun" resolution. Should the orphan be delivered
// again later, its claim finds the job taken and it is acknowledged.
func (r *reconciler) replaceOrphans(ctx context.Context, q, aq string, now time.Time, leader lease.Token) {
	active, err := r.inspector.ListActiveTasks(aq, asynq.PageSize(maxActiveScan))
	if err != nil || len(active) == 0 {
		return
	}
	live, err := r.liveTasks()
	if err != nil {
		r.log.Warn("cannot list asynq servers", "error", err)
		return
	}
	for _, ti := range active {
		if live[ti.ID] {
			delete(r.suspects, ti.ID)
			continue
		}
		first, seen := r.suspects[ti.ID]
		if !seen {
			r.suspects[ti.ID] = now
			continue
		}
		if now.Sub(first) < orphanConfirm {
			continue
		}
		delete(r.suspects, ti.ID)
		var env jobs.Envelope
		if json.Unmarshal(ti.Payload, &env) != nil || env.JobID == "" {
			continue
		}
		rec, err := r.p.ledger.Get(ctx, q, env.JobID)
		if err != nil || rec.State != jobs.Pending || rec.Task != ti.ID {
			continue // not this job's current delivery: its claim will be acknowledged
		}
		r.replace(ctx, rec, leader, first)
	}
	for task, first := range r.suspects {
		if now.Sub(first) > 10*time.Minute {
			delete(r.suspects, task)
		}
	}
}

// dispatchAgain enqueues a pending job's delivery again under its task id.
func (r *reconciler) dispatchAgain(ctx context.Context, rec *jobs.Record, why string) {
	if err := r.p.client.Dispatch(ctx, rec); err == nil {
		r.log.Warn(why+"; dispatched again", "queue", rec.Queue, "job_id", rec.ID, "task", rec.Task)
	}
}

// liveTasks returns the ids of the tasks live asynq servers report working on.
func (r *reconciler) liveTasks() (map[string]bool, error) {
	servers, err := r.inspector.Servers()
	if err != nil {
		return nil, err
	}
	live := map[string]bool{}
	for _, s := range servers {
		for _, w := range s.ActiveWorkers {
			live[w.TaskID] = true
		}
	}
	return live, nil
}

// replace gives a pending job whose delivery is orphaned a fresh one.
func (r *reconciler) replace(ctx context.Context, rec *jobs.Record, leader lease.Token, since time.Time) {
	note := fmt.Sprintf("delivery %s orphaned: active in asynq since before %s, and no live asynq server works on it",
		rec.Task, since.UTC().Format(time.RFC3339))
	res := jobs.Resolution{From: []jobs.State{jobs.Pending}, Decision: jobs.DecideRerun,
		Actor: "reconciler:" + r.p.cfg.WorkerID, Note: note, Leader: leader}
	if _, _, err := r.p.ledger.Resolve(ctx, rec, res); err != nil {
		r.log.Warn("replacing an orphaned delivery failed", "queue", rec.Queue, "job_id", rec.ID, "error", err)
		return
	}
	r.p.metrics.Decisions.WithLabelValues(rec.Queue, "redelivered").Inc()
	fresh, err := r.p.ledger.Get(ctx, rec.Queue, rec.ID)
	if err == nil {
		err = r.p.client.Dispatch(ctx, fresh)
	}
	if err != nil {
		r.log.Warn("replacing an orphaned delivery failed", "queue", rec.Queue, "job_id", rec.ID, "error", err)
		return
	}
	r.log.Warn("orphaned delivery replaced", "queue", rec.Queue, "job_id", rec.ID,
		"operation_id", rec.OperationID, "kind", rec.Kind, "old_task", rec.Task, "task", fresh.Task)
}
