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
// its registered kinds, the job states, and at most maxFlowNameLabels limit
// and rate names), and so is the cache. The zero value is ready to use.
type series struct {
	attempted sync.Map // attemptedKey → prometheus.Counter
	completed sync.Map // completedKey → completedSeries

	flowMu    sync.Mutex
	flowNames map[string]bool // the limit and rate names labelled so far
	flowOther bool            // a name was turned away (logged once)
}

// maxFlowNameLabels bounds how many distinct limit and rate names a pool
// uses as metric label values; the names met after them count as
// otherFlowName. A name is a flow key's part before its first ':' (see
// jobs.Limiter), so keys built from user data without a fixed name before
// a ':' ("cust-42" instead of "export:cust-42") cannot grow the metrics
// without bound.
const maxFlowNameLabels = 50

// otherFlowName is the label value of the names past maxFlowNameLabels.
const otherFlowName = "other"

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

// flowName returns the label value for limit or rate name: the name while
// at most maxFlowNameLabels distinct names were labelled, else
// otherFlowName; first reports the first name turned away.
func (s *series) flowName(name string) (label string, first bool) {
	s.flowMu.Lock()
	defer s.flowMu.Unlock()
	switch {
	case s.flowNames[name]:
		return name, false
	case len(s.flowNames) < maxFlowNameLabels:
		if s.flowNames == nil {
			s.flowNames = map[string]bool{}
		}
		s.flowNames[name] = true
		return name, false
	}
	first = !s.flowOther
	s.flowOther = true
	return otherFlowName, first
}
