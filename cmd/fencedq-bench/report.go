package main

import (
	"fmt"
	"io"
	"maps"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// targetText says "target ≥ x: met" or "no target".
func targetText(target float64, ok bool) string {
	if target == 0 {
		return "no target"
	}
	return fmt.Sprintf("target ≥ %.2f: %s", target, verdict(ok))
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

// slowerText says "12.3% slower" or "4.5% faster".
func slowerText(pct float64) string {
	if pct < 0 {
		return fmt.Sprintf("%.1f%% faster", -pct)
	}
	return fmt.Sprintf("%.1f%% slower", pct)
}

// printTable writes the human-readable report.
func printTable(w io.Writer, r *Report) {
	m := r.Machine
	fmt.Fprintf(w, "\nfencedq-bench: %d CPUs (%s), %s, redis %s", m.CPUs, m.CPUModel, m.GoVersion, m.RedisVersion)
	if m.PostgresVersion != "" {
		fmt.Fprintf(w, ", PostgreSQL %s", m.PostgresVersion)
	}
	fmt.Fprintf(w, "; took %.0fs; load average %s at start, %s at end\n", r.Seconds, m.LoadAvgStart, m.LoadAvgEnd)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	header := "\tjobs/s\tenqueue/s\tround trips/job\tscripts/job\tredis cmds/job\tredis CPU µs/job\tclient CPU µs/job\t\n"
	row := func(name string, v Variant) {
		p := v.PerJob
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.2f\t%.2f\t%.1f\t%.1f\t%.1f\t\n", name, v.JobsPerSec, v.EnqueuePerSec,
			p.RoundTrips, p.ScriptCalls, p.ServerCommands, p.RedisCPUMicros, p.ClientCPUMicros)
	}
	if n := r.Noop; n != nil {
		for _, conc := range n.Concurrency {
			at := n.At[strconv.Itoa(conc)]
			if at == nil {
				continue
			}
			fmt.Fprintf(w, "\nnoop: %d no-op jobs drained, concurrency %d, median of %d\n", n.Jobs, conc, n.Repeat)
			fmt.Fprint(tw, header)
			row("asynq", at.Asynq)
			row("fencedq", at.Fencedq)
			tw.Flush()
			fmt.Fprintf(w, "  ratio fencedq/asynq = %.3f (%s)\n", at.Ratio, targetText(at.Target, at.MeetsTarget))
			fmt.Fprintf(w, "  cores busy while draining (Redis + client CPU per job × jobs/s): asynq %.2f, fencedq %.2f of %d (target for a saturated pool: ≥ 1.8 of 2)\n",
				coresBusy(at.Asynq), coresBusy(at.Fencedq), runtime.NumCPU())
			fmt.Fprintf(w, "  scripts per job (drain):   asynq %s\n                             fencedq %s\n", perMap(at.Asynq.PerJob.Scripts), perMap(at.Fencedq.PerJob.Scripts))
			fmt.Fprintf(w, "  other commands per job (drain): asynq %s\n                                  fencedq %s\n", perMap(at.Asynq.PerJob.Commands), perMap(at.Fencedq.PerJob.Commands))
			fmt.Fprintf(w, "  server µs per job in scripts (commandstats evalsha and fcall usec): asynq %.1f, fencedq %.1f\n",
				scriptMicros(at.Asynq.PerJob.ServerMicrosByCommand), scriptMicros(at.Fencedq.PerJob.ServerMicrosByCommand))
		}
		if len(n.ScriptServerMicros) > 0 {
			fmt.Fprint(w, "  server time per script call (SLOWLOG at threshold 0 in one extra untimed drain each;\n"+
				"  it includes logging each command the script calls, which inflates scripts that call many):\n")
			fmt.Fprint(tw, "\tcalls\tmedian µs\tmean µs\tp90 µs\tµs per job\t\n")
			for _, name := range slices.Sorted(maps.Keys(n.ScriptServerMicros)) {
				st := n.ScriptServerMicros[name]
				fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.1f\t%.0f\t%.1f\t\n", name, st.Calls, st.MedianMicros, st.MeanMicros, st.P90Micros, st.MicrosPerJob)
			}
			tw.Flush()
		}
	}
	if d := r.Durable; d != nil {
		for _, conc := range d.Concurrency {
			at := d.At[strconv.Itoa(conc)]
			if at == nil {
				continue
			}
			fmt.Fprintf(w, "\ndurable: %d no-op jobs drained, concurrency %d, default vs durable (%d replica), median of %d\n", d.Jobs, conc, d.Replicas, d.Repeat)
			fmt.Fprint(tw, header)
			row("default", at.Default)
			row("durable", at.Durable)
			tw.Flush()
			target := "no target"
			if at.Target > 0 {
				target = fmt.Sprintf("target ≤ %.0f%%: %s", at.Target, verdict(at.MeetsTarget))
			}
			fmt.Fprintf(w, "  durable ÷ default jobs/s = %.3f: %s (%s)\n", ratio(at.Durable.JobsPerSec, at.Default.JobsPerSec), slowerText(at.SlowerPct), target)
		}
		fmt.Fprintf(w, "\ndurable: Enqueue from %d goroutines: default %.0f jobs/s, durable %.0f jobs/s (%s; round trips/job %.3f vs %.3f)\n",
			d.EnqueueGoroutines, d.EnqueueDefault.JobsPerSec, d.EnqueueDurable.JobsPerSec, slowerText(d.EnqueueSlowerPct),
			d.EnqueueDefault.PerJob.RoundTrips, d.EnqueueDurable.PerJob.RoundTrips)
	}
	if q := r.Queues; q != nil {
		for _, conc := range q.Concurrency {
			at := q.At[strconv.Itoa(conc)]
			if at == nil {
				continue
			}
			fmt.Fprintf(w, "\nqueues: %d no-op jobs drained by one pool, concurrency %d, over one queue vs spread over %d queues, median of %d\n",
				q.Jobs, conc, q.Queues, q.Repeat)
			fmt.Fprint(tw, header)
			row("one queue", at.One)
			row(fmt.Sprintf("%d queues", q.Queues), at.Many)
			tw.Flush()
			fmt.Fprintf(w, "  %d queues ÷ one queue jobs/s = %.3f (target ≥ %.1f: %s)\n", q.Queues, at.Ratio, at.Target, verdict(at.MeetsTarget))
		}
	}
	if l := r.Limits; l != nil {
		printLimits(w, l)
	}
	if g := r.Groups; g != nil {
		printGroups(w, g)
	}
	if wf := r.Workflows; wf != nil {
		printWorkflows(w, wf)
	}
	if q := r.Enqueue; q != nil {
		fmt.Fprintf(w, "\nenqueue: %d jobs from %d goroutines (EnqueueMany: %d jobs per call), median of %d\n", q.Jobs, q.Goroutines, q.Batch, q.Repeat)
		fmt.Fprint(tw, "\tjobs/s\tround trips/job\tscripts/job\tredis cmds/job\tredis CPU µs/job\tclient CPU µs/job\t\n")
		for _, s := range []struct {
			name string
			v    EnqueueSide
		}{{"asynq Enqueue", q.Asynq}, {"fencedq Enqueue", q.Fencedq}, {"fencedq EnqueueMany", q.FencedqMany}} {
			p := s.v.PerJob
			fmt.Fprintf(tw, "%s\t%.0f\t%.3f\t%.2f\t%.1f\t%.1f\t%.1f\t\n", s.name, s.v.JobsPerSec, p.RoundTrips, p.ScriptCalls, p.ServerCommands, p.RedisCPUMicros, p.ClientCPUMicros)
		}
		tw.Flush()
		fmt.Fprintf(w, "  ratio Enqueue/asynq = %.3f (%s); EnqueueMany/asynq = %.3f (%s)\n",
			q.Ratio, targetText(q.Target, q.MeetsTarget), q.RatioMany, targetText(q.TargetMany, q.MeetsTargetMany))
	}
	if l := r.Latency; l != nil {
		fmt.Fprintf(w, "\nlatency: enqueue call to handler start, %.0f jobs/s offered for %.1fs (%d jobs) into an idle pool, concurrency %d, median of %d\n",
			l.Rate, l.DurationSec, l.Jobs, l.Concurrency, l.Repeat)
		fmt.Fprint(tw, "\toffered/s\tp50 ms\tp99 ms\tp99.9 ms\tmax ms\tmean ms\tround trips/job\tredis CPU µs/job\tclient CPU µs/job\t\n")
		for _, s := range []struct {
			name string
			v    LatencySide
		}{{"asynq", l.Asynq}, {"fencedq", l.Fencedq}} {
			p := s.v.PerJob
			fmt.Fprintf(tw, "%s\t%.0f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.1f\t%.1f\t\n", s.name, s.v.OfferedPerSec, s.v.P50Ms, s.v.P99Ms, s.v.P999Ms, s.v.MaxMs, s.v.MeanMs,
				p.RoundTrips, p.RedisCPUMicros, p.ClientCPUMicros)
		}
		tw.Flush()
		fmt.Fprintf(w, "  fencedq target p50 ≤ %.0f ms and p99 ≤ %.0f ms: %s\n", l.TargetP50Ms, l.TargetP99Ms, verdict(l.MeetsTarget))
	}
	if r.Partitions != nil {
		printPartitions(w, r.Partitions)
	}
	if c := r.Cluster; c != nil {
		fmt.Fprintf(w, "\ncluster: %d jobs over %d queues, %d masters vs single server, concurrency %d, median of %d\n", c.Jobs, c.Queues, c.Masters, c.Concurrency, c.Repeat)
		fmt.Fprint(tw, header)
		row("single asynq", c.Single["asynq"])
		row("single fencedq", c.Single["fencedq"])
		row("cluster asynq", c.Cluster["asynq"])
		row("cluster fencedq", c.Cluster["fencedq"])
		tw.Flush()
		fmt.Fprintf(w, "  ratio cluster/single: fencedq %.3f, asynq %.3f; fencedq/asynq on the cluster %.3f\n", c.Ratio, c.AsynqRatio, c.FencedqVsAsynq)
	}
	if l := r.Lease; l != nil {
		fmt.Fprintf(w, "\nlease: %d acquire+release pairs, %d goroutines, %d resources (no contention), median of %d\n", l.Ops, l.Goroutines, l.Resources, l.Repeat)
		fmt.Fprint(tw, "\tpairs/s\tround trips/pair\tredis cmds/pair\tredis CPU µs/pair\tclient CPU µs/pair\t\n")
		for _, name := range []string{"fencedq", "redislock", "redsync"} {
			f := l.Libraries[name]
			fmt.Fprintf(tw, "%s\t%.0f\t%.2f\t%.2f\t%.1f\t%.1f\t\n", name, f.OpsPerSec, f.PerOp.RoundTrips, f.PerOp.ServerCommands, f.PerOp.RedisCPUMicros, f.PerOp.ClientCPUMicros)
		}
		tw.Flush()
		for _, other := range []string{"redislock", "redsync"} {
			fmt.Fprintf(w, "  ratio fencedq/%s = %.3f (target ≥ %.1f: %s)\n", other, l.Ratio[other], l.Targets[other], verdict(l.MeetsTarget[other]))
		}
		for _, name := range []string{"fencedq", "redislock", "redsync"} {
			fmt.Fprintf(w, "  redis commands per pair, %s: %s\n", name, perMap(l.Libraries[name].PerOp.ServerByCommand))
		}
	}
	if mm := r.Memory; mm != nil {
		fmt.Fprintf(w, "\nmemory: Redis bytes per retained finished job, %d jobs, median of %d\n", mm.Jobs, mm.Repeat)
		fmt.Fprint(tw, "\tbytes/job (no payload)\tgross bytes/job\tpayload bytes/job\t\n")
		fmt.Fprintf(tw, "fencedq\t%.0f\t%.0f\t%.0f\t\n", mm.Fencedq.BytesPerJob, mm.Fencedq.GrossBytesPerJob, mm.Fencedq.PayloadBytes)
		fmt.Fprintf(tw, "fencedq+OperationID\t%.0f\t%.0f\t%.0f\t\n", mm.FencedqOperationID.BytesPerJob, mm.FencedqOperationID.GrossBytesPerJob, mm.FencedqOperationID.PayloadBytes)
		fmt.Fprintf(tw, "asynq+Retention\t%.0f\t%.0f\t%.0f\t\n", mm.AsynqRetained.BytesPerJob, mm.AsynqRetained.GrossBytesPerJob, mm.AsynqRetained.PayloadBytes)
		tw.Flush()
		fmt.Fprintf(w, "  ratio fencedq/asynq = %.3f (target ≤ %.2f: %s); with OperationID %.3f\n", mm.Ratio, mm.Target, verdict(mm.MeetsTarget), mm.RatioOperationID)
		fmt.Fprintf(w, "  MEMORY USAGE per job: fencedq %s\n                       fencedq+OperationID %s\n                       asynq %s\n",
			perMap(mm.Fencedq.Keys), perMap(mm.FencedqOperationID.Keys), perMap(mm.AsynqRetained.Keys))
		fmt.Fprintf(w, "  record field bytes (name + value): fencedq %s\n                                     asynq %s\n", perIntMap(mm.Fencedq.Fields), perIntMap(mm.AsynqRetained.Fields))
	}
	if p := r.Postgres; p != nil {
		if p.Skipped {
			fmt.Fprintf(w, "\npostgres: skipped: %s\n", p.Note)
		} else {
			fmt.Fprintf(w, "\npostgres: %d jobs each updating one of %d rows, concurrency %d, median of %d\n", p.Jobs, p.Rows, p.Concurrency, p.Repeat)
			fmt.Fprint(tw, header)
			row("asynq UPDATE", p.Asynq)
			row("fencedq pgfence ApplyBatch", p.Fencedq)
			row("fencedq pgfence Apply", p.FencedqApply)
			tw.Flush()
			fmt.Fprintf(w, "  ratio fencedq/asynq = %.3f with ApplyBatch (%s), %.3f with Apply; PostgreSQL statements per job: %s\n",
				p.Ratio, targetText(p.Target, p.MeetsTarget), p.RatioApply, perMap(p.StatementsPerJob))
		}
	}
	if b := r.Bridge; b != nil {
		fmt.Fprintf(w, "\nbridge: %d no-op tasks drained by an asynq server, without and with the asynqfence middleware, concurrency %d, median of %d\n", b.Jobs, b.Concurrency, b.Repeat)
		fmt.Fprint(tw, header)
		row("asynq", b.Asynq)
		row("asynq+bridge", b.Bridge)
		tw.Flush()
		fmt.Fprintf(w, "  ratio bridge/asynq = %.3f (no target)\n", b.Ratio)
		fmt.Fprintf(w, "  scripts per job (drain): asynq %s\n                           bridge %s\n", perMap(b.Asynq.PerJob.Scripts), perMap(b.Bridge.PerJob.Scripts))
		if p := b.Postgres; p != nil && p.Skipped {
			fmt.Fprintf(w, "  postgres: skipped: %s\n", p.Note)
		} else if p != nil {
			fmt.Fprintf(w, "  postgres: %d tasks each updating one of %d rows\n", p.Jobs, p.Rows)
			fmt.Fprint(tw, header)
			row("asynq UPDATE", p.Asynq)
			row("bridge pgfence", p.Bridge)
			tw.Flush()
			fmt.Fprintf(w, "  ratio bridge/asynq with PostgreSQL = %.3f (no target)\n", p.Ratio)
		}
	}
	if ob := r.Outbox; ob != nil {
		if ob.Skipped {
			fmt.Fprintf(w, "\noutbox: skipped: %s\n", ob.Note)
		} else {
			fmt.Fprintf(w, "\noutbox: %d jobs from %d goroutines, one PostgreSQL transaction per call (EnqueueMany: %d jobs per call), median of %d\n",
				ob.Jobs, ob.Goroutines, ob.Batch, ob.Repeat)
			fmt.Fprint(tw, "\tjobs/s\tround trips/job\tredis cmds/job\tredis CPU µs/job\tclient CPU µs/job\t\n")
			for _, s := range []struct {
				name string
				v    EnqueueSide
			}{{"plain Enqueue", ob.Plain}, {"outbox Enqueue", ob.Outbox}, {"outbox EnqueueMany", ob.OutboxMany}} {
				p := s.v.PerJob
				fmt.Fprintf(tw, "%s\t%.0f\t%.3f\t%.1f\t%.1f\t%.1f\t\n", s.name, s.v.JobsPerSec, p.RoundTrips, p.ServerCommands, p.RedisCPUMicros, p.ClientCPUMicros)
			}
			tw.Flush()
			fmt.Fprintf(w, "  ratio outbox/plain = %.3f, EnqueueMany/plain = %.3f (no target); PostgreSQL statements per outbox job %.2f\n",
				ob.Ratio, ob.RatioMany, ob.StatementsPerJob)
			fmt.Fprintf(w, "  relay drain of the committed backlog by a fresh pool (concurrency %d): %.0f jobs/s\n", ob.Concurrency, ob.RelayDrainPerSec)
			fmt.Fprintf(w, "  latency to handler start, %.0f jobs/s offered (%d jobs) into an idle pool: outbox from tx.Commit, plain from the Enqueue call\n", ob.LatencyRate, ob.LatencyJobs)
			fmt.Fprint(tw, "\toffered/s\tp50 ms\tp99 ms\tp99.9 ms\tmax ms\tmean ms\t\n")
			for _, s := range []struct {
				name string
				v    LatencySide
			}{{"plain Enqueue", ob.PlainLatency}, {"outbox", ob.OutboxLatency}} {
				fmt.Fprintf(tw, "%s\t%.0f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t\n", s.name, s.v.OfferedPerSec, s.v.P50Ms, s.v.P99Ms, s.v.P999Ms, s.v.MaxMs, s.v.MeanMs)
			}
			tw.Flush()
		}
	}
	if rc := r.Recovery; rc != nil {
		fmt.Fprintf(w, "\nrecovery: SIGKILL of the worker running a job until it runs again on a spare, %d kills each\n", rc.Kills)
		fmt.Fprint(tw, "\trecovered\tmedian s\tworst s\ttimeout s\ttarget s\t\t\n")
		for _, name := range slices.Sorted(maps.Keys(rc.Variants)) {
			v := rc.Variants[name]
			target, met := "-", ""
			if v.TargetSec > 0 {
				target, met = fmt.Sprintf("≤ %.1f", v.TargetSec), verdict(v.MeetsTarget)
			}
			fmt.Fprintf(tw, "%s\t%d/%d\t%.2f\t%.2f\t%.0f\t%s\t%s\t\n", name, v.Recovered, v.Kills, v.MedianSec, v.WorstSec, v.TimeoutSec, target, met)
		}
		tw.Flush()
		for _, name := range slices.Sorted(maps.Keys(rc.Variants)) {
			if v := rc.Variants[name]; v.Note != "" {
				fmt.Fprintf(w, "  %s: %s\n", name, v.Note)
			}
		}
		if len(rc.Ratio) > 0 {
			fmt.Fprintf(w, "  ratio median fencedq/asynq: %s\n", perMap(rc.Ratio))
		}
	}
	if len(r.Errors) > 0 {
		fmt.Fprintln(w, "\nerrors:")
		for _, k := range slices.Sorted(maps.Keys(r.Errors)) {
			fmt.Fprintf(w, "  %s: %s\n", k, r.Errors[k])
		}
	}
}

// perIntMap is perMap for integer values.
func perIntMap(m map[string]int) string {
	f := make(map[string]float64, len(m))
	for k, v := range m {
		f[k] = float64(v)
	}
	return strings.ReplaceAll(perMap(f), ".00", "")
}

// perMap formats a map as "k v, k v", largest values first.
func perMap(m map[string]float64) string {
	keys := slices.Collect(maps.Keys(m))
	slices.SortFunc(keys, func(a, b string) int {
		if m[a] != m[b] {
			if m[a] > m[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		if m[k] < 0.005 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %.2f", k, m[k]))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

// coresBusy is how many CPUs v's drain kept busy: its Redis and client
// CPU time per job times its jobs per second.
func coresBusy(v Variant) float64 {
	return (v.PerJob.RedisCPUMicros + v.PerJob.ClientCPUMicros) * v.JobsPerSec / 1e6
}
