package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"
)

// ScriptTime is the server-side execution time of one script, from SLOWLOG
// with a threshold of 0 during an extra, untimed drain. Redis 7 logs every
// command a script calls too, inside the script's time, so scripts that call
// many commands look somewhat slower than they are without the slowlog.
type ScriptTime struct {
	Calls        int     `json:"calls"`
	MedianMicros float64 `json:"median_us"`
	MeanMicros   float64 `json:"mean_us"`
	P90Micros    float64 `json:"p90_us"`
	// MicrosPerJob is the script's total time divided by the drain's jobs:
	// what it costs per job however many jobs one call serves.
	MicrosPerJob float64 `json:"us_per_job"`
}

// scriptTimes runs one extra drain of n jobs per variant with SLOWLOG
// recording every command, and returns each script's execution time on the
// server (which includes the commands it calls). It changes the server's
// slowlog settings only while it runs, and only on a server the benchmark
// started itself. Redis 7 also logs the commands a script calls, hence the
// room for 60 entries per job.
func (e *bench) scriptTimes(ctx context.Context, n int, fns ...drainFunc) (map[string]ScriptTime, error) {
	c, ok := e.single.rdb.(*redis.Client)
	if !ok || e.opts.redisAddr != "" {
		return nil, nil
	}
	old, err := c.ConfigGet(ctx, "slowlog-*").Result()
	if err != nil {
		return nil, err
	}
	defer func() {
		bg := context.WithoutCancel(ctx)
		for k, v := range old {
			_ = c.ConfigSet(bg, k, v).Err()
		}
		_ = c.Do(bg, "slowlog", "reset").Err()
	}()
	if err := c.ConfigSet(ctx, "slowlog-log-slower-than", "0").Err(); err != nil {
		return nil, err
	}
	if err := c.ConfigSet(ctx, "slowlog-max-len", fmt.Sprint(60*n+10000)).Err(); err != nil {
		return nil, err
	}
	times := map[string][]float64{}
	for _, fn := range fns {
		if err := c.Do(ctx, "slowlog", "reset").Err(); err != nil {
			return nil, err
		}
		if _, err := fn(ctx, e.single, []string{"default"}, n, e.opts.concurrency, nil); err != nil {
			return nil, err
		}
		logs, err := c.SlowLogGet(ctx, -1).Result()
		if err != nil {
			return nil, err
		}
		for _, l := range logs {
			if len(l.Args) < 2 {
				continue
			}
			switch strings.ToLower(l.Args[0]) {
			case "evalsha":
				name := scriptLabel(l.Args[1])
				times[name] = append(times[name], float64(l.Duration.Microseconds()))
			case "fcall":
				name := functionLabel(l.Args[1])
				times[name] = append(times[name], float64(l.Duration.Microseconds()))
			}
		}
	}
	out := map[string]ScriptTime{}
	for name, xs := range times {
		slices.Sort(xs)
		var sum float64
		for _, x := range xs {
			sum += x
		}
		out[name] = ScriptTime{Calls: len(xs), MedianMicros: median(xs), MeanMicros: round(sum/float64(len(xs)), 1),
			P90Micros: xs[len(xs)*9/10], MicrosPerJob: round(sum/float64(n), 1)}
	}
	return out, nil
}
