package dashboard_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/jobs"
)

// TestLimitsNamePartitions: on a partitioned queue each partition holds
// its own permits of a key its jobs share only there (jobs given partition
// keys), so the limits page lists the key once per partition: each entry
// names its partition, whose jobs its holders are, instead of two entries
// alike but for their counts (read as one key over its max).
func TestLimitsNamePartitions(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	_, err := f.client.SetPartitions(ctx, "parts", 2, "bob", "split")
	must(t, err)
	for i := range 10 {
		for range 2 {
			f.enqueue(echoArgs{N: i}, jobs.Queue("parts"), jobs.PartitionKey(fmt.Sprintf("acct-%d", i)), jobs.Limit("export", 1))
		}
	}
	parts := ledger.PartitionNames("parts", 2)
	holders := map[string]string{} // job id -> its partition
	for _, p := range parts {
		r, err := f.ledger.Claim(ctx, p, "w", time.Minute, 100)
		must(t, err)
		if len(r.Jobs) != 1 {
			t.Fatalf("claimed %d jobs of partition %s, want 1 (limit 1)", len(r.Jobs), p)
		}
		holders[r.Jobs[0].ID] = p
	}
	h := f.handler(dashboard.Options{})
	var lim struct {
		Queues []struct {
			Queue  string `json:"queue"`
			Limits []struct {
				Queue   string   `json:"queue"`
				Key     string   `json:"key"`
				Holders []string `json:"holders"`
			} `json:"limits"`
		} `json:"queues"`
	}
	body := getJSON(t, h, "/api/limits", &lim)
	if len(lim.Queues) != 1 || lim.Queues[0].Queue != "parts" || len(lim.Queues[0].Limits) != 2 {
		t.Fatalf("limits: %s; want key export in each of the 2 partitions of queue parts", body)
	}
	seen := map[string]bool{}
	for _, l := range lim.Queues[0].Limits {
		if l.Key != "export" || len(l.Holders) != 1 || !strings.HasPrefix(l.Queue, "parts#") || holders[l.Holders[0]] != l.Queue || seen[l.Queue] {
			t.Fatalf("limits: %s; want each entry to name its partition, which holds its holder (holders: %v)", body, holders)
		}
		seen[l.Queue] = true
	}
}
