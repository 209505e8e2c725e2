package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/jobs"
)

// TestPartitionsSetRecordsWhoAndWhy: partitions --set needs --actor (or
// FENCEDQ_ACTOR) and takes --note; a refused change writes nothing, and
// the command shows the queue's layout changes, in text and JSON.
func TestPartitionsSetRecordsWhoAndWhy(t *testing.T) {
	e := newOperatorEnv(t)
	ctx := context.Background()
	for _, bad := range [][]string{{}, {"--actor", " "}, {"--actor", "alice", "--note", "bell\x07"}} {
		args := append([]string{"partitions", "--queue", "orders", "--set", "3"}, bad...)
		if code, _, errOut := e.cli(args...); code != 2 {
			t.Fatalf("%v: exit %d %q", bad, code, errOut)
		}
	}
	if lay, err := e.client.Inspector().Partitions(ctx, "orders"); err != nil || lay.Count != 1 {
		t.Fatalf("a refused change wrote the layout: %+v, %v", lay, err)
	}
	t.Setenv("FENCEDQ_ACTOR", "alice")
	code, out, errOut := e.cli("partitions", "--queue", "orders", "--set", "3", "--note", "month end")
	if code != 0 || !strings.Contains(out, "layout changes, newest first:") {
		t.Fatalf("partitions --set 3: %d %q %q", code, out, errOut)
	}
	row := strings.Fields(out[strings.LastIndex(out, "\n  20"):])
	if len(row) != 6 || row[1] != "1" || row[2] != "3" || row[3] != "operator:alice" || row[4]+" "+row[5] != "month end" {
		t.Fatalf("change row %q in %q", row, out)
	}
	code, out, _ = e.cli("partitions", "--queue", "orders", "--set", "1", "--actor", "bob", "--json")
	var got struct {
		Count   int                    `json:"count"`
		Changes []jobs.PartitionChange `json:"changes"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &got) != nil || got.Count != 1 || len(got.Changes) != 2 ||
		got.Changes[0].Actor != "operator:bob" || got.Changes[0].From != 3 || got.Changes[0].To != 1 || got.Changes[1].Note != "month end" {
		t.Fatalf("partitions --json: %d %q", code, out)
	}
}

// TestSchedulesRemoveRecordsWhoAndWhy: schedules --remove needs --actor
// and takes --note; schedules lists the removals after the schedules, and
// --removed lists them alone.
func TestSchedulesRemoveRecordsWhoAndWhy(t *testing.T) {
	e := newOperatorEnv(t)
	ctx := context.Background()
	if _, err := e.ledger.RegisterSchedule(ctx, 7, jobs.ScheduleSpec{ID: "nightly", Schedule: "@every 1h0m0s",
		TimeZone: "UTC", Kind: "transfer", Queue: "default", CatchUp: "latest"}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][]string{{}, {"--actor", "bob", "--note", "nul\x00"}, {"--actor", "bob", "--removed"}} {
		args := append([]string{"schedules", "--id", "nightly", "--remove"}, bad...)
		if code, _, errOut := e.cli(args...); code != 2 {
			t.Fatalf("%v: exit %d %q", bad, code, errOut)
		}
	}
	if _, err := e.client.Inspector().Schedule(ctx, "nightly"); err != nil {
		t.Fatalf("a refused removal removed the schedule: %v", err)
	}
	if code, out, errOut := e.cli("schedules", "--id", "nightly", "--remove", "--actor", "bob", "--note", "report retired"); code != 0 || !strings.Contains(out, "removed schedule nightly") {
		t.Fatalf("--remove: %d %q %q", code, out, errOut)
	}
	code, out, _ := e.cli("schedules")
	i := strings.Index(out, "removed schedules, newest first (1):")
	if code != 0 || i < 0 {
		t.Fatalf("schedules: %d %q", code, out)
	}
	row := strings.Fields(strings.Split(out[i:], "\n")[2])
	if len(row) != 7 || row[0] != "nightly" || row[1] != "transfer" || row[2] != "default" || row[4] != "operator:bob" || row[5]+" "+row[6] != "report retired" {
		t.Fatalf("removal row %q in %q", row, out)
	}
	code, out, _ = e.cli("schedules", "--removed", "--json")
	var rs []jobs.ScheduleRemoval
	if code != 0 || json.Unmarshal([]byte(out), &rs) != nil || len(rs) != 1 || rs[0].ID != "nightly" || rs[0].Note != "report retired" || rs[0].At.IsZero() {
		t.Fatalf("schedules --removed --json: %d %q", code, out)
	}
}
