package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/jobs"
)

// TestQueuesNamesAQueueNoLivePoolServes: a job enqueued under a queue name
// with a typo (jobs.Queue("defualt") while the pools serve "default") is
// accepted and waits for ever; `fencedq queues` now names such a queue,
// holding pending jobs that no live pool serves, and says what to check
// (--json marks it "unserved"), leaving the served queues unmarked.
func TestQueuesNamesAQueueNoLivePoolServes(t *testing.T) {
	e := newOperatorEnv(t)
	ctx := context.Background()
	e.enqueue()
	e.enqueue(jobs.Queue("defualt"))
	if err := e.ledger.Heartbeat(ctx, jobs.PoolInfo{ID: "pool-a", Host: "h", PID: 1, Queues: map[string]int{"default": 1},
		Concurrency: 4, Version: "v9", Started: time.Now()}, time.Minute); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := e.cli("queues")
	if code != 0 || !strings.Contains(out, "queue defualt has 1 pending job(s) and no live pool serves it") ||
		!strings.Contains(out, "Config.Queues") || strings.Contains(out, "queue default has") {
		t.Fatalf("queues: %d %q %q; want the unserved queue named, the served one not", code, out, errOut)
	}
	code, out, _ = e.cli("queues", "--json")
	var qs []struct {
		Queue    string `json:"queue"`
		Unserved bool   `json:"unserved"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &qs) != nil || len(qs) != 2 {
		t.Fatalf("queues --json: %d %q", code, out)
	}
	for _, q := range qs {
		if q.Unserved != (q.Queue == "defualt") {
			t.Errorf("queues --json: %+v", q)
		}
	}
}
