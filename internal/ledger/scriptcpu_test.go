package ledger_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
)

// redisCPU returns the Redis main thread's CPU time so far in µs (INFO cpu):
// unlike a call's wall time it does not grow while the server waits for a
// core on a loaded machine.
func redisCPU(tb testing.TB, c *redis.Client) float64 {
	tb.Helper()
	s, err := c.Info(context.Background(), "cpu").Result()
	if err != nil {
		tb.Fatal(err)
	}
	var sum float64
	for _, line := range strings.Split(s, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		if k == "used_cpu_user_main_thread" || k == "used_cpu_sys_main_thread" {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				tb.Fatalf("INFO cpu %s: %v", k, err)
			}
			sum += f
		}
	}
	return sum * 1e6
}

// BenchmarkScriptCPU reports the Redis CPU time of the claim and completion
// scripts per call and per job, for batches of 5 and 25 jobs (about what a
// pool of concurrency 10 and 50 sends): the script cost fencedq-bench's
// no-op drain pays, without the client. Each iteration is one call.
//
//	go test -run '^$' -bench ScriptCPU -benchtime 400x ./internal/ledger/
func BenchmarkScriptCPU(b *testing.B) {
	ctx := context.Background()
	rdb := redistest.Start(b, redistest.Options{}).Client()
	// as fencedq-bench's server: no keyspace events (redistest turns them on
	// for Await; they cost Redis CPU on every write)
	if err := rdb.ConfigSet(ctx, "notify-keyspace-events", "").Err(); err != nil {
		b.Fatal(err)
	}
	l := ledger.New(rdb, ledger.Config{Namespace: "bench", Retention: time.Hour})
	const q = "default"
	fill := func(b *testing.B, n int) {
		b.Helper()
		for i := 0; i < n; i += 100 {
			js := make([]*ledger.NewJob, min(100, n-i))
			for j := range js {
				js[j] = &ledger.NewJob{ID: uuid.NewString(), Kind: "noop", Queue: q, Payload: []byte("{}"), MaxRetries: 5}
			}
			if _, err := l.Insert(ctx, js); err != nil {
				b.Fatal(err)
			}
		}
	}
	claim := func(b *testing.B, batch int) []ledger.Claimed {
		b.Helper()
		res, err := l.Claim(ctx, q, "pool", time.Minute, batch)
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Jobs) != batch {
			b.Fatalf("claimed %d jobs, want %d", len(res.Jobs), batch)
		}
		return res.Jobs
	}
	complete := func(b *testing.B, js []ledger.Claimed) {
		b.Helper()
		cs := make([]ledger.Completion, len(js))
		for i, j := range js {
			cs[i] = ledger.Completion{ID: j.ID, Token: j.Token, Outcome: ledger.Outcome{To: ledger.Succeeded}}
		}
		out, err := l.Complete(ctx, q, cs)
		if err != nil {
			b.Fatal(err)
		}
		for _, c := range out {
			if !c.Applied {
				b.Fatalf("completion not applied: %+v", c)
			}
		}
	}
	report := func(b *testing.B, cpu float64, batch int) {
		b.ReportMetric(cpu/float64(b.N), "redis-µs/call")
		b.ReportMetric(cpu/float64(b.N*batch), "redis-µs/job")
	}
	for _, batch := range []int{5, 25} {
		b.Run(fmt.Sprintf("claim/%d", batch), func(b *testing.B) {
			fill(b, b.N*batch)
			var claimed [][]ledger.Claimed
			t0 := redisCPU(b, rdb)
			b.ResetTimer()
			for range b.N {
				claimed = append(claimed, claim(b, batch))
			}
			b.StopTimer()
			report(b, redisCPU(b, rdb)-t0, batch)
			for _, js := range claimed {
				complete(b, js)
			}
		})
		b.Run(fmt.Sprintf("complete/%d", batch), func(b *testing.B) {
			fill(b, b.N*batch)
			claimed := make([][]ledger.Claimed, b.N)
			for i := range claimed {
				claimed[i] = claim(b, batch)
			}
			t0 := redisCPU(b, rdb)
			b.ResetTimer()
			for _, js := range claimed {
				complete(b, js)
			}
			b.StopTimer()
			report(b, redisCPU(b, rdb)-t0, batch)
		})
	}
}

// BenchmarkScriptInstructions drives claims and completions of batch jobs
// (FENCEDQ_BATCH, default 5; FENCEDQ_FLOW: "limit" puts every job under
// one concurrency limit key, "rate" under one rate limit, neither binding;
// FENCEDQ_SHAPE gives every job one optional field: "delayed", "headers",
// "timeout" or "resource") against a redis-server run under valgrind's
// callgrind, and has callgrind dump its counts after the claims and again
// after the completions: instruction counts per call that, unlike CPU
// time, do not depend on the machine's load. It is skipped unless
// FENCEDQ_CALLGRIND_ADDR (the server) and FENCEDQ_CALLGRIND_PID (valgrind's
// process) are set; BENCHMARKS.md shows how to run and read it.
func BenchmarkScriptInstructions(b *testing.B) {
	l, batch, callgrind := instructionsLedger(b, 5)
	ctx := context.Background()
	const q = "default"
	n := (b.N + 1) * batch
	for i := 0; i < n; i += 100 {
		js := make([]*ledger.NewJob, min(100, n-i))
		for j := range js {
			js[j] = &ledger.NewJob{ID: uuid.NewString(), Kind: "noop", Queue: q, Payload: []byte("{}"), MaxRetries: 5,
				Flow: benchFlow(b)}
			benchShape(b, js[j])
		}
		if _, err := l.Insert(ctx, js); err != nil {
			b.Fatal(err)
		}
	}
	claim := func() []ledger.Claimed {
		res, err := l.Claim(ctx, q, "pool", time.Minute, batch)
		if err != nil || len(res.Jobs) != batch {
			b.Fatalf("claim: %v, %+v", err, res)
		}
		return res.Jobs
	}
	complete := func(js []ledger.Claimed) {
		cs := make([]ledger.Completion, len(js))
		for i, j := range js {
			cs[i] = ledger.Completion{ID: j.ID, Token: j.Token, Outcome: ledger.Outcome{To: ledger.Succeeded}}
		}
		out, err := l.Complete(ctx, q, cs)
		if err != nil {
			b.Fatal(err)
		}
		for _, c := range out {
			if !c.Applied {
				b.Fatalf("completion not applied: %+v", c)
			}
		}
	}
	complete(claim()) // loads the scripts and the epoch
	claimed := make([][]ledger.Claimed, b.N)
	b.ResetTimer()
	callgrind("-z")
	for i := range claimed {
		claimed[i] = claim()
	}
	callgrind("-d")
	for _, js := range claimed {
		complete(js)
	}
	callgrind("-d")
}

// BenchmarkEnqueueInstructions is BenchmarkScriptInstructions for the
// enqueue script: each iteration is one Insert of FENCEDQ_BATCH (default 1)
// plain jobs (after 200 more, so the pending index is no small listpack),
// and callgrind dumps its counts after them. Skipped unless
// FENCEDQ_CALLGRIND_ADDR and FENCEDQ_CALLGRIND_PID are set.
func BenchmarkEnqueueInstructions(b *testing.B) {
	l, batch, callgrind := instructionsLedger(b, 1)
	ctx := context.Background()
	const q = "default"
	insert := func() {
		js := make([]*ledger.NewJob, batch)
		for j := range js {
			js[j] = &ledger.NewJob{ID: uuid.NewString(), Kind: "noop", Queue: q, Payload: []byte(`{"n":1}`), MaxRetries: 5}
		}
		if _, err := l.Insert(ctx, js); err != nil {
			b.Fatal(err)
		}
	}
	for range max(200/batch, 1) { // loads the script, registers the queue; a
		insert() // pending index past listpack size, as in a benchmark's
	}
	b.ResetTimer()
	callgrind("-z")
	for range b.N {
		insert()
	}
	callgrind("-d")
}

// instructionsLedger is the set-up of the instruction benchmarks: a ledger
// on the redis-server under callgrind (FENCEDQ_CALLGRIND_ADDR, valgrind's
// process FENCEDQ_CALLGRIND_PID; the benchmark is skipped without them),
// the jobs per call (FENCEDQ_BATCH, else def) and callgrind, which runs
// callgrind_control with an argument ("-z": zero the counts, "-d": dump).
func instructionsLedger(b *testing.B, def int) (l *ledger.Ledger, batch int, callgrind func(arg string)) {
	addr, pid := os.Getenv("FENCEDQ_CALLGRIND_ADDR"), os.Getenv("FENCEDQ_CALLGRIND_PID")
	if addr == "" || pid == "" {
		b.Skip("FENCEDQ_CALLGRIND_ADDR and FENCEDQ_CALLGRIND_PID not set")
	}
	batch = def
	if s := os.Getenv("FENCEDQ_BATCH"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			b.Fatalf("FENCEDQ_BATCH=%q", s)
		}
		batch = n
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	b.Cleanup(func() { _ = rdb.Close() })
	if err := rdb.ConfigSet(context.Background(), "notify-keyspace-events", "").Err(); err != nil {
		b.Fatal(err)
	}
	callgrind = func(arg string) {
		if out, err := exec.Command("callgrind_control", arg, pid).CombinedOutput(); err != nil {
			b.Fatalf("callgrind_control %s: %v: %s", arg, err, out)
		}
	}
	return ledger.New(rdb, ledger.Config{Namespace: "callgrind-" + uuid.NewString()[:8], Retention: time.Hour}), batch, callgrind
}

// benchFlow is the flow control FENCEDQ_FLOW names for the instruction
// benchmarks: none, one limit key or one rate key that never binds.
func benchFlow(b *testing.B) *ledger.Flow {
	switch v := os.Getenv("FENCEDQ_FLOW"); v {
	case "":
		return nil
	case "limit":
		return &ledger.Flow{LimitKey: "bench", LimitMax: 1_000_000}
	case "rate":
		return &ledger.Flow{RateKey: "bench", RateMax: 1_000_000, RatePer: time.Second}
	default:
		b.Fatalf("FENCEDQ_FLOW=%q: want limit or rate", v)
		return nil
	}
}

// benchShape gives j the one optional field FENCEDQ_SHAPE names (none
// when unset).
func benchShape(b *testing.B, j *ledger.NewJob) {
	switch v := os.Getenv("FENCEDQ_SHAPE"); v {
	case "":
	case "delayed":
		j.Delay = -time.Millisecond // a RunAt just past: due at once, with its run_at field
	case "headers":
		j.Headers = map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	case "timeout":
		j.Timeout = 30 * time.Second
	case "resource":
		j.Resource = "printer"
	default:
		b.Fatalf("FENCEDQ_SHAPE=%q: want delayed, headers, timeout or resource", v)
	}
}
