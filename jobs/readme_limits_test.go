package jobs_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/jobs"
)

// TestReadmeStatesTheLimits checks that README.md states each documented
// limit with the value the code enforces, so the two cannot drift apart.
func TestReadmeStatesTheLimits(t *testing.T) {
	raw, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(string(raw)), " ")
	kib := func(n int) string { return fmt.Sprintf("%d KiB", n>>10) }
	for _, want := range []string{
		fmt.Sprintf("a namespace or queue is 1–%d / 1–%d letters", jobs.MaxNamespaceLen, jobs.MaxQueueLen),
		fmt.Sprintf("a kind 1–%d bytes", jobs.MaxKindLen),
		fmt.Sprintf("a resource 1–%d bytes", jobs.MaxResourceLen),
		fmt.Sprintf("an operation id 1–%d bytes", jobs.MaxOperationIDLen),
		fmt.Sprintf("a limit or rate key up to %d bytes", jobs.MaxFlowKeyLen),
		"its max 1–" + spaced(jobs.MaxFlowMax),
		fmt.Sprintf("period 1 ms to %d h", int(jobs.MaxRatePeriod/time.Hour)),
		fmt.Sprintf("schedule id 1–%d letters", jobs.MaxScheduleIDLen),
		fmt.Sprintf("the operator's name is 1–%d bytes", jobs.MaxActorLen),
		fmt.Sprintf("a note at most %d bytes", jobs.MaxNoteLen),
		fmt.Sprintf("at most %d (keys of letters, digits and `._-` up to %d bytes, values up to %s), %s in all",
			jobs.MaxHeaders, jobs.MaxHeaderKeyLen, kib(jobs.MaxHeaderValueLen), kib(jobs.MaxHeadersBytes)),
		fmt.Sprintf("A handler can record a result (JSON, at most %s)", kib(jobs.MaxOutput)),
		fmt.Sprintf("(at most %d bytes, no control characters; never a secret)", jobs.MaxProgressNote),
		fmt.Sprintf("Group names: 1-%d letters", jobs.MaxGroupLen),
		fmt.Sprintf("P partitions (1 to %d)", jobs.MaxPartitions),
		"`MaxRetries` 0–2³¹−1 (`jobs.MaxMaxRetries`)",
		"(`jobs.Config.RecentEnqueues`, default " + spaced(jobs.DefaultRecentEnqueues) + ")",
		fmt.Sprintf("keeps its newest %d removals", jobs.MaxScheduleRemovals),
		fmt.Sprintf("the newest %d changes of each queue are kept", jobs.MaxLayoutChanges),
	} {
		if !strings.Contains(text, want) {
			t.Errorf("README.md does not say %q", want)
		}
	}
	if jobs.MaxMaxRetries != 1<<31-1 {
		t.Errorf("MaxMaxRetries is %d, README says 2³¹−1", jobs.MaxMaxRetries)
	}
}

// spaced writes n with its thousands set apart by spaces, as the README
// does: 1 000 000.
func spaced(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + " " + s[i:]
	}
	return s
}
