package ledger

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The flow-control keys of a queue (flow.lua has the layout).
func (l *Ledger) limitsKey(q string) string { return l.prefix(q) + "limits" }
func (l *Ledger) ratesKey(q string) string  { return l.prefix(q) + "rates" }
func (l *Ledger) limitHoldersKey(q, key string) string {
	return l.prefix(q) + "limit:" + key + ":holders"
}
func (l *Ledger) limitWaitKey(q, key string) string { return l.prefix(q) + "limit:" + key + ":wait" }
func (l *Ledger) rateKey(q, key string) string      { return l.prefix(q) + "rate:" + key }

// waitingFor says what a pending job held back by flow control waits for,
// from its record h.
func (l *Ledger) waitingFor(ctx context.Context, q string, h map[string]string) (string, error) {
	switch h["wait"] {
	case "limit":
		held, err := l.rdb.ZCount(ctx, l.limitHoldersKey(q, h["lkey"]), "(0", "+inf").Result()
		if err != nil {
			return "", wrap("limit holders", err)
		}
		return fmt.Sprintf("limit %s, %d of %s held", h["lkey"], held, h["lmax"]), nil
	case "rate":
		return fmt.Sprintf("rate %s: next start at %s", h["rkey"],
			msTime(h["wait_at"]).UTC().Format(time.RFC3339Nano)), nil
	}
	return "", nil
}

// LimitStatus is one concurrency limit's key with holders or waiting jobs.
type LimitStatus struct {
	Key     string   `json:"key"`
	Max     int      `json:"max"`
	Held    int      `json:"held"`
	Waiting int      `json:"waiting"` // parked jobs
	Holders []string `json:"holders"` // job ids holding a permit
	AtLimit bool     `json:"at_limit"`
}

// RateStatus is one rate limit's key with starts in its current window.
type RateStatus struct {
	Key      string        `json:"key"`
	Max      int           `json:"max"`
	Per      time.Duration `json:"per_ns"`
	Starts   int           `json:"starts"`   // in the last period
	Deferred int           `json:"deferred"` // jobs deferred to a later start
}

// maxLimitKeys bounds how many keys one Limits read returns.
const maxLimitKeys = 1000

// Limits returns queue q's concurrency limits that have holders or parked
// jobs, keys at their limit first, and its rate limits (at most
// maxLimitKeys of each).
func (l *Ledger) Limits(ctx context.Context, q string) ([]LimitStatus, []RateStatus, error) {
	lim, err := l.rdb.HGetAll(ctx, l.limitsKey(q)).Result()
	if err != nil {
		return nil, nil, wrap("limits", err)
	}
	rates, err := l.rdb.HGetAll(ctx, l.ratesKey(q)).Result()
	if err != nil {
		return nil, nil, wrap("rates", err)
	}
	now, err := l.ServerTime(ctx)
	if err != nil {
		return nil, nil, err
	}
	keys := sortedKeys(lim)
	rkeys := sortedKeys(rates)
	pipe := l.rdb.Pipeline()
	holders := make([]*redis.StringSliceCmd, len(keys))
	waits := make([]*redis.IntCmd, len(keys))
	for i, k := range keys {
		// promises to due jobs not yet claimed score 0 (flow.lua)
		holders[i] = pipe.ZRangeByScore(ctx, l.limitHoldersKey(q, k), &redis.ZRangeBy{Min: "(0", Max: "+inf"})
		waits[i] = pipe.ZCard(ctx, l.limitWaitKey(q, k))
	}
	starts := make([]*redis.IntCmd, len(rkeys))
	held := make([]*redis.IntCmd, len(rkeys))
	pers := make([]time.Duration, len(rkeys))
	for i, k := range rkeys {
		_, per, _ := strings.Cut(rates[k], "/")
		pers[i] = time.Duration(atoi(per)) * time.Millisecond
		from := "(" + strconv.FormatInt(now.Add(-pers[i]).UnixMilli(), 10)
		starts[i] = pipe.ZCount(ctx, l.rateKey(q, k), from, "+inf")
		held[i] = pipe.ZCount(ctx, l.rateKey(q, k)+":held", from, "+inf")
	}
	if len(keys)+len(rkeys) > 0 {
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, nil, wrap("limits", err)
		}
	}
	out := make([]LimitStatus, 0, len(keys))
	for i, k := range keys {
		s := LimitStatus{Key: k, Max: atoi(lim[k]), Holders: holders[i].Val(), Waiting: int(waits[i].Val())}
		s.Held = len(s.Holders)
		if s.Held == 0 && s.Waiting == 0 {
			continue
		}
		s.AtLimit = s.Held >= s.Max
		out = append(out, s)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].AtLimit && !out[j].AtLimit })
	rs := make([]RateStatus, 0, len(rkeys))
	for i, k := range rkeys {
		mx, _, _ := strings.Cut(rates[k], "/")
		rs = append(rs, RateStatus{Key: k, Max: atoi(mx), Per: pers[i], Starts: int(starts[i].Val()), Deferred: int(held[i].Val())})
	}
	return out, rs, nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if len(keys) > maxLimitKeys {
		keys = keys[:maxLimitKeys]
	}
	return keys
}
