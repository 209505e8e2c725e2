package jobs_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

type rangeArgs struct {
	N int `json:"n"`
}

func (rangeArgs) Kind() string { return "range" }

// TestEnqueueRefusesNumbersOutOfRange: numbers and durations that do not fit
// are refused (nothing written), never wrapped or truncated; sub-millisecond
// durations round up to the millisecond the ledger stores.
func TestEnqueueRefusesNumbersOutOfRange(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	for name, opt := range map[string]jobs.Option{
		"max retries past int32": jobs.MaxRetries(math.MaxInt32 + 1),
		"negative max retries":   jobs.MaxRetries(-1),
		"timeout past a year":    jobs.Timeout(366 * 24 * time.Hour),
		"delay past a century":   jobs.Delay(101 * 365 * 24 * time.Hour),
		"run at past a century":  jobs.RunAt(time.Now().Add(101 * 365 * 24 * time.Hour)),
		"negative timeout":       jobs.Timeout(-time.Second),
		"negative delay":         jobs.Delay(-time.Second),
	} {
		if _, err := c.Enqueue(ctx, rangeArgs{N: 1}, opt); !errors.Is(err, jobs.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if _, err := c.EnqueueMany(ctx, []jobs.Params{{Args: rangeArgs{}}, {Args: rangeArgs{}, Options: []jobs.Option{jobs.MaxRetries(math.MaxInt32 + 1)}}}); !errors.Is(err, jobs.ErrInvalid) {
		t.Errorf("EnqueueMany with one bad job: %v", err)
	}
	if keys, _ := rdb.Keys(ctx, ns+":*").Result(); len(keys) != 0 {
		t.Fatalf("refused enqueues wrote %v", keys)
	}
	if err := (jobs.Config{Retention: time.Millisecond}).Validate(); !errors.Is(err, jobs.ErrInvalid) {
		t.Errorf("a 1ms retention: %v", err)
	}

	res, err := c.Enqueue(ctx, rangeArgs{N: 2}, jobs.Timeout(500*time.Microsecond), jobs.MaxRetries(math.MaxInt32))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := c.Inspector().Get(ctx, res.Queue, res.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Timeout != time.Millisecond || rec.MaxRetries != math.MaxInt32 {
		t.Fatalf("stored timeout %v, max retries %d: want 1ms (rounded up) and %d", rec.Timeout, rec.MaxRetries, math.MaxInt32)
	}
}
