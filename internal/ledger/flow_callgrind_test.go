package ledger_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/jobs"
)

// TestCallgrindFlowCost counts redis-server's instructions (callgrind) and
// commands per job of fencedq-bench's limits section, driven as a pool of
// concurrency 50 drives it (claims of 50, each batch completed in one call
// before the next claim): plain jobs, every job under one concurrency limit
// that never binds (max jobs.MaxFlowMax) and every job under one rate that
// never binds (jobs.MaxFlowMax per second). Claims and completions are
// counted; enqueues are not. It runs only against a redis-server under
// callgrind, named by FENCEDQ_CALLGRIND (see TestCallgrindHotKey):
//
//	FENCEDQ_CALLGRIND=127.0.0.1:16399,<pid>,/tmp/cg go test -run CallgrindFlowCost -v ./internal/ledger/
//
// FENCEDQ_FLOW_JOBS sets the number of jobs per variant (2 000).
func TestCallgrindFlowCost(t *testing.T) {
	rdb, dump := callgrindServer(t, 5*time.Minute)
	ctx := context.Background()
	n := 2000
	if s := os.Getenv("FENCEDQ_FLOW_JOBS"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	variants := []struct {
		name string
		flow *ledger.Flow
	}{
		{"plain", nil},
		{"limit", &ledger.Flow{LimitKey: "bench", LimitMax: jobs.MaxFlowMax}},
		{"rate", &ledger.Flow{RateKey: "bench", RateMax: jobs.MaxFlowMax, RatePer: time.Second}},
	}
	var plain float64
	for _, v := range variants {
		rdb.FlushAll(ctx)
		l := ledger.New(rdb, ledger.Config{Namespace: "cg"})
		js := make([]*ledger.NewJob, n)
		for i := range js {
			js[i] = &ledger.NewJob{ID: fmt.Sprintf("j-%d", i), Kind: "k", Queue: "q", Payload: []byte(`{}`), MaxRetries: 1, Flow: v.flow}
		}
		for i := 0; i < len(js); i += 500 {
			if _, err := l.Insert(ctx, js[i:min(i+500, len(js))]); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := l.Claim(ctx, "q", "cg", time.Minute, 0); err != nil { // loads the library
			t.Fatal(err)
		}
		dump()
		before := serverCommands(t, rdb)
		for left := n; left > 0; {
			r, err := l.Claim(ctx, "q", "cg", time.Minute, 50)
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Jobs) == 0 {
				t.Fatalf("%s: nothing claimed with %d left (dropped %v)", v.name, left, r.Dropped)
			}
			cs := make([]ledger.Completion, len(r.Jobs))
			for i, j := range r.Jobs {
				cs[i] = ledger.Completion{ID: j.ID, Token: j.Token, Outcome: ledger.Outcome{To: ledger.Succeeded}}
			}
			out, err := l.Complete(ctx, "q", cs)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range out {
				if !c.Applied {
					t.Fatalf("%s: completion not applied: %+v", v.name, c)
				}
			}
			left -= len(r.Jobs)
		}
		ir := dump() / float64(n)
		cmds := float64(serverCommands(t, rdb)-before) / float64(n)
		if v.flow == nil {
			plain = ir
		}
		t.Logf("%s: per job %.0f instructions (%+.1f %% of plain), %.2f commands", v.name, ir, 100*(ir/plain-1), cmds)
	}
}
