package main

import (
	"bufio"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// otherScripts names the lock libraries' scripts by SHA1 (redislock v0.9.4,
// redsync v4).
var otherScripts = map[string]string{
	"80a1b5f2cfccec3b7119ba7721d2127682b691a7": "redislock:obtain",
	"cf0e94b2e9ffc7e04395cf88f7583fc309985910": "redislock:release",
	"a7aba3bc5d6e99b3003da8b9d80a63b9f4092ecf": "redislock:refresh",
	"e950836ed1e694540c503ef9972b8de518044d3b": "redsync:delete",
	"d75bb8b5bd13532ddedd17762e772346e39b321e": "redsync:touch",
}

// learned maps the SHA1 of scripts seen in EVAL or SCRIPT LOAD to a name
// taken from their header comment ("-- claim.lua: ...").
var learned sync.Map

var luaHeader = regexp.MustCompile(`(?m)^--\s*([A-Za-z0-9_]+)\.lua:`)

// ledgerLibs are the ledger's shared Lua files, linked before a script's own
// source: their header comments may come first.
var ledgerLibs = map[string]bool{"prelude": true, "flow": true, "workflow": true, "group": true}

// learnScript records a name for src's SHA1: the last header comment's (a
// script's own source comes after the definitions linked before it), with
// "jobs:" when a ledger library is linked in.
func learnScript(src string) {
	sum := sha1.Sum([]byte(src))
	sha := hex.EncodeToString(sum[:])
	if _, ok := learned.Load(sha); ok {
		return
	}
	name, ledger := "", false
	for _, m := range luaHeader.FindAllStringSubmatch(src, -1) {
		if ledgerLibs[m[1]] {
			ledger = true
			continue
		}
		name = m[1]
	}
	switch {
	case name == "":
		return
	case ledger:
		name = "jobs:" + name
	case name == "ops" || name == "acquire" || name == "renew" || name == "release":
		name = "lease:" + name
	default:
		name = "lua:" + name
	}
	learned.Store(sha, name)
}

// scriptLabel names the script with the given SHA1.
func scriptLabel(sha string) string {
	sha = strings.ToLower(sha)
	if n, ok := asynqScripts[sha]; ok {
		return "asynq:" + n
	}
	if n, ok := otherScripts[sha]; ok {
		return n
	}
	if n, ok := learned.Load(sha); ok {
		return n.(string)
	}
	if len(sha) > 8 {
		sha = sha[:8]
	}
	return "sha:" + sha
}

// functionLabel names a function of the ledger's library
// (fencedq_<hash>_<script>) like the same script run with EVALSHA.
func functionLabel(fn string) string {
	if m := ledgerFunction.FindStringSubmatch(fn); m != nil {
		return "jobs:" + m[1]
	}
	return "fn:" + fn
}

var ledgerFunction = regexp.MustCompile(`^fencedq_[0-9a-f]+_([a-z_]+)$`)

// scriptMicros is the server's time in scripts: EVALSHA's and FCALL's
// commandstats usec.
func scriptMicros(byCommand map[string]float64) float64 {
	return byCommand["evalsha"] + byCommand["fcall"]
}

// counters is a set of named counters safe for concurrent use.
type counters struct{ m sync.Map }

func (c *counters) add(name string, n int64) {
	v, ok := c.m.Load(name)
	if !ok {
		v, _ = c.m.LoadOrStore(name, new(atomic.Int64))
	}
	v.(*atomic.Int64).Add(n)
}

func (c *counters) snapshot() map[string]int64 {
	out := map[string]int64{}
	c.m.Range(func(k, v any) bool {
		out[k.(string)] = v.(*atomic.Int64).Load()
		return true
	})
	return out
}

// commandHook counts, on the client side, every command a go-redis client
// sends (by name, scripts by name) and every round trip (a pipeline is one).
type commandHook struct {
	cmds    counters
	trips   atomic.Int64
	scripts counters
}

func (h *commandHook) count(cmd redis.Cmder) {
	name := cmd.Name()
	h.cmds.add(name, 1)
	args := cmd.Args()
	switch name {
	case "evalsha", "evalsha_ro":
		if len(args) > 1 {
			h.scripts.add(scriptLabel(fmt.Sprint(args[1])), 1)
		}
	case "fcall", "fcall_ro":
		if len(args) > 1 {
			h.scripts.add(functionLabel(fmt.Sprint(args[1])), 1)
		}
	case "eval", "eval_ro":
		if len(args) > 1 {
			src := fmt.Sprint(args[1])
			learnScript(src)
			sum := sha1.Sum([]byte(src))
			h.scripts.add(scriptLabel(hex.EncodeToString(sum[:])), 1)
		}
	case "script":
		if len(args) > 2 && strings.EqualFold(fmt.Sprint(args[1]), "load") {
			learnScript(fmt.Sprint(args[2]))
		}
	}
}

// DialHook implements redis.Hook.
func (h *commandHook) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook.
func (h *commandHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.count(cmd)
		h.trips.Add(1)
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook implements redis.Hook.
func (h *commandHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			h.count(c)
		}
		h.trips.Add(1)
		return next(ctx, cmds)
	}
}

// clientSnap is the client side of a measurement.
type clientSnap struct {
	cmds, scripts map[string]int64
	trips         int64
	cpu           time.Duration // this process's user+system CPU time
}

func (h *commandHook) snap() clientSnap {
	return clientSnap{cmds: h.cmds.snapshot(), scripts: h.scripts.snapshot(), trips: h.trips.Load(), cpu: processCPU()}
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// serverSnap is the server side of a measurement, summed over every master.
type serverSnap struct {
	calls       map[string]int64   // INFO commandstats calls by command
	usec        map[string]int64   // INFO commandstats usec by command
	cpu         float64            // used_cpu_user + used_cpu_sys, seconds
	cpuBy       map[string]float64 // the same per master address
	usedMemory  int64              // used_memory
	clientsMem  int64              // mem_clients_normal
	scriptCache int64              // used_memory_scripts (Redis 7), else 0
}

// masters returns a function calling fn on every master of rdb.
func forEachMaster(ctx context.Context, rdb redis.UniversalClient, fn func(ctx context.Context, c *redis.Client) error) error {
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		var mu sync.Mutex
		return cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			mu.Lock()
			defer mu.Unlock()
			return fn(ctx, c)
		})
	}
	if c, ok := rdb.(*redis.Client); ok {
		return fn(ctx, c)
	}
	return fmt.Errorf("unsupported client %T", rdb)
}

func serverStats(ctx context.Context, rdb redis.UniversalClient) (serverSnap, error) {
	s := serverSnap{calls: map[string]int64{}, usec: map[string]int64{}, cpuBy: map[string]float64{}}
	err := forEachMaster(ctx, rdb, func(ctx context.Context, c *redis.Client) error {
		before := s.cpu
		for _, section := range []string{"commandstats", "cpu", "memory"} {
			text, err := c.Info(ctx, section).Result()
			if err != nil {
				return err
			}
			parseInfo(text, &s)
		}
		s.cpuBy[c.Options().Addr] = s.cpu - before
		return nil
	})
	return s, err
}

func parseInfo(text string, s *serverSnap) {
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch {
		case strings.HasPrefix(k, "cmdstat_"):
			name := strings.TrimPrefix(k, "cmdstat_")
			for _, kv := range strings.Split(v, ",") {
				f, val, _ := strings.Cut(kv, "=")
				n, _ := strconv.ParseInt(val, 10, 64)
				switch f {
				case "calls":
					s.calls[name] += n
				case "usec":
					s.usec[name] += n
				}
			}
		case k == "used_cpu_user" || k == "used_cpu_sys":
			f, _ := strconv.ParseFloat(v, 64)
			s.cpu += f
		case k == "used_memory":
			n, _ := strconv.ParseInt(v, 10, 64)
			s.usedMemory += n
		case k == "mem_clients_normal":
			n, _ := strconv.ParseInt(v, 10, 64)
			s.clientsMem += n
		case k == "used_memory_scripts":
			n, _ := strconv.ParseInt(v, 10, 64)
			s.scriptCache += n
		}
	}
}

// ignored commands are the benchmark's own bookkeeping, left out of the
// per-job figures.
var ignored = map[string]bool{"info": true, "cluster|info": true, "cluster|slots": true, "cluster|shards": true, "cluster|nodes": true, "memory|usage": true}

// probe measures one phase: Redis commands seen by the client and the
// server, Redis CPU and client CPU.
type probe struct {
	rdb    redis.UniversalClient
	hook   *commandHook
	client clientSnap
	server serverSnap
}

func startProbe(ctx context.Context, rdb redis.UniversalClient, hook *commandHook) (*probe, error) {
	p := &probe{rdb: rdb, hook: hook}
	var err error
	p.server, err = serverStats(ctx, rdb)
	p.client = hook.snap()
	return p, err
}

// PerUnit is one phase's cost per job (or per lease operation).
type PerUnit struct {
	// RoundTrips the client made (a pipeline counts once).
	RoundTrips float64 `json:"round_trips"`
	// ClientCommands the client sent (each EVALSHA counts once).
	ClientCommands float64 `json:"client_commands"`
	// ScriptCalls is EVALSHA plus EVAL as sent by the client.
	ScriptCalls float64 `json:"script_calls"`
	// ServerCommands is the INFO commandstats delta: every command the
	// server executed, including each redis.call inside a script.
	ServerCommands float64 `json:"server_commands"`
	// RedisCPUMicros is redis-server CPU time (user + system).
	RedisCPUMicros float64 `json:"redis_cpu_us"`
	// RedisCPUMicrosByMaster splits it by master address (a cluster).
	RedisCPUMicrosByMaster map[string]float64 `json:"redis_cpu_us_by_master,omitempty"`
	// ClientCPUMicros is the benchmark process's CPU time (user + system).
	ClientCPUMicros float64 `json:"client_cpu_us"`
	// Scripts counts scripts by name, as sent by the client.
	Scripts map[string]float64 `json:"scripts"`
	// Commands counts client commands that are not scripts, by name.
	Commands map[string]float64 `json:"commands"`
	// ServerByCommand is the commandstats delta by command.
	ServerByCommand map[string]float64 `json:"server_by_command"`
	// ServerMicrosByCommand is the commandstats usec delta by command: the
	// server's time executing each command. A script's time (evalsha)
	// includes the commands it calls, which are also listed on their own.
	ServerMicrosByCommand map[string]float64 `json:"server_usec_by_command"`
}

// end finishes the phase and divides its costs by units.
func (p *probe) end(ctx context.Context, units int) (PerUnit, error) {
	srv, err := serverStats(ctx, p.rdb)
	if err != nil {
		return PerUnit{}, err
	}
	cl := p.hook.snap()
	n := float64(units)
	r := func(v float64) float64 { return math.Round(v/n*1000) / 1000 }
	out := PerUnit{Scripts: map[string]float64{}, Commands: map[string]float64{}, ServerByCommand: map[string]float64{}, ServerMicrosByCommand: map[string]float64{}}
	out.RoundTrips = r(float64(cl.trips - p.client.trips))
	var cmds, scripts int64
	for k, v := range cl.cmds {
		d := v - p.client.cmds[k]
		if d == 0 || ignored[k] || k == "cluster" || k == "memory" {
			continue
		}
		cmds += d
		if strings.HasPrefix(k, "eval") || strings.HasPrefix(k, "fcall") {
			scripts += d
			continue
		}
		out.Commands[k] = r(float64(d))
	}
	out.ClientCommands = r(float64(cmds))
	out.ScriptCalls = r(float64(scripts))
	for k, v := range cl.scripts {
		if d := v - p.client.scripts[k]; d > 0 {
			out.Scripts[k] = r(float64(d))
		}
	}
	var total int64
	for k, v := range srv.calls {
		d := v - p.server.calls[k]
		if d == 0 || ignored[k] {
			continue
		}
		total += d
		out.ServerByCommand[k] = r(float64(d))
		if us := srv.usec[k] - p.server.usec[k]; us > 0 {
			out.ServerMicrosByCommand[k] = r(float64(us))
		}
	}
	out.ServerCommands = r(float64(total))
	out.RedisCPUMicros = math.Round((srv.cpu-p.server.cpu)*1e6/n*10) / 10
	if len(srv.cpuBy) > 1 {
		out.RedisCPUMicrosByMaster = map[string]float64{}
		for a, c := range srv.cpuBy {
			out.RedisCPUMicrosByMaster[a] = math.Round((c-p.server.cpuBy[a])*1e6/n*10) / 10
		}
	}
	out.ClientCPUMicros = math.Round(float64(cl.cpu-p.client.cpu)/float64(time.Microsecond)/n*10) / 10
	return out, nil
}

// median returns the median of xs (the mean of the middle two for an even count).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// medianIndex returns the index in xs of its median element (the lower
// middle for an even count).
func medianIndex(xs []float64) int {
	idx := make([]int, len(xs))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return xs[idx[a]] < xs[idx[b]] })
	return idx[(len(idx)-1)/2]
}

func round(v float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(v*p) / p
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return round(a/b, 3)
}
