package ledger

import (
	"context"
	"errors"
	"time"

	"github.com/fencedq/fencedq/internal/durable"
	"github.com/fencedq/fencedq/internal/epoch"
	"github.com/fencedq/fencedq/lease"
)

// Delivery is one delivery of a bridged job: a job that another queue
// (asynq) delivers, run under a fenced attempt in the ledger. See
// Ledger.ClaimDelivery.
type Delivery struct {
	// ID is the job's id in the ledger (the other queue's task id, or an
	// operation id the task carries).
	ID string
	// Kind is the job's kind (the task type).
	Kind string
	// OperationID is the effect's operation id ("" = ID).
	OperationID string
	// Payload is the task's payload, kept for Reconcile.
	Payload []byte
	// MaxRetries bounds the attempts the ledger allows (the other queue's own
	// retry limit).
	MaxRetries int
	// Timeout is the handler's timeout, shown to operators (0 = none given).
	Timeout time.Duration
	// Owner is the process running the attempt.
	Owner string
	// TTL is the attempt's lease in the ledger; renew it with Renew.
	TTL time.Duration
	// Bridge names the delivering queue, stored in the record (Record.Bridge).
	Bridge string
	// TaskQueue and TaskID name the delivering queue's own record of the
	// delivery (asynq's queue and task id), kept with a claimed attempt so
	// that a job whose task that queue lost can be delivered again (see
	// Ledger.Undelivered).
	TaskQueue, TaskID string
	// Headers are the delivering task's headers, kept with the record the
	// first delivery creates (Record.Headers) so that a task that
	// replaces a lost one carries them (see Ledger.Undelivered); nil:
	// none. They must pass ValidateHeaders.
	Headers map[string]string
}

// DeliveryStatus is the ledger's answer to a delivery.
type DeliveryStatus int

// Delivery answers.
const (
	// DeliveryClaimed: an attempt started (see DeliveryClaim.Claimed).
	DeliveryClaimed DeliveryStatus = iota + 1
	// DeliveryFinal: the job is already succeeded, dead or cancelled; the
	// delivery is a duplicate (counted as deduplicated_execute).
	DeliveryFinal
	// DeliveryBusy: another attempt runs the job under a live lease.
	DeliveryBusy
	// DeliveryUnresolved: the job is uncertain or in review; its effect may
	// have happened, so a decision (Resolve) comes first. A running attempt
	// whose lease deadline passed without a commit is made uncertain by the
	// claim itself, as the expirer would.
	DeliveryUnresolved
	// DeliveryConflict: a native job (or another job owning the operation
	// id) has this id; nothing was written.
	DeliveryConflict
	// DeliveryPaused: the queue is paused; nothing was claimed. A job
	// seen for the first time is recorded, pending for its task, so that
	// it can be delivered again should that task be gone by the resume.
	DeliveryPaused
)

// DeliveryClaim is the ledger's answer to one delivery.
type DeliveryClaim struct {
	Status DeliveryStatus
	// Claimed is the attempt when Status is DeliveryClaimed.
	Claimed Claimed
	// Created is true when the delivery created the job's record.
	Created bool
	// State is the job's state (DeliveryFinal, DeliveryUnresolved), or why
	// it conflicts (DeliveryConflict).
	State State
	// Owner and Deadline describe the live attempt (DeliveryBusy).
	Owner    string
	Deadline time.Time
	// ReconcileTries counts the "cannot tell" answers so far
	// (DeliveryUnresolved).
	ReconcileTries int
}

// ClaimDelivery starts a fenced attempt on bridged job d.ID of queue q for
// one delivery by another queue, creating the record on first sight (kind,
// payload, operation id, the delivering task's headers, marked bridged). The attempt is what a native claim
// starts: state running, a new token in the fencing epoch (see Claim),
// owner, lease deadline now + d.TTL, attempt + 1, indexed in running, so
// Renew, Complete, the expirer and the resolver treat it as any job. A
// bridged job is never in the due index: native pools never claim it, and
// when a retry or a re-run puts it back to pending, the next delivery by its
// own queue claims it.
//
// A delivery of another kind than the bridged job of its id records (a
// task of another type naming that job) is refused with an error matching
// ErrInvalid, before anything is written.
//
// With Config.Durability, a call too few replicas acknowledged in time
// returns its answer and an error matching durable.ErrUnacknowledged: an
// attempt it claimed runs on the primary (and perhaps on no replica). The
// caller must not start it; it puts it back (Complete with a Defer
// outcome), or leaves it to lease expiry.
func (l *Ledger) ClaimDelivery(ctx context.Context, q string, d Delivery) (*DeliveryClaim, error) {
	if err := ValidateQueueRef(q); err != nil {
		return nil, err
	}
	if err := ValidateJobID(d.ID); err != nil {
		return nil, err
	}
	if err := ValidateKind(d.Kind); err != nil {
		return nil, err
	}
	if d.OperationID != "" {
		if err := ValidateOperationID(d.OperationID); err != nil {
			return nil, err
		}
	}
	if d.TTL <= 0 {
		return nil, invalid("a delivery needs a lease ttl")
	}
	if d.Bridge == "" {
		return nil, invalid("a delivery needs a bridge name")
	}
	if err := ValidateHeaders(d.Headers); err != nil {
		return nil, err
	}
	var r *reply
	var seq seqReply
	var seen seqSeen
	var unacked error
	err := l.epoch.Mint(ctx, func(st epoch.State) (bool, error) {
		seen = l.watch.before(q)
		v, err := l.lanes.claim.Run(ctx, bridgeClaimScript, l.keys(q), l.prefix(q), d.ID, d.Kind, d.OperationID,
			d.Payload, d.MaxRetries, d.Timeout.Milliseconds(), d.Owner, d.TTL.Milliseconds(), d.Bridge,
			st.ReplID, st.Epoch, d.TaskQueue, d.TaskID, st.Born, encodeHeaders(d.Headers)).Result()
		unacked = nil
		if errors.Is(err, durable.ErrUnacknowledged) && v != nil {
			// The script ran; too few replicas hold it. Its answer is read
			// below so the caller can put a claimed attempt back.
			unacked, err = err, nil
		}
		// The write sequence first (rewind.go), then the answer.
		head := newReply("bridge claim", v, err)
		if err := head.need(bridgeHeader + 1); err != nil {
			return false, err
		}
		seq = seqReply{seq: head.int(0), bumped: head.int(1), enqueued: head.int(2), hist: head.str(3)}
		r = &reply{script: head.script, v: head.v[bridgeHeader:], err: head.err}
		return r.int(0) == 7, nil
	})
	if err != nil {
		return nil, wrap("claim delivery "+d.ID, err)
	}
	out := &DeliveryClaim{Status: DeliveryStatus(r.int(0))}
	switch out.Status {
	case DeliveryClaimed:
		_ = r.need(5)
		op := d.OperationID
		if op == "" {
			op = d.ID
		}
		out.Claimed = Claimed{
			ID: d.ID, Queue: q, Token: lease.Token(r.uint(1)), Deadline: time.UnixMilli(r.int(2)),
			Attempt: int(r.int(3)), Payload: d.Payload, Kind: d.Kind, OperationID: op,
			Timeout: d.Timeout, MaxRetries: d.MaxRetries,
		}
		out.Created = r.int(4) == 1
	case DeliveryFinal, DeliveryConflict:
		_ = r.need(2)
		out.State = State(r.str(1))
	case DeliveryBusy:
		_ = r.need(3)
		out.Owner, out.Deadline = r.str(1), time.UnixMilli(r.int(2))
	case DeliveryUnresolved:
		_ = r.need(3)
		out.State, out.ReconcileTries = State(r.str(1)), int(r.int(2))
	case DeliveryPaused:
	case deliveryOtherKind:
		_ = r.need(2)
		if r.err == nil {
			l.observe(ctx, q, seen, seq)
			return nil, wrap("claim delivery "+d.ID, invalid("job %s is of kind %s, not the delivery's %s: not its delivery",
				ShownID(d.ID), r.str(1), d.Kind))
		}
	default:
		r.fail("delivery status %d", out.Status)
	}
	if r.err != nil {
		return nil, wrap("claim delivery "+d.ID, r.err)
	}
	if unacked != nil {
		return out, wrap("claim delivery "+d.ID, unacked)
	}
	l.observe(ctx, q, seen, seq)
	return out, nil
}

// deliveryOtherKind is the claim's answer when the bridged job of the
// delivery's id is of another kind; ClaimDelivery returns it as an error
// matching ErrInvalid.
const deliveryOtherKind DeliveryStatus = 8

// bridgeHeader is how many values a bridge claim's reply has before its
// answer: the write sequence (seq, seq raised, enqueued, history).
const bridgeHeader = 4
