package worker

import (
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestReadmeConfigTable checks README.md's worker pool configuration table
// against Config: every field has a row (StrictPriority is told in Queues'),
// and each default the table states is the one the code applies.
func TestReadmeConfigTable(t *testing.T) {
	raw, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(raw), "\n| field | default | meaning |\n|---|---|---|\n")
	if !ok {
		t.Fatal("README.md has no configuration table")
	}
	rows := map[string]string{}
	for _, row := range strings.Split(table, "\n") {
		if !strings.HasPrefix(row, "|") {
			break
		}
		cells := strings.Split(row, "|")
		rows[strings.Trim(cells[1], " `")] = strings.TrimSpace(cells[2])
	}
	var fields []string
	for _, f := range reflect.VisibleFields(reflect.TypeFor[Config]()) {
		if f.Name != "Maintenance" && f.Name != "StrictPriority" {
			fields = append(fields, f.Name)
		}
	}
	for _, f := range reflect.VisibleFields(reflect.TypeFor[MaintenanceConfig]()) {
		fields = append(fields, "Maintenance."+f.Name)
	}
	for _, f := range fields {
		if _, ok := rows[f]; !ok {
			t.Errorf("README's configuration table has no row for %s", f)
		}
	}
	for f := range rows {
		if !slices.Contains(fields, f) {
			t.Errorf("README's configuration table has a row for %s, which Config does not have", f)
		}
	}
	short := func(d time.Duration) string {
		s := d.String() // "1m0s": the README writes "1m"
		if strings.HasSuffix(s, "m0s") {
			s = strings.TrimSuffix(s, "0s")
		}
		if strings.HasSuffix(s, "h0m") {
			s = strings.TrimSuffix(s, "0m")
		}
		return s
	}
	c := Config{}.withDefaults()
	for f, want := range map[string]string{
		"Concurrency":                   fmt.Sprint(c.Concurrency),
		"LeaseTTL":                      short(c.LeaseTTL),
		"HandlerTimeout":                short(c.HandlerTimeout),
		"ShutdownTimeout":               short(c.ShutdownTimeout),
		"LeaseWait":                     short(c.LeaseWait),
		"FetchBatch":                    fmt.Sprint(c.FetchBatch),
		"FetchPollInterval":             short(c.FetchPollInterval),
		"CompleteBatch":                 fmt.Sprint(c.CompleteBatch),
		"UnknownKindDefers":             fmt.Sprint(c.UnknownKindDefers),
		"Maintenance.Interval":          short(c.Maintenance.Interval),
		"Maintenance.MaxReconcileTries": fmt.Sprint(c.Maintenance.MaxReconcileTries),
		"Maintenance.PruneInterval":     short(c.Maintenance.PruneInterval),
		"Maintenance.UncommittedGrace":  short(c.Maintenance.UncommittedGrace),
	} {
		if rows[f] != want {
			t.Errorf("README gives %s the default %q; the code applies %s", f, rows[f], want)
		}
	}
}
