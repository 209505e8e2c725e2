package ledger_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
)

// TestCallgrindGroups counts redis-server's instructions per job (callgrind:
// deterministic on a shared machine, unlike time) for enqueue (Insert, 100
// per call), claim (50 per call, every job claimed before any completes)
// and completion (50 per call) of 10 000 jobs: ungrouped, in one group, in
// 1 000 groups. It runs only against a redis-server under callgrind, named
// by FENCEDQ_CALLGRIND as address,pid,dump directory:
//
//	valgrind --tool=callgrind --callgrind-out-file=/tmp/cg/cg.%p \
//	  redis-server --port 16399 --save '' --appendonly no --hz 1 &
//	FENCEDQ_CALLGRIND=127.0.0.1:16399,<pid>,/tmp/cg go test -run CallgrindGroups -v ./internal/ledger/
func TestCallgrindGroups(t *testing.T) {
	rdb, dump := callgrindServer(t, time.Minute)
	ctx := context.Background()
	const n = 10_000
	for _, groups := range []int{0, 1, 1000} {
		rdb.FlushAll(ctx)
		l := ledger.New(rdb, ledger.Config{Namespace: "cg"})
		js := make([]*ledger.NewJob, n)
		for i := range js {
			js[i] = &ledger.NewJob{ID: fmt.Sprintf("job-%d", i), Kind: "k", Queue: "q",
				Payload: []byte(`{}`), Display: []byte(`{}`), MaxRetries: 1}
			if groups > 0 {
				js[i].Group = fmt.Sprintf("g%d", i%groups)
			}
		}
		if _, err := l.Claim(ctx, "q", "cg", time.Minute, 1); err != nil { // loads the scripts
			t.Fatal(err)
		}
		dump()
		for i := 0; i < n; i += 100 {
			if _, err := l.Insert(ctx, js[i:i+100]); err != nil {
				t.Fatal(err)
			}
		}
		enqueue := dump()
		var claimed []ledger.Claimed
		for len(claimed) < n {
			r, err := l.Claim(ctx, "q", "cg", time.Minute, 50)
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Jobs) == 0 {
				t.Fatalf("nothing claimed after %d", len(claimed))
			}
			claimed = append(claimed, r.Jobs...)
		}
		claim := dump()
		for i := 0; i < n; i += 50 {
			cs := make([]ledger.Completion, 0, 50)
			for _, j := range claimed[i:min(i+50, n)] {
				cs = append(cs, ledger.Completion{ID: j.ID, Token: j.Token, Outcome: ledger.Outcome{To: ledger.Succeeded}})
			}
			if _, err := l.Complete(ctx, "q", cs); err != nil {
				t.Fatal(err)
			}
		}
		complete := dump()
		t.Logf("groups=%d: instructions per job: enqueue %.0f, claim %.0f, completion %.0f",
			groups, enqueue/n, claim/n, complete/n)
	}
}
