package worker_test

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// sumCollector exposes the sum of every series of one metric family as a
// single collector, for testutil.ToFloat64.
type sumCollector struct {
	e    *env
	name string
}

func (s *sumCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- prometheus.NewDesc(s.name+"_sum", "sum", nil, nil)
}

func (s *sumCollector) Collect(ch chan<- prometheus.Metric) {
	fams, _ := s.e.reg.Gather()
	var total float64
	for _, f := range fams {
		if f.GetName() != s.name {
			continue
		}
		for _, m := range f.GetMetric() {
			total += value(m)
		}
	}
	ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(s.name+"_sum", "sum", nil, nil), prometheus.UntypedValue, total)
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	return 0
}
