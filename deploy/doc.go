// Package deploy holds files for running fencedq in production; it has no
// Go code of its own.
//
//   - prometheus/alerts.yml: Prometheus alert rules over the metrics worker
//     pools export (package worker; the series are defined in
//     internal/metrics): jobs uncertain or waiting for review too long,
//     fenced rejections spiking, no reconciler leader or no reconciler
//     scan, running jobs that stopped completing, and rejected, dead or
//     panicking jobs. Load it with rule_files in prometheus.yml (as
//     prometheus/prometheus.yml does for docker-compose.yml); check it with
//     `promtool check rules`.
//
// The package's test parses the rules and checks that every metric, label
// and label value they use is one the worker defines.
package deploy
