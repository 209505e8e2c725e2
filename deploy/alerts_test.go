package deploy_test

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/fencedq/fencedq/jobs"
)

// metric is one series family defined in worker/metrics.go.
type metric struct {
	kind   string // Counter, Gauge, Histogram, Summary
	labels []string
}

// metricSources are where the worker's series are defined (they moved from
// worker/metrics.go to internal/metrics, shared with the enqueue client).
var metricSources = []string{"../internal/metrics", "../worker"}

// workerMetrics reads the metric names, kinds and label names from the
// source of the packages in metricSources: every
// prometheus.<Kind>Opts{Name: "..."} literal, with the []string{...} labels
// passed next to it. It also returns the source text, for label values.
func workerMetrics(t *testing.T) (map[string]metric, string) {
	t.Helper()
	fset := token.NewFileSet()
	var files []*ast.File
	var text strings.Builder
	for _, dir := range metricSources {
		paths, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		for _, p := range paths {
			if strings.HasSuffix(p, "_test.go") {
				continue
			}
			src, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			f, err := parser.ParseFile(fset, p, src, 0)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
			text.Write(src)
		}
	}
	out := map[string]metric{}
	optsKind := func(e ast.Expr) (string, string, bool) {
		lit, ok := e.(*ast.CompositeLit)
		if !ok {
			return "", "", false
		}
		sel, ok := lit.Type.(*ast.SelectorExpr)
		if !ok || !strings.HasSuffix(sel.Sel.Name, "Opts") {
			return "", "", false
		}
		if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "prometheus" {
			return "", "", false
		}
		for _, el := range lit.Elts {
			kv, ok := el.(*ast.KeyValueExpr)
			if !ok {
				continue
			}
			if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Name" {
				if bl, ok := kv.Value.(*ast.BasicLit); ok && bl.Kind == token.STRING {
					name, _ := strconv.Unquote(bl.Value)
					return strings.TrimSuffix(sel.Sel.Name, "Opts"), name, true
				}
			}
		}
		return "", "", false
	}
	inspect := func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || len(call.Args) == 0 {
			return true
		}
		kind, name, ok := optsKind(call.Args[0])
		if !ok {
			return true
		}
		m := metric{kind: kind}
		if len(call.Args) > 1 {
			if lit, ok := call.Args[1].(*ast.CompositeLit); ok {
				for _, el := range lit.Elts {
					if bl, ok := el.(*ast.BasicLit); ok && bl.Kind == token.STRING {
						l, _ := strconv.Unquote(bl.Value)
						m.labels = append(m.labels, l)
					}
				}
			}
		}
		out[name] = m
		return true
	}
	for _, f := range files {
		ast.Inspect(f, inspect)
	}
	if len(out) < 10 || out["fencedq_jobs"].kind != "Gauge" || !slices.Contains(out["fencedq_jobs"].labels, "state") {
		t.Fatalf("could not read the metrics from %v: %+v", metricSources, out)
	}
	return out, text.String()
}

type rulesFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

var (
	metricRef  = regexp.MustCompile(`\bfencedq_[A-Za-z0-9_]+`)
	selector   = regexp.MustCompile(`\b(fencedq_[A-Za-z0-9_]+)\{([^}]*)\}`)
	matcher    = regexp.MustCompile(`^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*"([^"]*)"\s*$`)
	grouping   = regexp.MustCompile(`\b(?:by|without|on|ignoring)\s*\(([^)]*)\)`)
	rateOf     = regexp.MustCompile(`\b(?:rate|irate|increase)\(\s*(fencedq_[A-Za-z0-9_]+)`)
	alertName  = regexp.MustCompile(`^Fencedq[A-Z][A-Za-z]+$`)
	severities = []string{"critical", "warning", "info"}
)

// resolve maps a series name in an expression to its family: histograms
// expose _bucket, _sum and _count series.
func resolve(defs map[string]metric, name string) (string, metric, bool) {
	if m, ok := defs[name]; ok {
		return name, m, true
	}
	for _, suf := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suf); ok {
			if m, ok := defs[base]; ok && (m.kind == "Histogram" || m.kind == "Summary") {
				if suf == "_bucket" {
					m.labels = append(slices.Clone(m.labels), "le")
				}
				return base, m, true
			}
		}
	}
	return "", metric{}, false
}

// TestAlertRulesUseWorkerMetrics checks deploy/prometheus/alerts.yml
// against the metrics the worker defines (see metricSources): every metric an expression names is defined,
// every label it selects or groups by exists on those metrics, label values
// are ones the worker sets, rate() is only taken of counters, and every
// rule is well-formed.
func TestAlertRulesUseWorkerMetrics(t *testing.T) {
	defs, metricsSrc := workerMetrics(t)
	raw, err := os.ReadFile("prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var rf rulesFile
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&rf); err != nil {
		t.Fatalf("alerts.yml: %v", err)
	}
	if len(rf.Groups) == 0 {
		t.Fatal("no rule groups")
	}
	validValue := func(label, v string) bool {
		if label == "state" || label == "outcome" {
			return jobs.State(v).Valid()
		}
		return regexp.MustCompile(`\b` + regexp.QuoteMeta(v) + `\b`).MatchString(metricsSrc)
	}
	seen := map[string]bool{}
	used := map[string]bool{}
	var exprs []string
	for _, g := range rf.Groups {
		if g.Name == "" || len(g.Rules) == 0 {
			t.Errorf("group %q: needs a name and rules", g.Name)
		}
		for _, r := range g.Rules {
			where := g.Name + "/" + r.Alert
			if !alertName.MatchString(r.Alert) || seen[r.Alert] {
				t.Errorf("%s: alert name must be unique and look like FencedqSomething", where)
			}
			seen[r.Alert] = true
			if d, err := time.ParseDuration(r.For); err != nil || d <= 0 {
				t.Errorf("%s: for %q is not a positive duration", where, r.For)
			}
			if !slices.Contains(severities, r.Labels["severity"]) {
				t.Errorf("%s: severity %q, want one of %v", where, r.Labels["severity"], severities)
			}
			if strings.TrimSpace(r.Annotations["summary"]) == "" || strings.TrimSpace(r.Annotations["description"]) == "" {
				t.Errorf("%s: needs a summary and a description", where)
			}
			expr := r.Expr
			exprs = append(exprs, expr)
			if strings.Count(expr, "(") != strings.Count(expr, ")") || strings.Count(expr, "{") != strings.Count(expr, "}") {
				t.Errorf("%s: unbalanced brackets in %q", where, expr)
			}

			// Every metric is defined; the labels available to grouping
			// clauses are the union of the expression's metrics' labels.
			avail := map[string]bool{}
			refs := metricRef.FindAllString(expr, -1)
			if len(refs) == 0 {
				t.Errorf("%s: expression names no fencedq metric", where)
			}
			for _, name := range refs {
				base, m, ok := resolve(defs, name)
				if !ok {
					t.Errorf("%s: %s is not defined in %v", where, name, metricSources)
					continue
				}
				used[base] = true
				for _, l := range m.labels {
					avail[l] = true
				}
			}
			for _, sm := range selector.FindAllStringSubmatch(expr, -1) {
				_, m, ok := resolve(defs, sm[1])
				if !ok {
					continue
				}
				for _, part := range strings.Split(sm[2], ",") {
					mm := matcher.FindStringSubmatch(part)
					if mm == nil {
						t.Errorf("%s: cannot read matcher %q", where, part)
						continue
					}
					if !slices.Contains(m.labels, mm[1]) {
						t.Errorf("%s: %s has no label %q (labels %v)", where, sm[1], mm[1], m.labels)
					}
					values := []string{mm[3]}
					if mm[2] == "=~" || mm[2] == "!~" {
						values = strings.Split(mm[3], "|")
					}
					for _, v := range values {
						if !validValue(mm[1], v) {
							t.Errorf("%s: %s=%q is not a value the worker sets", where, mm[1], v)
						}
					}
				}
			}
			for _, gm := range grouping.FindAllStringSubmatch(expr, -1) {
				for _, l := range strings.Split(gm[1], ",") {
					if l = strings.TrimSpace(l); l != "" && !avail[l] {
						t.Errorf("%s: groups by %q, which none of its metrics has", where, l)
					}
				}
			}
			for _, rm := range rateOf.FindAllStringSubmatch(expr, -1) {
				_, m, ok := resolve(defs, rm[1])
				if ok && m.kind == "Gauge" {
					t.Errorf("%s: rate/increase of the gauge %s", where, rm[1])
				}
			}
		}
	}

	// The conditions an operator must see are all covered.
	all := strings.Join(exprs, "\n")
	for _, want := range []string{
		`fencedq_jobs{state="uncertain"}`, `fencedq_jobs{state="review"}`, `fencedq_jobs{state="running"}`,
		"fencedq_fenced_rejections_total", "max(fencedq_reconciler_leader) == 0", "absent(fencedq_reconciler_leader)",
		"fencedq_reconciler_last_scan_timestamp_seconds",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("no rule covers %s", want)
		}
	}
	t.Logf("%d rules over %d of the %d worker metrics", len(seen), len(used), len(defs))

	// promtool, when installed, checks the PromQL itself.
	if promtool, err := exec.LookPath("promtool"); err == nil {
		if out, err := exec.Command(promtool, "check", "rules", "prometheus/alerts.yml").CombinedOutput(); err != nil {
			t.Fatalf("promtool check rules: %v\n%s", err, out)
		}
	}
}
