package main

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// grafanaFile is the Grafana dashboard shipped with the deployment files.
const grafanaFile = "../../deploy/grafana/fencedq.json"

type grafanaPanel struct {
	Type        string `json:"type"`
	Title       string `json:"title"`
	Description string `json:"description"`
	Datasource  *struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	GridPos struct{ H, W, X, Y int } `json:"gridPos"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
}

// TestGrafanaDashboardUsesRegisteredMetrics checks deploy/grafana/fencedq.json
// against the metrics a worker pool and an enqueue client really register,
// and fencedq_ledger_jobs, which fencedq dashboard serves: every query names
// defined metrics with their labels and values (checkExpr), every panel has
// a title, a description and a place on the grid, and every registered
// metric is on some panel.
func TestGrafanaDashboardUsesRegisteredMetrics(t *testing.T) {
	defs := workerMetrics(t)
	descs := make(chan *prometheus.Desc, 2) // fencedq_ledger_jobs, then fencedq_ledger_unreachable
	newLedgerCollector(nil).Describe(descs)
	m := descParts.FindStringSubmatch((<-descs).String())
	if m == nil {
		t.Fatal("cannot read the ledger collector's description")
	}
	defs[m[1]] = metric{kind: "Gauge", labels: strings.Split(m[2], ",")}

	raw, err := os.ReadFile(grafanaFile)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Title      string         `json:"title"`
		UID        string         `json:"uid"`
		Panels     []grafanaPanel `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s: %v", grafanaFile, err)
	}
	if d.Title == "" || d.UID == "" || len(d.Panels) < 10 {
		t.Fatalf("dashboard: title %q, uid %q, %d panels", d.Title, d.UID, len(d.Panels))
	}
	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
		if v.Type == "query" {
			q, _ := json.Marshal(v.Query)
			checkExpr(t, defs, "variable "+v.Name, string(q), map[string]bool{})
		}
	}
	if !vars["datasource"] || !vars["queue"] {
		t.Errorf("variables %v: want datasource and queue", vars)
	}
	used := map[string]bool{}
	titles := map[string]bool{}
	for _, p := range d.Panels {
		where := p.Type + " " + p.Title
		if p.Title == "" || titles[p.Title] {
			t.Errorf("%s: panels need a unique title", where)
		}
		titles[p.Title] = true
		if p.GridPos.W <= 0 || p.GridPos.H <= 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("%s: grid position %+v", where, p.GridPos)
		}
		if p.Type == "row" {
			continue
		}
		if strings.TrimSpace(p.Description) == "" || p.Datasource == nil || p.Datasource.UID != "${datasource}" || len(p.Targets) == 0 {
			t.Errorf("%s: needs a description, the ${datasource} variable and a query", where)
		}
		for _, tg := range p.Targets {
			if strings.Count(tg.Expr, "(") != strings.Count(tg.Expr, ")") || strings.Count(tg.Expr, "{") != strings.Count(tg.Expr, "}") {
				t.Errorf("%s: unbalanced brackets in %q", where, tg.Expr)
			}
			checkExpr(t, defs, where, tg.Expr, used)
		}
	}
	var unused []string
	for name := range defs {
		if !used[name] {
			unused = append(unused, name)
		}
	}
	slices.Sort(unused)
	if len(unused) > 0 {
		t.Errorf("registered metrics on no panel: %v", unused)
	}
}
