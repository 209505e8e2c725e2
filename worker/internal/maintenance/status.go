package maintenance

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
)

// status sets the per-state job gauges, records the queues' history once a
// minute, and publishes the leader's status for the dashboard and the CLI.
type status struct {
	service
	interval time.Duration
	workerID string
	tally    *tally
	// seriesMinute is the minute (unix ms) the queues' history was last
	// recorded for.
	seriesMinute atomic.Int64
	// parts is the partition registry as of the current pass.
	parts map[string]int
	// known is each queue's change mark (ledger.Ledger.Marks) and the
	// counts read with it: a pass reads the counts of only the queues
	// whose mark moved, and of every queue when it records the history.
	known map[string]knownCounts
	// pruned are the queues the pruner removed index entries from since
	// the last pass (Prune does not move a queue's mark).
	pruned *queueSet
}

// knownCounts is a queue's counts as a status pass last read them, and the
// queue's change mark read before them.
type knownCounts struct {
	mark   string
	counts ledger.QueueCounts
}

// queueSet is a set of queue names shared between services.
type queueSet struct {
	mu sync.Mutex
	qs map[string]bool
}

func (s *queueSet) add(q string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.qs == nil {
		s.qs = map[string]bool{}
	}
	s.qs[q] = true
}

// take returns the set's queues and empties it.
func (s *queueSet) take() map[string]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	qs := s.qs
	s.qs = nil
	return qs
}

// runOnce is one status pass over every queue.
func (s *status) runOnce(ctx context.Context, leader lease.Token) error {
	now, err := s.ledger.ServerTime(ctx)
	if err != nil {
		return err
	}
	// Once a minute, the queues' history buckets (ledger.Ledger.RecordSeries)
	// are recorded too (a pass that fails records the minute again on the
	// next one).
	minute := now.Truncate(jobs.SeriesStep).UnixMilli()
	record := s.seriesMinute.Load() != minute
	// A partitioned queue's gauges are the sums over its partitions, each
	// partition's depth its own gauge. A queue with a partition that could
	// not be read keeps its gauges as the last full pass set them, as a
	// plain queue that could not be read does: a partial sum would be
	// wrong.
	sums := map[string]map[ledger.State]int64{}
	groups := map[string]int64{}
	unread := map[string]bool{}
	if s.parts, err = s.ledger.Partitions(ctx); err != nil {
		return err
	}
	qs, err := s.ledger.Queues(ctx)
	if err != nil {
		return err
	}
	// A queue with partitions in the registry, now or earlier (set back to
	// one, it runs on its own name while they drain), has every name's
	// depth exported.
	split := map[string]bool{}
	for _, q := range qs {
		if ledger.IsPartition(q) {
			split[ledger.Logical(q)] = true
		}
	}
	all, err := s.counts(ctx, qs, record)
	if err != nil {
		return err
	}
	err = s.eachOf(ctx, qs, func(i int, q string) error {
		l := ledger.Logical(q)
		if all[i].Err != nil {
			unread[l] = true
			return all[i].Err
		}
		counts := all[i].Jobs
		if sums[l] == nil {
			sums[l] = map[ledger.State]int64{}
		}
		for st, n := range counts {
			sums[l][st] += n
		}
		groups[l] += all[i].Groups
		if split[l] || s.partitioned(l) {
			for _, st := range []ledger.State{ledger.Pending, ledger.Running} {
				s.metrics.PartitionJobs.WithLabelValues(l, q, string(st)).Set(float64(counts[st]))
			}
		}
		return nil
	})
	if record && err == nil {
		// The queues whose counts were read (a broken one was reported).
		var ok []string
		var counts []ledger.QueueCounts
		for i, q := range qs {
			if all[i].Err == nil {
				ok = append(ok, q)
				counts = append(counts, all[i])
			}
		}
		if serr := s.ledger.RecordSeries(ctx, ok, counts, now); serr != nil {
			s.failed(ctx, "recording the queues' history failed; the next pass records it again", "error", serr)
			record = false
		}
	}
	for q, counts := range sums {
		if unread[q] {
			continue
		}
		for st, n := range counts {
			s.metrics.Jobs.WithLabelValues(q, string(st)).Set(float64(n))
		}
		s.metrics.Groups.WithLabelValues(q).Set(float64(groups[q]))
	}
	if record && err == nil {
		s.seriesMinute.Store(minute)
	}
	if err != nil {
		return err
	}
	s.metrics.LastScan.Set(float64(time.Now().Unix()))
	return s.ledger.SetLeaderStatus(ctx, ledger.LeaderStatus{
		Leader: s.workerID, Token: leader, LastScan: now,
		Expired: s.tally.expired.Load(), Resolved: s.tally.resolved.Load(),
	})
}

// partitioned reports whether queue q has partitions in the registry read
// at the start of the pass.
func (s *status) partitioned(q string) bool { return s.parts[q] > 1 }

// counts returns the counts of each of qs: read in one round trip (two
// with parked jobs) for the queues whose change mark moved since the last
// pass, that the pruner pruned, or whose last read failed, and for all of
// them when all is set; the others' as last read. An idle queue costs one
// read per pass.
func (s *status) counts(ctx context.Context, qs []string, all bool) ([]ledger.QueueCounts, error) {
	pruned := s.pruned.take()
	marks, err := s.ledger.Marks(ctx, qs)
	if err != nil {
		return nil, err
	}
	out := make([]ledger.QueueCounts, len(qs))
	var read []string
	var at []int
	for i, q := range qs {
		k, ok := s.known[q]
		if all || !ok || marks[i] == "" || k.mark != marks[i] || pruned[q] {
			read, at = append(read, q), append(at, i)
			continue
		}
		out[i] = k.counts
	}
	fresh, err := s.ledger.CountsOf(ctx, read)
	if err != nil && len(read) == len(qs) {
		return nil, err
	}
	if err != nil { // every queue read failed, the others were not read
		fresh = make([]ledger.QueueCounts, len(read))
		for j := range fresh {
			fresh[j].Err = err
		}
	}
	known := make(map[string]knownCounts, len(qs))
	for j, i := range at {
		out[i] = fresh[j]
	}
	for i, q := range qs {
		if out[i].Err == nil && marks[i] != "" {
			known[q] = knownCounts{mark: marks[i], counts: out[i]}
		}
	}
	s.known = known
	return out, nil
}
