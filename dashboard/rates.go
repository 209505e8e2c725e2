package dashboard

import (
	"sync"
	"time"
)

// counters is one sample of a queue's cumulative stats counters.
type counters struct {
	at                         time.Time
	enqueued, attempted        int64
	succeeded, dead, retried   int64
	uncertain, fenced, deduped int64
}

// throughput is the per-second rate of a queue's counters over the window
// the dashboard has observed.
type throughput struct {
	WindowSeconds float64 `json:"window_seconds"`
	Enqueued      float64 `json:"enqueued_per_sec"`
	Attempted     float64 `json:"attempted_per_sec"`
	Succeeded     float64 `json:"succeeded_per_sec"`
	Dead          float64 `json:"dead_per_sec"`
	Retried       float64 `json:"retried_per_sec"`
	Uncertain     float64 `json:"uncertain_per_sec"`
	Fenced        float64 `json:"fenced_per_sec"`
	Deduplicated  float64 `json:"deduplicated_per_sec"`
}

// sampler keeps recent samples of each queue's counters (the ledger only
// has totals) to turn them into rates. Samples come from overview requests,
// at most one a second per queue, and are kept for window.
type sampler struct {
	window time.Duration

	mu      sync.Mutex
	samples map[string][]counters
}

const maxSamples = 240

func newSampler(window time.Duration) *sampler {
	return &sampler{window: window, samples: map[string][]counters{}}
}

// observe records c for queue q and returns the rate since the oldest
// sample in the window, or nil when there is no sample at least a second
// old yet. Counters that went down (a reset namespace) restart the window.
func (s *sampler) observe(q string, c counters) *throughput {
	s.mu.Lock()
	defer s.mu.Unlock()
	list := s.samples[q]
	if n := len(list); n > 0 && (c.at.Before(list[n-1].at) || c.attempted < list[n-1].attempted) {
		list = nil
	}
	// Drop samples older than the window, keeping one to measure from.
	cut := c.at.Add(-s.window)
	i := 0
	for i < len(list)-1 && list[i+1].at.Before(cut) {
		i++
	}
	list = list[i:]
	var out *throughput
	if len(list) > 0 {
		old := list[0]
		if d := c.at.Sub(old.at).Seconds(); d >= 1 {
			rate := func(now, then int64) float64 { return float64(now-then) / d }
			out = &throughput{
				WindowSeconds: d,
				Enqueued:      rate(c.enqueued, old.enqueued),
				Attempted:     rate(c.attempted, old.attempted),
				Succeeded:     rate(c.succeeded, old.succeeded),
				Dead:          rate(c.dead, old.dead),
				Retried:       rate(c.retried, old.retried),
				Uncertain:     rate(c.uncertain, old.uncertain),
				Fenced:        rate(c.fenced, old.fenced),
				Deduplicated:  rate(c.deduped, old.deduped),
			}
		}
	}
	if n := len(list); n == 0 || c.at.Sub(list[n-1].at) >= time.Second {
		list = append(list, c)
		if len(list) > maxSamples {
			list = list[len(list)-maxSamples:]
		}
	}
	s.samples[q] = list
	return out
}

// forget drops queues not in keep (queues can disappear with a namespace).
func (s *sampler) forget(keep []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.samples) <= len(keep) {
		return
	}
	set := make(map[string]bool, len(keep))
	for _, q := range keep {
		set[q] = true
	}
	for q := range s.samples {
		if !set[q] {
			delete(s.samples, q)
		}
	}
}
