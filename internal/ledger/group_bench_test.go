package ledger_test

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
)

// BenchmarkClaimGroups drains 20 000 pending jobs by claims of 50 on a
// private Redis, ungrouped, in one group and in 1 000 groups, and reports
// Redis's time in the claim script per job (commandstats: robust to a
// loaded machine's scheduling, unlike wall time). Each iteration is one
// drain from an emptied server.
//
//	go test -run '^$' -bench ClaimGroups -benchtime 7x ./internal/ledger/
func BenchmarkClaimGroups(b *testing.B) {
	srv := redistest.Start(b, redistest.Options{})
	rdb := srv.Client()
	ctx := context.Background()
	scripts := regexp.MustCompile(`cmdstat_(?:evalsha|fcall):calls=\d+,usec=(\d+)`)
	const n, batch = 20_000, 50
	for _, groups := range []int{0, 1, 1000} {
		b.Run(fmt.Sprintf("groups=%d", groups), func(b *testing.B) {
			var us float64
			for it := 0; it < b.N; it++ {
				b.StopTimer()
				rdb.FlushAll(ctx)
				l := ledger.New(rdb, ledger.Config{Namespace: "bench"})
				js := make([]*ledger.NewJob, n)
				for i := range js {
					js[i] = &ledger.NewJob{ID: fmt.Sprintf("job-%d", i), Kind: "k", Queue: "q",
						Payload: []byte(`{}`), Display: []byte(`{}`), MaxRetries: 1}
					if groups > 0 {
						js[i].Group = fmt.Sprintf("g%d", i%groups)
					}
				}
				if _, err := l.Insert(ctx, js); err != nil {
					b.Fatal(err)
				}
				rdb.ConfigResetStat(ctx)
				b.StartTimer()
				for got := 0; got < n; {
					r, err := l.Claim(ctx, "q", "bench", time.Minute, batch)
					if err != nil {
						b.Fatal(err)
					}
					if len(r.Jobs) == 0 {
						b.Fatalf("nothing claimed after %d", got)
					}
					got += len(r.Jobs)
				}
				for _, m := range scripts.FindAllStringSubmatch(rdb.Info(ctx, "commandstats").Val(), -1) {
					v, _ := strconv.ParseFloat(m[1], 64)
					us += v
				}
			}
			b.ReportMetric(us/float64(b.N*n), "script-µs/job")
		})
	}
}
