package ledger

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The fair-group keys of a queue (group.lua has the layout).
func (l *Ledger) groupsKey(q string) string       { return l.prefix(q) + "groups" }
func (l *Ledger) groupKey(q, group string) string { return l.prefix(q) + "group:" + group }

// groupsParked is the groups hash's field counting the jobs that wait in
// the groups' own indexes (pending jobs outside the due index).
const groupsParked = "#n"

// GroupStatus is one fair group with pending jobs.
type GroupStatus struct {
	// Queue is the queue holding the group: of a partitioned queue, the
	// partition (jobs of one group given two partition keys make a group
	// in each partition).
	Queue string `json:"queue"`
	// Name is the group's name as its head shows it, as LimitStatus.Key.
	Name string `json:"name"`
	// Head is the group's job in the queue's due index: the next one
	// claimed when the group's turn comes.
	Head string `json:"head"`
	// Pending counts the group's pending jobs: the head and those waiting
	// in the group's own index (retries of its jobs, which wait in the due
	// index outside its turn, are not counted).
	Pending int `json:"pending"`
}

// maxGroups bounds how many groups one Groups read returns.
const maxGroups = 1000

// Groups returns queue q's fair groups with pending jobs, deepest first
// (then by name), at most maxGroups: the deepest of all, so every group is
// counted before the list is cut.
func (l *Ledger) Groups(ctx context.Context, q string) ([]GroupStatus, error) {
	h, err := l.rdb.HGetAll(ctx, l.groupsKey(q)).Result()
	if err != nil {
		return nil, wrap("groups", err)
	}
	for k := range h {
		if strings.HasPrefix(k, "#") { // the parked count, group.lua's GROUPS_T
			delete(h, k)
		}
	}
	names := sortedKeys(h)
	out := make([]GroupStatus, len(names))
	for c := 0; c < len(names); c += maxGroups {
		part := names[c:min(c+maxGroups, len(names))]
		pipe := l.rdb.Pipeline()
		cards := make([]*redis.IntCmd, len(part))
		for i, g := range part {
			cards[i] = pipe.ZCard(ctx, l.groupKey(q, g))
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, wrap("groups", err)
		}
		for i, g := range part {
			out[c+i] = GroupStatus{Queue: q, Name: g, Head: h[g], Pending: int(cards[i].Val()) + 1}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Pending > out[j].Pending })
	out = out[:min(len(out), maxGroups)]
	// each name as its head shows it (keyProbe): one more round trip
	pipe := l.rdb.Pipeline()
	shown := make([]keyProbe, len(out))
	for i := range out {
		shown[i] = keyProbe{key: &out[i].Name, job: out[i].Head, field: "group"}
		shown[i].read(ctx, l, pipe, q)
	}
	if pipe.Len() > 0 {
		_, _ = pipe.Exec(ctx) // a read that failed shows its name digested
	}
	for i := range shown {
		shown[i].show()
	}
	return out, nil
}

// groupAhead says where pending job id of group g stands in its group:
// "group acme, 3 ahead" (the jobs of the group claimed before it; the
// other groups' turns come between them).
func (l *Ledger) groupAhead(ctx context.Context, q, id, g string) (string, error) {
	r := &Record{ID: id, Queue: q, Group: g}
	err := l.groupsAhead(ctx, map[string]*Record{"": r})
	return r.WaitingFor, err
}

// groupsAhead sets the WaitingFor of the grouped records of recs (pending
// jobs) to where each stands in its group (see groupAhead), in one round
// trip. A grouped job in the due index outside its group's turn (a retry,
// a re-run) waits for nothing of its group, and one held back by flow
// control (its WaitingFor set) says so: both left as they are.
func (l *Ledger) groupsAhead(ctx context.Context, recs map[string]*Record) error {
	type read struct {
		r    *Record
		head *redis.StringCmd
		rank *redis.IntCmd
	}
	var reads []read
	pipe := l.rdb.Pipeline()
	for _, r := range recs {
		if r.Group != "" && r.WaitingFor == "" { // else held back by flow control (flowWaits)
			reads = append(reads, read{r, pipe.HGet(ctx, l.groupsKey(r.Queue), r.Group),
				pipe.ZRank(ctx, l.groupKey(r.Queue, r.Group), r.ID)})
		}
	}
	if len(reads) == 0 {
		return nil
	}
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		return wrap("group", err)
	}
	for _, rd := range reads {
		head := rd.head.Val()
		if head == rd.r.ID {
			rd.r.WaitingFor = fmt.Sprintf("group %s, 0 ahead (next of its group)", rd.r.Group)
			continue
		}
		n, err := rd.rank.Result()
		if err == redis.Nil {
			continue
		}
		if err != nil {
			return wrap("group", err)
		}
		if head != "" {
			n++
		}
		rd.r.WaitingFor = fmt.Sprintf("group %s, %d ahead", rd.r.Group, n)
	}
	return nil
}
