package main

import (
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.yaml.in/yaml/v3"

	"github.com/fencedq/fencedq/internal/metrics"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// metric is one series family a pool or an enqueue client registers.
type metric struct {
	kind   string // Counter, Gauge, Histogram
	labels []string
}

// recorder is a Registerer that keeps every collector registered through it.
type recorder struct {
	prometheus.Registerer
	collectors []prometheus.Collector
}

func (r *recorder) Register(c prometheus.Collector) error {
	r.collectors = append(r.collectors, c)
	return r.Registerer.Register(c)
}

func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

var descParts = regexp.MustCompile(`fqName: "([^"]+)".*variableLabels: \{([^}]*)\}`)

// workerMetrics returns the series a worker pool and an enqueue client
// really register: their names, kinds and label names, read from the
// collectors' descriptions.
func workerMetrics(t *testing.T) map[string]metric {
	t.Helper()
	rec := &recorder{Registerer: prometheus.NewRegistry()}
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer rdb.Close()
	if _, err := worker.NewPool(rdb, worker.Config{Registerer: rec}); err != nil {
		t.Fatal(err)
	}
	jobs.NewClient(rdb, jobs.Config{Registerer: rec})
	out := map[string]metric{}
	for _, c := range rec.collectors {
		var kind string
		switch c.(type) {
		case prometheus.Gauge, *prometheus.GaugeVec: // before Counter: a Gauge is also a Counter
			kind = "Gauge"
		case prometheus.Histogram, *prometheus.HistogramVec:
			kind = "Histogram"
		case prometheus.Counter, *prometheus.CounterVec:
			kind = "Counter"
		default:
			t.Fatalf("unexpected collector %T", c)
		}
		descs := make(chan *prometheus.Desc, 16)
		go func() { c.Describe(descs); close(descs) }()
		for d := range descs {
			m := descParts.FindStringSubmatch(d.String())
			if m == nil {
				t.Fatalf("cannot read %s", d)
			}
			var labels []string
			if m[2] != "" {
				labels = strings.Split(m[2], ",")
			}
			out[m[1]] = metric{kind: kind, labels: labels}
		}
	}
	if len(out) < 10 || out["fencedq_jobs"].kind != "Gauge" || !slices.Contains(out["fencedq_jobs"].labels, "state") {
		t.Fatalf("could not read the registered metrics: %+v", out)
	}
	return out
}

// labelValues are the values the pool sets for each bounded label other
// than queue and kind (state and outcome are job states).
var labelValues = map[string][]string{
	"stage":  {metrics.StageEnqueue, metrics.StageExecute, metrics.StageCommit, metrics.StageRenew, metrics.StageStorage},
	"reason": {metrics.ReasonMalformed, metrics.ReasonUnknownKind, metrics.ReasonUnknownJob, metrics.ReasonInvalid},
	"result": {jobs.Applied.String(), jobs.NotApplied.String(), jobs.CannotTell.String(), metrics.ResultReview},
	"service": {metrics.ServiceExpirer, metrics.ServiceResolver, metrics.ServicePruner, metrics.ServiceStatus,
		metrics.ServicePeriodic, metrics.ServiceRelay, metrics.ServiceHandover},
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

// alertsFile is the Prometheus rule file shipped with the deployment files.
const alertsFile = "../../deploy/prometheus/alerts.yml"

// TestAlertRulesUseWorkerMetrics checks deploy/prometheus/alerts.yml
// against the metrics a worker pool registers: every metric an expression names is defined,
// every label it selects or groups by exists on those metrics, label values
// are ones the worker sets, rate() is only taken of counters, and every
// rule is well-formed.
func TestAlertRulesUseWorkerMetrics(t *testing.T) {
	defs := workerMetrics(t)
	raw, err := os.ReadFile(alertsFile)
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

			checkExpr(t, defs, where, expr, used)
		}
	}

	// The conditions an operator must see are all covered.
	all := strings.Join(exprs, "\n")
	for _, want := range []string{
		`fencedq_jobs{state="uncertain"}`, `fencedq_jobs{state="review"}`, `fencedq_jobs{state="running"}`,
		"fencedq_fenced_rejections_total", "max(fencedq_maintenance_leader) == 0", "absent(fencedq_maintenance_leader)",
		"fencedq_maintenance_last_scan_timestamp_seconds", "fencedq_maintenance_errors_total", "fencedq_reconcile_errors_total",
		"fencedq_ledger_rewinds_total", "fencedq_redis_clock_offset_seconds", "fencedq_redis_clock_jumps_total",
		"fencedq_redis_may_evict", "fencedq_redis_replicas_missing", "fencedq_outbox_rows_set_aside_total",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("no rule covers %s", want)
		}
	}
	t.Logf("%d rules over %d of the %d worker metrics", len(seen), len(used), len(defs))

	// promtool, when installed, checks the PromQL itself.
	if promtool, err := exec.LookPath("promtool"); err == nil {
		if out, err := exec.Command(promtool, "check", "rules", alertsFile).CombinedOutput(); err != nil {
			t.Fatalf("promtool check rules: %v\n%s", err, out)
		}
	}
}

// checkExpr checks one PromQL expression against the registered metrics
// defs: every metric it names is defined, every label it selects or groups
// by exists on those metrics, label values are ones the pool sets, and
// rate() is only taken of counters. It adds the metrics named to used.
func checkExpr(t *testing.T, defs map[string]metric, where, expr string, used map[string]bool) {
	t.Helper()
	validValue := func(label, v string) bool {
		if (label == "queue" || label == "kind") && strings.HasPrefix(v, "$") {
			return true // a dashboard's template variable
		}
		if label == "state" || label == "outcome" {
			return jobs.State(v).Valid()
		}
		return slices.Contains(labelValues[label], v)
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
			t.Errorf("%s: %s is not a metric the worker registers", where, name)
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
