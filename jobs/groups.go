package jobs

import (
	"context"
	"errors"
	"slices"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/namespace"
)

// Grouper is implemented by args whose jobs belong to a fair group (a
// tenant, a customer): within a queue, claims rotate among the groups with
// due jobs, so one group's backlog delays another group's jobs by a bounded
// amount instead of by its whole length. A group exists only while it has
// pending jobs; an idle group costs nothing. Return "" for no group.
//
// Of a group's pending jobs one at a time, its head, waits in the queue's due
// index; the others wait in the group's own index by due time. A claim takes
// at most one job per group off the due index, and each group it took from
// gets its next head due no earlier than now, behind every job already due:
// so with G groups having due jobs, a group's next job is claimed after at
// most about one job of each other group (ungrouped jobs and retries of
// grouped jobs queue by due time among them), whatever the other groups'
// backlogs. A claim with room left once nothing else is due fills it from
// the groups it took from, in turns (equal shares), so a single busy group
// still fills a pool's batches. Retries, delays, cancellation, expiry,
// pause and run-now behave as for ungrouped jobs; a retried job re-enters the
// due index at its backoff, outside its group's turn.
//
// Groups are scoped to the job's queue (a partition of a partitioned
// queue): the same name on two queues is two groups. The name is never a
// metric label. For per-group concurrency, give the jobs a Limiter key
// derived from the group ("export:"+group): at most N of the group run at
// once, and a group at its limit does not hold up the others.
type Grouper interface {
	Group() string
}

// MaxGroupLen is the longest group name, in bytes.
const MaxGroupLen = 100

// Group puts the job in fair group name (see Grouper), for EnqueueRaw or to
// override the args' Group method; "" for none.
func Group(name string) Option {
	return func(o *options) { o.group, o.groupSet = name, true }
}

// ValidateGroup checks a group name: 1-MaxGroupLen letters, digits or
// ._:- (an error matches ErrInvalid).
func ValidateGroup(name string) error {
	if !namespace.IsName(name, MaxGroupLen) {
		return invalid("group name %q must be 1-%d letters, digits or ._:-", ledger.Clip(name), MaxGroupLen)
	}
	return nil
}

// groupArgs fills o's group from args' method where no option set it (a
// panic there: ErrInvalid).
func groupArgs(args JobArgs, o *options) error {
	if g, ok := args.(Grouper); ok && !o.groupSet {
		return guard(args, "Group", func() { o.group = g.Group() })
	}
	return nil
}

// GroupStatus is one fair group with pending jobs: its name, its head (the
// job of the group in the due index) and how many pending jobs it has.
//
// go doc github.com/fencedq/fencedq/internal/ledger.GroupStatus lists its fields.
type GroupStatus = ledger.GroupStatus

// Groups returns queue q's fair groups with pending jobs (see Grouper),
// deepest first, at most 1000 (the deepest) per partition of a
// partitioned queue; names built from sensitive args fields show them
// redacted (see GroupStatus.Name). When some partitions could not be read,
// it returns the others' with a *PartialError naming them.
func (in *Inspector) Groups(ctx context.Context, q string) ([]GroupStatus, error) {
	out := []GroupStatus{}
	err := in.eachOf(ctx, q, func(n string) error {
		gs, err := in.l.Groups(ctx, n)
		out = append(out, gs...)
		return err
	})
	if err != nil && !errors.Is(err, ErrPartial) {
		return nil, err
	}
	// each partition's list is deepest first; merge them
	slices.SortStableFunc(out, func(a, b GroupStatus) int { return b.Pending - a.Pending })
	return out, err
}
