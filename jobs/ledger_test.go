package jobs_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

type noteArgs struct {
	Text string `json:"text"`
}

func (noteArgs) Kind() string { return "note" }

func (a noteArgs) Validate() error {
	if a.Text == "" {
		return errors.New("text is required")
	}
	return nil
}

// stateTable walks the ledger through DESIGN.md's state machine rows.
func stateTable(t *testing.T, rdb redis.UniversalClient) {
	ctx := context.Background()
	ns := redistest.Namespace(t)
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns, Retention: time.Hour})
	defer c.Close()
	l := c.Ledger()
	const q = "default"

	// none -> pending; invalid -> nothing; known op -> unchanged.
	before, _ := redistest.CountKeys(ctx, rdb)
	if _, err := c.Enqueue(ctx, noteArgs{}); !errors.Is(err, jobs.ErrInvalid) {
		t.Fatalf("invalid: %v", err)
	}
	if after, _ := redistest.CountKeys(ctx, rdb); after != before {
		t.Fatalf("invalid enqueue wrote %d keys", after-before)
	}
	res, err := c.Enqueue(ctx, noteArgs{Text: "a"}, jobs.OperationID("op"), jobs.MaxRetries(1), jobs.Delay(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	dup, err := c.Enqueue(ctx, noteArgs{Text: "b"}, jobs.OperationID("op"))
	if err != nil || !dup.Deduplicated || dup.JobID != res.JobID {
		t.Fatalf("dedup: %+v %v", dup, err)
	}
	id := res.JobID
	rec, _ := l.Get(ctx, q, id)
	if rec.State != jobs.Pending || rec.OperationID != "op" {
		t.Fatalf("after enqueue: %+v", rec)
	}

	// pending -> running with a minted token.
	cl, err := l.Claim(ctx, q, id, "w1", time.Second, 0, "t1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Claim(ctx, q, id, "w2", time.Second, 0, "t1"); !errors.Is(err, jobs.ErrWrongState) {
		t.Fatalf("second claim: %v", err)
	}
	// renew by T extends; by another token is stale.
	if _, err := l.Renew(ctx, q, id, cl.Token, time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Renew(ctx, q, id, cl.Token-1, time.Second); !errors.Is(err, jobs.ErrStale) {
		t.Fatalf("stale renew: %v", err)
	}
	// retryable error -> pending; then attempt 2 -> retries exhausted -> dead.
	st, err := l.Commit(ctx, q, id, "op", cl.Token, jobs.Outcome{To: jobs.Pending, Error: "e1", RetryAt: time.Now()})
	if err != nil || st != jobs.Pending {
		t.Fatalf("retry commit: %s %v", st, err)
	}
	if _, err := l.Commit(ctx, q, id, "op", cl.Token, jobs.Outcome{To: jobs.Succeeded}); !errors.Is(err, jobs.ErrStale) {
		t.Fatalf("commit after retry by the same token: %v", err)
	}
	cl2, err := l.Claim(ctx, q, id, "w2", time.Second, 0, "t1")
	if err != nil || cl2.Token <= cl.Token || cl2.Attempt != 2 {
		t.Fatalf("second claim: %+v %v", cl2, err)
	}
	st, _ = l.Commit(ctx, q, id, "op", cl2.Token, jobs.Outcome{To: jobs.Pending, Error: "e2"})
	if st != jobs.Dead {
		t.Fatalf("retries exhausted: %s", st)
	}
	// dead -> redelivery deduplicated.
	if _, err := l.Claim(ctx, q, id, "w3", time.Second, 0, "t1"); err == nil {
		t.Fatal("claimed a dead job")
	}
	stats, _ := l.Stats(ctx, q)
	if stats["deduplicated_execute"] != 1 || stats["deduplicated_enqueue"] != 1 || stats["fenced_commit"] != 1 || stats["fenced_renew"] != 1 {
		t.Fatalf("stats %v", stats)
	}
	// finished jobs get the retention TTL.
	if ttl := rdb.PTTL(ctx, l.JobKey(q, id)).Val(); ttl <= 0 || ttl > time.Hour {
		t.Fatalf("retention ttl %v", ttl)
	}

	// running -> lease expired -> uncertain -> cannot tell -> review -> operator rerun.
	res2, _ := c.Enqueue(ctx, noteArgs{Text: "c"}, jobs.Delay(time.Hour))
	cl3, _ := l.Claim(ctx, q, res2.JobID, "w1", 50*time.Millisecond, 0, "t2")
	if moved, err := l.Expire(ctx, q, res2.JobID, 100); err != nil || moved {
		t.Fatalf("expired a live attempt: %v %v", moved, err)
	}
	time.Sleep(80 * time.Millisecond)
	if moved, err := l.Expire(ctx, q, res2.JobID, 100); err != nil || !moved {
		t.Fatalf("expire: %v %v", moved, err)
	}
	if _, err := l.Commit(ctx, q, res2.JobID, "", cl3.Token, jobs.Outcome{To: jobs.Succeeded}); !errors.Is(err, jobs.ErrStale) {
		t.Fatalf("commit after expiry: %v", err)
	}
	r2, _ := l.Get(ctx, q, res2.JobID)
	if r2.State != jobs.Uncertain || r2.Reason != "lease expired without commit" {
		t.Fatalf("after expire: %+v", r2)
	}
	if _, _, err := l.Resolve(ctx, r2, jobs.Resolution{Decision: jobs.DecideReview, Actor: "reconciler", Note: "cannot tell", Leader: 99}); !errors.Is(err, jobs.ErrStale) {
		t.Fatalf("older reconciler token accepted: %v", err)
	}
	if st, _, err := l.Resolve(ctx, r2, jobs.Resolution{Decision: jobs.DecideReview, Actor: "reconciler", Note: "cannot tell", Leader: 100}); err != nil || st != jobs.Review {
		t.Fatalf("to review: %s %v", st, err)
	}
	r2, err = c.Resolve(ctx, q, res2.JobID, jobs.DecideRerun, "alice", "not charged")
	if err != nil || r2.State != jobs.Pending || r2.Runs != 1 || r2.Task != res2.JobID+"~r1" {
		t.Fatalf("operator rerun: %+v %v", r2, err)
	}
	cl4, err := l.Claim(ctx, q, res2.JobID, "w2", time.Second, 0, r2.Task)
	if err != nil || cl4.Token <= cl3.Token {
		t.Fatalf("claim after rerun: %+v %v", cl4, err)
	}
	if st, err := l.Commit(ctx, q, res2.JobID, r2.OperationID, cl4.Token, jobs.Outcome{To: jobs.Succeeded}); err != nil || st != jobs.Succeeded {
		t.Fatalf("final commit: %s %v", st, err)
	}
	counts, _ := l.Counts(ctx, q)
	if counts[jobs.Succeeded] != 1 || counts[jobs.Dead] != 1 || counts[jobs.Running] != 0 || counts[jobs.Review] != 0 {
		t.Fatalf("counts %v", counts)
	}
	found, err := l.FindByOperation(ctx, "op")
	if err != nil || found.ID != id {
		t.Fatalf("find by operation: %v", err)
	}
	if found, err := l.Find(ctx, res2.JobID); err != nil || found.State != jobs.Succeeded {
		t.Fatalf("find: %v", err)
	}
	h, _ := l.History(ctx, q, res2.JobID)
	events := ""
	for _, e := range h {
		events += e.Event + ","
	}
	if events != "enqueued,attempt,end,fenced,resolve,resolve,attempt,end," {
		t.Fatalf("history %s", events)
	}
}

func TestLedgerStateMachine(t *testing.T) {
	stateTable(t, redistest.Start(t, redistest.Options{}).Client())
}

func TestLedgerStateMachineOnCluster(t *testing.T) {
	stateTable(t, redistest.StartCluster(t).Client())
}
