package main

import (
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// readmeFile is the repository's README.
const readmeFile = "../../README.md"

var (
	readmeMetricName = regexp.MustCompile("`([a-z_]+)`")
	readmeWord       = regexp.MustCompile(`[a-z_]+`)
)

// TestReadmeMetricsTable checks README.md's metrics table against the
// metrics a worker pool and an enqueue client register (and the ledger
// gauge fencedq dashboard serves): every metric it names exists with the
// labels it lists, and every registered metric is listed.
func TestReadmeMetricsTable(t *testing.T) {
	defs := workerMetrics(t)
	defs["fencedq_ledger_jobs"] = metric{kind: "Gauge", labels: []string{"queue", "state"}} // cmd/fencedq's own collector
	defs["fencedq_ledger_unreachable"] = metric{kind: "Gauge", labels: []string{"queue"}}
	raw, err := os.ReadFile(readmeFile)
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(raw), "\n| metric | labels |\n|---|---|\n")
	if !ok {
		t.Fatal("README.md has no metrics table")
	}
	listed := map[string]bool{}
	for _, row := range strings.Split(table, "\n") {
		if !strings.HasPrefix(row, "|") {
			break
		}
		cells := strings.Split(row, "|")
		if len(cells) < 4 {
			t.Fatalf("malformed row %q", row)
		}
		words := readmeWord.FindAllString(cells[2], -1)
		for _, m := range readmeMetricName.FindAllStringSubmatch(cells[1], -1) {
			name := "fencedq_" + m[1]
			def, ok := defs[name]
			if !ok {
				t.Errorf("README lists %s, which nothing registers", name)
				continue
			}
			listed[name] = true
			for _, l := range def.labels {
				if !slices.Contains(words, l) {
					t.Errorf("README lists %s with labels %q; it has label %s", name, strings.TrimSpace(cells[2]), l)
				}
			}
		}
	}
	var missing []string
	for name := range defs {
		if !listed[name] {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("README's metrics table lacks %s", strings.Join(missing, ", "))
	}
}
