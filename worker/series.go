package worker

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/metrics"
)

// series caches the labelled metric children a pool updates for every job,
// so a job's counters cost one map read instead of WithLabelValues' label
// validation and hashing. The label values are bounded (the pool's queues,
// its registered kinds, the job states, and at most metrics.MaxFlowNameLabels limit
// and rate names), and so is the cache. The zero value is ready to use.
type series struct {
	attempted sync.Map // attemptedKey → prometheus.Counter
	completed sync.Map // completedKey → completedSeries

	flow metrics.FlowLabels // the limit and rate names labelled so far
}

type attemptedKey struct{ queue, kind string }

type completedKey struct{ queue, kind, outcome string }

// completedSeries are the children for one queue, kind and outcome.
type completedSeries struct {
	count    prometheus.Counter
	duration prometheus.Observer
}

// attempt returns the attempts counter for queue and kind.
func (s *series) attempt(m *metrics.Set, queue, kind string) prometheus.Counter {
	k := attemptedKey{queue, kind}
	if c, ok := s.attempted.Load(k); ok {
		return c.(prometheus.Counter)
	}
	c, _ := s.attempted.LoadOrStore(k, m.Attempted.WithLabelValues(ledger.Logical(queue), kind))
	return c.(prometheus.Counter)
}

// complete returns the completion counter and duration histogram for
// queue, kind and outcome.
func (s *series) complete(m *metrics.Set, queue, kind, outcome string) completedSeries {
	k := completedKey{queue, kind, outcome}
	if c, ok := s.completed.Load(k); ok {
		return c.(completedSeries)
	}
	c, _ := s.completed.LoadOrStore(k, completedSeries{
		count:    m.Completed.WithLabelValues(ledger.Logical(queue), kind, outcome),
		duration: m.Duration.WithLabelValues(ledger.Logical(queue), kind, outcome),
	})
	return c.(completedSeries)
}

// flowName returns the label value for limit or rate name (see
// metrics.FlowLabels); first reports the first name turned away.
func (s *series) flowName(name string) (label string, first bool) {
	return s.flow.Label(name)
}
