package ledger_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
)

// TestCallgrindHotKey counts redis-server's instructions (callgrind) and
// commands (INFO commandstats) per other job for fencedq-bench's hot-key
// case, driven as a pool of concurrency 10 drives it (claims of 10, each
// batch completed in one call before the next claim): 1 000 jobs on keys
// of their own (limit 1 each) behind 100 000 jobs on one key limited to 1,
// until the 1 000 are done, against 1 000 unlimited jobs alone. Claims and
// completions are counted; enqueues are not. It runs only against a
// redis-server under callgrind, named by FENCEDQ_CALLGRIND as
// address,pid,dump directory (see TestCallgrindGroups):
//
//	valgrind --tool=callgrind --callgrind-out-file=/tmp/cg/cg.%p \
//	  redis-server --port 16399 --save '' --appendonly no --hz 1 &
//	FENCEDQ_CALLGRIND=127.0.0.1:16399,<pid>,/tmp/cg go test -run CallgrindHotKey -v ./internal/ledger/
//
// FENCEDQ_HOT sets the number of hot jobs (0: the others' limits alone);
// FENCEDQ_CALLGRIND_KEEP=<name> keeps the dumps as <name>.<n> for
// callgrind_annotate.
func TestCallgrindHotKey(t *testing.T) {
	rdb, dump := callgrindServer(t, 5*time.Minute)
	ctx := context.Background()
	commands := func() map[string]int64 {
		t.Helper()
		s, err := rdb.Info(ctx, "commandstats").Result()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int64{}
		for _, line := range strings.Split(s, "\n") {
			k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
			if !ok || !strings.HasPrefix(k, "cmdstat_") {
				continue
			}
			calls, _, _ := strings.Cut(strings.TrimPrefix(v, "calls="), ",")
			out[strings.TrimPrefix(k, "cmdstat_")], _ = strconv.ParseInt(calls, 10, 64)
		}
		return out
	}
	hot, others := 100_000, 1_000
	if s := os.Getenv("FENCEDQ_HOT"); s != "" {
		hot, _ = strconv.Atoi(s)
	}
	for _, beside := range []bool{false, true} {
		rdb.FlushAll(ctx)
		l := ledger.New(rdb, ledger.Config{Namespace: "cg"})
		var js []*ledger.NewJob
		if beside {
			for i := range hot {
				js = append(js, &ledger.NewJob{ID: fmt.Sprintf("hot-%d", i), Kind: "k", Queue: "q", Payload: []byte(`{}`),
					MaxRetries: 1, Flow: &ledger.Flow{LimitKey: "hot", LimitMax: 1}})
			}
		}
		for i := range others {
			j := &ledger.NewJob{ID: fmt.Sprintf("other-%d", i), Kind: "k", Queue: "q", Payload: []byte(`{}`), MaxRetries: 1}
			if beside {
				j.Flow = &ledger.Flow{LimitKey: fmt.Sprintf("other:%d", i), LimitMax: 1}
			}
			js = append(js, j)
		}
		for i := 0; i < len(js); i += 500 {
			if _, err := l.Insert(ctx, js[i:min(i+500, len(js))]); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := l.Claim(ctx, "q", "cg", time.Minute, 0); err != nil { // loads the script
			t.Fatal(err)
		}
		dump()
		before := commands()
		left, claims, hotRan := others, 0, 0
		for left > 0 {
			r, err := l.Claim(ctx, "q", "cg", time.Minute, 10)
			if err != nil {
				t.Fatal(err)
			}
			claims++
			if len(r.Jobs) == 0 {
				t.Fatalf("nothing claimed with %d others left", left)
			}
			cs := make([]ledger.Completion, len(r.Jobs))
			for i, j := range r.Jobs {
				cs[i] = ledger.Completion{ID: j.ID, Token: j.Token, Outcome: ledger.Outcome{To: ledger.Succeeded}}
				if strings.HasPrefix(j.ID, "hot-") {
					hotRan++
				} else {
					left--
				}
			}
			if _, err := l.Complete(ctx, "q", cs); err != nil {
				t.Fatal(err)
			}
		}
		ir := dump()
		after := commands()
		var cmds int64
		var by []string
		for k, v := range after {
			if d := v - before[k]; d > 0 && k != "info" {
				cmds += d
				by = append(by, fmt.Sprintf("%s %.2f", k, float64(d)/float64(others)))
			}
		}
		t.Logf("beside %d hot jobs=%v: per other job %.0f instructions, %.2f commands, %.3f claims; %d hot jobs ran; %s",
			hot, beside, ir/float64(others), float64(cmds)/float64(others), float64(claims)/float64(others), hotRan, strings.Join(by, ", "))
	}
}
