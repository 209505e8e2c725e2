// Package cli is the plumbing the repository's commands share (cmd/fencedq,
// cmd/fencedq-demo and the bank example's bank-worker): parsing flags, of
// which the environment sets only an allow-list (EnvFlags), one-line
// errors with exit codes, the --log-level and --log-format flags, Redis
// addresses, listening with a clear message when a port is taken, serving
// /healthz, and stopping on a signal (a second one stops at once).
package cli

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/epoch"
)

// ErrUsage marks bad flags or arguments: Run exits 2 on an error wrapping
// it.
var ErrUsage = errors.New("usage")

// EnvPrefix prefixes the environment variable that sets a flag:
// FENCEDQ_<FLAG>, upper case, dashes as underscores.
const EnvPrefix = "FENCEDQ_"

// envFlags are the flags the environment may set: where to connect, who
// acts, where to listen, the credentials to require, and how to log. A
// flag that picks what an action does (a queue, a job, a decision, a
// count) is never among them, so a variable left in a shell cannot fill
// it.
var envFlags = []string{
	// connection (fence-postgres and fence-redis: the store an operator's
	// decision fences an attempt out of)
	"redis", "postgres", "fence-postgres", "fence-redis", "namespace",
	// identity: the operator
	"actor",
	// listen addresses
	"addr", "metrics-addr",
	// credentials
	"dashboard-user", "dashboard-password", "dashboard-token", "csrf-key",
	// logging
	"log-level", "log-format",
}

// EnvFlags returns the names of the flags that an environment variable
// FENCEDQ_<FLAG> may set (in the commands that read the environment at
// all): the connection (redis, postgres, fence-postgres, fence-redis,
// namespace), identity (actor),
// address (addr, metrics-addr), credential (dashboard-user,
// dashboard-password, dashboard-token, csrf-key) and logging (log-level,
// log-format) flags. Every other flag is taken from the command line only.
func EnvFlags() []string { return slices.Clone(envFlags) }

// EnvVar is the environment variable that sets the flag name:
// FENCEDQ_<NAME>, upper case, dashes as underscores.
func EnvVar(name string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// EnvVars lists, sorted, the variables that set flags of fs.
func EnvVars(fs *flag.FlagSet) []string {
	var vars []string
	fs.VisitAll(func(f *flag.Flag) {
		if slices.Contains(envFlags, f.Name) {
			vars = append(vars, EnvVar(f.Name))
		}
	})
	sort.Strings(vars)
	return vars
}

// Run parses args into fs, sets every allow-listed flag (EnvFlags) not
// given from its FENCEDQ_<FLAG> environment variable, and runs do, which
// writes its output to stdout. A FENCEDQ_<FLAG> variable naming another
// flag of fs is ignored, with a warning on stderr. It returns the exit
// code: 0 when do succeeds (or on --help, which prints summary, the flags
// and the variables that set them on stdout), 2 on bad usage (a bad flag,
// an argument, or an error wrapping ErrUsage), 1 on any other error.
// Errors are one line on stderr, prefixed with fs.Name(), the command as
// typed (e.g. "fencedq inspect"), with their text passed through Escape.
// With --json set (a flag named "json" of fs), an error that leaves stdout
// empty is also written there as one JSON object, {"error": text,
// "exit_code": code}, so stdout is JSON whatever the outcome; output do
// wrote before its error (a partial listing) stands alone.
func Run(ctx context.Context, fs *flag.FlagSet, summary string, do func(context.Context, io.Writer) error, args []string, stdout, stderr io.Writer) int {
	return run(ctx, fs, summary, true, do, args, stdout, stderr)
}

// RunWithoutEnv is Run for a command that reads no flag from the
// environment (the demo): a FENCEDQ_<FLAG> variable naming one of its
// flags is ignored, with a warning on stderr.
func RunWithoutEnv(ctx context.Context, fs *flag.FlagSet, summary string, do func(context.Context, io.Writer) error, args []string, stdout, stderr io.Writer) int {
	return run(ctx, fs, summary, false, do, args, stdout, stderr)
}

func run(ctx context.Context, fs *flag.FlagSet, summary string, env bool, do func(context.Context, io.Writer) error, args []string, stdout, stderr io.Writer) int {
	QuietRedis()
	name := fs.Name()
	out := &countingWriter{w: stdout}
	// fail reports msg (already prefixed and escaped for stderr) and, under
	// --json, text as a JSON object on stdout unless do wrote there.
	fail := func(code int, msg, text string) int {
		fmt.Fprint(stderr, msg)
		if out.n == 0 && (jsonSet(fs) || code == 2 && fs.Lookup("json") != nil && jsonAsked(args)) {
			_ = json.NewEncoder(JSONWriter(stdout)).Encode(struct {
				Error    string `json:"error"`
				ExitCode int    `json:"exit_code"`
			}{text, code})
		}
		return code
	}
	// The flag package would print the usage on every parse error and on
	// --help; the usage is printed here instead, once.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printHelp(stdout, fs, summary, env)
			return 0
		}
		return fail(2, Escapef("%s: %v\nRun '%s --help' for its flags.\n", name, err, name), err.Error())
	}
	if fs.NArg() > 0 {
		text := fmt.Sprintf("unexpected argument %q", fs.Arg(0))
		return fail(2, name+": "+text+"\n", text)
	}
	for _, w := range ignoredEnv(fs, env) {
		fmt.Fprint(stderr, Escapef("%s: %s\n", name, w))
	}
	if env {
		if err := applyEnv(fs); err != nil {
			return fail(2, Escapef("%s: %v\n", name, err), err.Error())
		}
	}
	if err := do(ctx, out); err != nil {
		code := 1
		if errors.Is(err, ErrUsage) {
			code = 2
		}
		return fail(code, Escapef("%s: %v\n", name, err), err.Error())
	}
	return 0
}

// jsonSet reports whether fs has a --json flag set to true (by the
// arguments parsed so far).
func jsonSet(fs *flag.FlagSet) bool {
	f := fs.Lookup("json")
	if f == nil {
		return false
	}
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return false
	}
	b, ok := g.Get().(bool)
	return ok && b
}

// jsonAsked reports whether args hold --json, for a parse that stopped
// before reaching it.
func jsonAsked(args []string) bool {
	for _, a := range args {
		switch a {
		case "-json", "--json", "-json=true", "--json=true":
			return true
		case "--":
			return false
		}
	}
	return false
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// TypeNamer is a flag.Value that names the kind of value it takes in the
// help ("int", "duration"), where the flag package says "value" for every
// type of its caller's.
type TypeNamer interface{ TypeName() string }

// printDefaults is fs.PrintDefaults, naming a TypeNamer flag's type.
func printDefaults(w io.Writer, fs *flag.FlagSet) {
	var b strings.Builder
	fs.SetOutput(&b)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
	out := b.String()
	fs.VisitAll(func(f *flag.Flag) {
		t, ok := f.Value.(TypeNamer)
		if name, _ := flag.UnquoteUsage(f); !ok || name != "value" {
			return
		}
		out = strings.Replace(out, "  -"+f.Name+" value\n", "  -"+f.Name+" "+t.TypeName()+"\n", 1)
	})
	io.WriteString(w, out)
}

// printHelp prints the usage: the summary, the flags, which environment
// variables set which of them, and the exit codes (those of run).
func printHelp(w io.Writer, fs *flag.FlagSet, summary string, env bool) {
	fmt.Fprintf(w, "Usage: %s [flags]\n\n%s.\n\nFlags:\n", fs.Name(), summary)
	printDefaults(w, fs)
	vars := EnvVars(fs)
	switch {
	case !env:
		fmt.Fprintf(w, "\nEnvironment: none. This command reads no %s<FLAG> variable; give every flag on the command line.\n", EnvPrefix)
	case len(vars) == 0:
		fmt.Fprintf(w, "\nEnvironment: none of these flags is read from a %s<FLAG> variable.\n", EnvPrefix)
	default:
		fmt.Fprintf(w, "\nEnvironment (a flag given wins; no other flag is read from the environment):\n")
		tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
		fs.VisitAll(func(f *flag.Flag) {
			if slices.Contains(envFlags, f.Name) {
				fmt.Fprintf(tw, "  %s\tsets -%s\n", EnvVar(f.Name), f.Name)
			}
		})
		_ = tw.Flush()
	}
	fmt.Fprintln(w, "\nExit codes: 0 success, 1 failure, 2 bad usage (a flag or argument refused).")
}

// applyEnv sets every allow-listed flag not given on the command line from
// FENCEDQ_<FLAG>. A variable set but empty for a flag with a default is a
// usage error naming the variable.
func applyEnv(fs *flag.FlagSet) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var errs []string
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || !slices.Contains(envFlags, f.Name) {
			return
		}
		key := EnvVar(f.Name)
		if v, ok := os.LookupEnv(key); ok {
			if strings.TrimSpace(v) == "" && f.DefValue != "" {
				// Likely copied from a variable that is unset: the flag's
				// own check would name the flag, not what emptied it.
				errs = append(errs, fmt.Sprintf("%s is set but empty: unset it for --%s's default (%s), or give a value", key, f.Name, f.DefValue))
				return
			}
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Sprintf("%s=%q: %v", key, v, err))
			}
		}
	})
	if len(errs) > 0 {
		sort.Strings(errs)
		return fmt.Errorf("%w: %s", ErrUsage, strings.Join(errs, "; "))
	}
	return nil
}

// ignoredEnv warns, sorted, about every FENCEDQ_<FLAG> variable set for a
// flag of fs that the environment does not set here: every one without
// env, the ones not allow-listed with it.
func ignoredEnv(fs *flag.FlagSet, env bool) []string {
	var warns []string
	fs.VisitAll(func(f *flag.Flag) {
		key := EnvVar(f.Name)
		if _, ok := os.LookupEnv(key); !ok || (env && slices.Contains(envFlags, f.Name)) {
			return
		}
		if env {
			warns = append(warns, fmt.Sprintf("%s is ignored: --%s is read from the command line only (the environment sets only connection, identity, address, credential and logging flags)", key, f.Name))
		} else {
			warns = append(warns, fmt.Sprintf("%s is ignored: this command reads no flag from the environment (give --%s on the command line)", key, f.Name))
		}
	})
	sort.Strings(warns)
	return warns
}

// quietRedis drops the Redis client's own log lines (its dial retries).
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

// QuietRedis silences the Redis client's own logging for the process: a
// command reports a failure once, as its error.
func QuietRedis() { redis.SetLogger(quietRedis{}) }

// PingTimeout bounds the first contact with Redis.
const PingTimeout = 5 * time.Second

// ConnectRedis opens a Redis client from the --redis address and pings
// it: a URL (redis://[user:password@]host:port/db, rediss:// for TLS) or a
// bare host:port (redis://host:port); several comma-separated addresses
// make a cluster client, every master of which must answer (those that do
// not are named), and so does one address of a cluster node; a
// redis-sentinel:// URL (see ParseSentinelURL) makes a failover client that
// finds the primary through the Sentinels (Sentinels that are all down, a
// master name none monitors (ErrSentinelMaster) and a primary they name
// that does not answer are each named as such).
// A malformed address is a usage error; a Redis that does not answer, or
// answers with an error (a password it wants or refuses, a database it
// does not have), is named (password hidden). The client honours a
// command's context deadline (go-redis ContextTimeoutEnabled), so a
// frozen Redis holds a request no longer than its context allows.
func ConnectRedis(ctx context.Context, addr string) (redis.UniversalClient, error) {
	return connectRedis(ctx, "--redis", addr, false)
}

// ConnectRedisFlag is ConnectRedis for an address given to flag flagName
// (such as --fence-redis): its errors name that flag, not --redis.
func ConnectRedisFlag(ctx context.Context, flagName, addr string) (redis.UniversalClient, error) {
	return connectRedis(ctx, flagName, addr, false)
}

// ErrMastersDown means some masters of a Redis Cluster did not answer
// while others did (ConnectRedisPartial).
var ErrMastersDown = errors.New("some Redis Cluster masters do not answer")

// ConnectRedisPartial is ConnectRedis for the operator's commands and
// views, which show what they can: when some masters of a cluster do not
// answer but others do, it returns the client with an error matching
// ErrMastersDown naming them (the caller closes the client), rather than
// failing. Its client dials a node once per command (OperatorDialTimeout),
// not go-redis's five times 100 ms apart, so a read meeting a dead node
// gives it up at once.
func ConnectRedisPartial(ctx context.Context, addr string) (redis.UniversalClient, error) {
	return connectRedis(ctx, "--redis", addr, true)
}

// OperatorDialTimeout bounds the one connection attempt a client of
// ConnectRedisPartial makes to a node per command: a node that refuses it
// (killed) is given up at once, one that does not accept it (host down)
// after this long. go-redis's default (five attempts, 100 ms apart, for
// each of a Cluster command's four tries) held the first read with a
// master down about 7.5 s. A healthy node's reads are unchanged: an
// attempt that connects is not retried.
const OperatorDialTimeout = 2 * time.Second

// dialOnce sets a client of ConnectRedisPartial to give a node up after
// one connection attempt of at most OperatorDialTimeout (a dial_timeout
// given in the URL is kept).
func dialOnce(retries *int, timeout *time.Duration) {
	*retries = 1
	if *timeout == 0 {
		*timeout = OperatorDialTimeout
	}
}

// connectRedis is ConnectRedis of an address given to flag flagName.
func connectRedis(ctx context.Context, flagName, addr string, partial bool) (redis.UniversalClient, error) {
	var rdb redis.UniversalClient
	var single *redis.Options            // the options of one address (not a Sentinel URL)
	var primary string                   // the primary's address, as the Sentinels name it
	shown := withScheme(RedactURL(addr)) // redacted as typed: a comma may be a password's
	if isSentinelURL(addr) {
		fo, err := parseSentinelURL(flagName, addr)
		if err != nil {
			return nil, err
		}
		fo.ContextTimeoutEnabled = true
		if partial {
			dialOnce(&fo.DialerRetries, &fo.DialTimeout)
		}
		shown = RedactURL(strings.TrimSpace(addr))
		pctx, cancel := context.WithTimeout(ctx, PingTimeout)
		primary, err = askSentinels(pctx, fo, shown, flagName)
		cancel()
		if err != nil {
			return nil, err
		}
		rdb = redis.NewFailoverClient(fo)
	} else if strings.Contains(addr, ",") {
		var addrs []string
		var opt, first *redis.Options
		parts := strings.Split(addr, ",")
		if strings.Contains(addr, "@") && slices.ContainsFunc(parts, func(p string) bool { return strings.Contains(p, "://") }) &&
			slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(p, "://") }) {
			// "redis://user:pa,ss@host": a comma split a password.
			return nil, malformedCredentials(flagName, addr, "want comma-separated redis://[user:password@]host:port URLs")
		}
		for _, u := range parts {
			o, err := parseRedisURL(flagName, u)
			if err != nil {
				if strings.Contains(addr, "@") {
					// A comma may have split a password: name the whole
					// address, redacted, and quote none of its parts.
					return nil, malformedCredentials(flagName, addr, "want comma-separated redis://[user:password@]host:port URLs")
				}
				return nil, err
			}
			if opt != nil && (o.TLSConfig == nil) != (opt.TLSConfig == nil) {
				return nil, fmt.Errorf("%w: %s %q: mixes rediss:// and redis:// (a cluster's nodes all use TLS or none)", ErrUsage, flagName, RedactURL(addr))
			}
			addrs = append(addrs, o.Addr)
			opt = o
			if first == nil {
				first = o
			}
		}
		// rediss:// URLs keep TLS (with the first node's server name, as
		// go-redis's ParseClusterURL does): credentials never go in clear.
		co := &redis.ClusterOptions{Addrs: addrs, Username: opt.Username, Password: opt.Password,
			TLSConfig: first.TLSConfig, ContextTimeoutEnabled: true}
		if partial {
			dialOnce(&co.DialerRetries, &co.DialTimeout)
		}
		rdb = redis.NewClusterClient(co)
	} else {
		opt, err := parseRedisURL(flagName, addr)
		if err != nil {
			return nil, err
		}
		opt.ContextTimeoutEnabled = true
		if partial {
			dialOnce(&opt.DialerRetries, &opt.DialTimeout)
		}
		single = opt
		rdb = redis.NewClient(opt)
	}
	pctx, cancel := context.WithTimeout(ctx, PingTimeout)
	defer cancel()
	err := ping(pctx, rdb)
	if err == nil && single != nil && clusterNode(pctx, rdb) {
		// One node of a Redis Cluster: a plain client would meet MOVED on
		// every key of another master, so a cluster client finds them from it.
		_ = rdb.Close()
		rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{single.Addr}, Username: single.Username,
			Password: single.Password, TLSConfig: single.TLSConfig, ContextTimeoutEnabled: true,
			DialerRetries: single.DialerRetries, DialTimeout: single.DialTimeout})
		err = ping(pctx, rdb)
	}
	if partial && errors.Is(err, ErrMastersDown) {
		return rdb, fmt.Errorf("redis %s: some masters do not answer: %w", shown, err)
	}
	if err != nil {
		_ = rdb.Close()
		if rerr := redis.Error(nil); errors.As(err, &rerr) { // it answered, with an error
			return nil, fmt.Errorf("redis %s refused the connection (check the user, password and database in %s): %w", shown, flagName, err)
		}
		if primary != "" {
			return nil, fmt.Errorf("redis %s does not answer: the primary the Sentinels name, %s: %w", shown, primary, err)
		}
		return nil, fmt.Errorf("redis %s does not answer: %w", shown, err)
	}
	return rdb, nil
}

// clusterNode reports whether rdb's server runs in cluster mode.
func clusterNode(ctx context.Context, rdb redis.UniversalClient) bool {
	info, err := rdb.Info(ctx, "cluster").Result()
	return err == nil && strings.Contains(info, "cluster_enabled:1")
}

// ping pings the server, or every master of a cluster, naming each master
// that fails: a cluster client's own PING goes to one random master (and
// it learns the masters from one node at a time, so a frozen one holds it
// up), so with one master down a command connected or not by chance, and
// named no master.
func ping(ctx context.Context, rdb redis.UniversalClient) error {
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		return rdb.Ping(ctx).Err()
	}
	opt := cc.Options()
	node := func(addr string) *redis.Client {
		return redis.NewClient(&redis.Options{Addr: addr, Username: opt.Username, Password: opt.Password,
			TLSConfig: opt.TLSConfig, Dialer: opt.Dialer, MaxRetries: -1, PoolSize: 1, ContextTimeoutEnabled: true})
	}
	// Every node given is asked for the masters at once; the first answer wins.
	slots := make(chan []redis.ClusterSlot, len(opt.Addrs))
	var failed []error
	var mu sync.Mutex
	var asked sync.WaitGroup
	for _, a := range opt.Addrs {
		asked.Go(func() {
			c := node(a)
			defer c.Close()
			//lint:ignore SA1019 CLUSTER SHARDS needs Redis 7; CLUSTER SLOTS answers on every version.
			s, err := c.ClusterSlots(ctx).Result()
			if err != nil {
				mu.Lock()
				failed = append(failed, fmt.Errorf("node %s: %w", a, err))
				mu.Unlock()
				return
			}
			slots <- s
		})
	}
	go func() { asked.Wait(); close(slots) }()
	s, ok := <-slots
	if !ok {
		return joined(failed)
	}
	masters := map[string]bool{}
	for _, r := range s {
		if len(r.Nodes) > 0 {
			masters[r.Nodes[0].Addr] = true
		}
	}
	var errs []error
	var pinged sync.WaitGroup
	for m := range masters {
		pinged.Go(func() {
			c := node(m)
			defer c.Close()
			if err := c.Ping(ctx).Err(); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("master %s: %w", m, err))
				mu.Unlock()
			}
		})
	}
	pinged.Wait()
	if len(errs) == 0 {
		return nil
	}
	rerr := redis.Error(nil)
	if len(errs) < len(masters) && !slices.ContainsFunc(errs, func(err error) bool { return errors.As(err, &rerr) }) {
		return mastersDown{joined(errs)}
	}
	return joined(errs)
}

// mastersDown is ping's error when some masters answered: it reads as the
// failures alone and matches ErrMastersDown.
type mastersDown struct{ error }

func (e mastersDown) Unwrap() []error { return []error{ErrMastersDown, e.error} }

// joinedErrors is several errors on one line, sorted, each kept for
// errors.Is and errors.As.
type joinedErrors []error

// joined returns errs as one error, sorted by text.
func joined(errs []error) error {
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return joinedErrors(errs)
}

func (e joinedErrors) Error() string {
	s := make([]string, len(e))
	for i, err := range e {
		s[i] = err.Error()
	}
	return strings.Join(s, "; ")
}

func (e joinedErrors) Unwrap() []error { return e }

// askSentinels asks every Sentinel of fo for the address of its master, so
// that a wrong master name or Sentinels that are all down are named as such
// (the failover client reports either as unreachable Sentinels, or as a
// timeout). It returns the first address a Sentinel names.
func askSentinels(ctx context.Context, fo *redis.FailoverOptions, shown, flagName string) (string, error) {
	type answer struct {
		addr    string
		primary []string
		err     error
	}
	answers := make(chan answer, len(fo.SentinelAddrs))
	for _, a := range fo.SentinelAddrs {
		go func() {
			sc := redis.NewSentinelClient(&redis.Options{Addr: a, Username: fo.SentinelUsername, Password: fo.SentinelPassword,
				TLSConfig: fo.TLSConfig, Dialer: fo.Dialer, MaxRetries: -1, PoolSize: 1, ContextTimeoutEnabled: true})
			defer sc.Close()
			primary, err := sc.GetMasterAddrByName(ctx, fo.MasterName).Result()
			answers <- answer{addr: a, primary: primary, err: err}
		}()
	}
	var errs, servers []string
	unknown := 0
	for range fo.SentinelAddrs {
		a := <-answers
		switch {
		case a.err == nil && len(a.primary) == 2:
			return net.JoinHostPort(a.primary[0], a.primary[1]), nil
		case errors.Is(a.err, redis.Nil):
			unknown++
		case notSentinel(a.err):
			servers = append(servers, a.addr)
		default:
			errs = append(errs, fmt.Sprintf("sentinel %s: %v", a.addr, a.err))
		}
	}
	if len(servers) > 0 {
		sort.Strings(servers)
		return "", fmt.Errorf("redis %s: %w: %s (a redis-sentinel:// address names Sentinels, by default on port %s, not the Redis servers)",
			shown, epoch.ErrNotSentinel, strings.Join(servers, ", "), DefaultSentinelPort)
	}
	if unknown > 0 {
		return "", fmt.Errorf("redis %s: %w: no Sentinel that answers monitors a master named %q (check the master name in %s; SENTINEL MASTERS lists the names)",
			shown, ErrSentinelMaster, fo.MasterName, flagName)
	}
	sort.Strings(errs)
	return "", fmt.Errorf("redis %s does not answer: no Sentinel answers (%s)", shown, strings.Join(errs, "; "))
}

// notSentinel reports whether err is a Redis server's answer to a SENTINEL
// command it does not know: the address is not a Sentinel's.
func notSentinel(err error) bool {
	var rerr redis.Error
	msg := ""
	if err != nil {
		msg = strings.ToLower(err.Error())
	}
	return errors.As(err, &rerr) && strings.Contains(msg, "unknown command") && strings.Contains(msg, "sentinel")
}

// ErrSentinelMaster is ConnectRedis's error when the Sentinels of a
// redis-sentinel:// address answer but none monitors the master it names.
var ErrSentinelMaster = errors.New("unknown Sentinel master")

// The schemes of a --redis address naming Sentinels (see ParseSentinelURL).
const (
	sentinelScheme    = "redis-sentinel://"
	sentinelTLSScheme = "rediss-sentinel://"
)

// DefaultSentinelPort is the port of a Sentinel address given without one.
const DefaultSentinelPort = "26379"

func isSentinelURL(addr string) bool {
	addr = strings.TrimSpace(addr)
	return strings.HasPrefix(addr, sentinelScheme) || strings.HasPrefix(addr, sentinelTLSScheme)
}

// ParseSentinelURL reads a --redis address naming a Redis deployment
// watched by Sentinels:
//
//	redis-sentinel://[user:password@]host:port[,host:port...]/master[/db]
//
// The hosts are the Sentinels (port 26379 when left out), master the name
// they monitor the primary under, db the database (0 when left out).
// user and password, percent-encoded, are the Redis servers' credentials
// (the Sentinels are reached without). rediss-sentinel:// uses TLS to the
// Sentinels and the servers. The options are those of
// redis.NewFailoverClient; give the same to jobs.Config.Sentinel, so the
// tokens a process mints take their failover epoch from the Sentinels
// (see SentinelOptions). A malformed address is a usage error naming the
// flag, its password hidden.
func ParseSentinelURL(addr string) (*redis.FailoverOptions, error) {
	return parseSentinelURL("--redis", addr)
}

// parseSentinelURL is ParseSentinelURL of an address given to flag
// flagName, which its errors name.
func parseSentinelURL(flagName, addr string) (*redis.FailoverOptions, error) {
	addr = strings.TrimSpace(addr)
	bad := func(why string) error {
		return fmt.Errorf("%w: %s %q: %s (want redis-sentinel://[user:password@]host:port[,host:port...]/master[/db])",
			ErrUsage, flagName, RedactURL(addr), why)
	}
	fo := &redis.FailoverOptions{}
	rest, ok := strings.CutPrefix(addr, sentinelScheme)
	if !ok {
		rest, ok = strings.CutPrefix(addr, sentinelTLSScheme)
		if !ok {
			return nil, bad("not a Sentinel URL")
		}
		fo.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12} // server name: each host dialled
	}
	if strings.ContainsAny(rest, "?#") {
		return nil, bad("query parameters and fragments are not read")
	}
	// The user and password end at the last '@', so a password holding a
	// '/' or a ',' is neither split into hosts nor quoted in a message.
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		user, pass, _ := strings.Cut(rest[:at], ":")
		var err1, err2 error
		fo.Username, err1 = url.PathUnescape(user)
		fo.Password, err2 = url.PathUnescape(pass)
		if err1 != nil || err2 != nil {
			return nil, bad("malformed user or password")
		}
		rest = rest[at+1:]
	}
	hosts, path, _ := strings.Cut(rest, "/")
	for _, h := range strings.Split(hosts, ",") {
		h = strings.TrimSpace(h)
		if h == "" {
			return nil, bad("an empty Sentinel address")
		}
		host, port, err := net.SplitHostPort(h)
		if err != nil {
			host, port = h, DefaultSentinelPort
			if strings.Contains(h, ":") && !strings.HasPrefix(h, "[") {
				return nil, bad(fmt.Sprintf("Sentinel address %q: %v", h, err))
			}
			host = strings.Trim(host, "[]")
		}
		if n, err := strconv.Atoi(port); host == "" || err != nil || n <= 0 || n > 65535 {
			return nil, bad(fmt.Sprintf("Sentinel address %q: want host:port", h))
		}
		fo.SentinelAddrs = append(fo.SentinelAddrs, net.JoinHostPort(host, port))
	}
	master, db, hasDB := strings.Cut(path, "/")
	master, err := url.PathUnescape(master)
	if err != nil || master == "" {
		return nil, bad("no master name (the name the Sentinels monitor the primary under)")
	}
	fo.MasterName = master
	if hasDB {
		n, err := strconv.Atoi(db)
		if err != nil || n < 0 {
			return nil, bad(fmt.Sprintf("database %q is not a number", db))
		}
		fo.DB = n
	}
	return fo, nil
}

// SentinelOptions returns the failover options of a --redis address of the
// Sentinel form (ParseSentinelURL), for jobs.Config.Sentinel; nil for any
// other address, or a malformed one (ConnectRedis reports it).
func SentinelOptions(addr string) *redis.FailoverOptions {
	if !isSentinelURL(addr) {
		return nil
	}
	fo, err := ParseSentinelURL(addr)
	if err != nil {
		return nil
	}
	return fo
}

// ParseRedisURL reads one --redis address: a redis:// or rediss:// URL,
// or a bare host:port, read as redis://host:port. A malformed one is a
// usage error naming the flag.
func ParseRedisURL(addr string) (*redis.Options, error) {
	return parseRedisURL("--redis", addr)
}

// parseRedisURL is ParseRedisURL of an address given to flag flagName,
// which its errors name.
func parseRedisURL(flagName, addr string) (*redis.Options, error) {
	addr = strings.TrimSpace(addr)
	if !credentialsParse(withScheme(addr)) {
		return nil, malformedCredentials(flagName, addr, "want host:port or redis://[user:password@]host:port/db")
	}
	opt, err := redis.ParseURL(withScheme(addr))
	if err != nil {
		// A url.Error repeats the URL, password and all: keep its cause.
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return nil, fmt.Errorf("%w: %s %q: %v (want host:port or redis://[user:password@]host:port/db)", ErrUsage, flagName, RedactURL(addr), err)
	}
	if err := checkHostPort(withScheme(addr)); err != nil {
		return nil, fmt.Errorf("%w: %s %q: %v (want host:port or redis://[user:password@]host:port/db)", ErrUsage, flagName, RedactURL(addr), err)
	}
	return opt, nil
}

// checkHostPort checks the host:port of a URL the Redis client accepted:
// it would read "h:1:2" as host "h:1", port 2, and take any port number.
func checkHostPort(u string) error {
	p, err := url.Parse(u)
	if err != nil {
		return err
	}
	if !strings.HasPrefix(p.Host, "[") && strings.Count(p.Host, ":") > 1 {
		return fmt.Errorf("host:port %q has more than one colon (an IPv6 address goes in brackets: [::1]:6379)", p.Host)
	}
	if port := p.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("port %q is outside 1-65535", port)
		}
	}
	return nil
}

// credentialsParse reports whether a URL holding an '@' parses with its
// user and password before that '@'. A password typed with a character a
// URL reserves (/ ? #) ends the host early, and a parser's message about the
// rest (an invalid port, database or option) would quote part of it.
func credentialsParse(u string) bool {
	if !strings.Contains(u, "@") {
		return true
	}
	p, err := url.Parse(u)
	return err == nil && p.User != nil && !strings.Contains(p.Host+p.Path+p.RawQuery+p.Fragment, "@")
}

// malformedCredentials is the usage error for an address whose user or
// password does not parse: it names the address with the password hidden
// and quotes no part of it.
func malformedCredentials(flagName, addr, want string) error {
	return fmt.Errorf("%w: %s %q: malformed address: percent-encode the characters / ? # , %% in the user name and password (%s)",
		ErrUsage, flagName, RedactURL(addr), want)
}

// withScheme reads each comma-separated address without a scheme as
// redis://.
func withScheme(addr string) string {
	parts := strings.Split(addr, ",")
	for i, p := range parts {
		p = strings.TrimSpace(p)
		if p != "" && !strings.Contains(p, "://") {
			p = "redis://" + p
		}
		parts[i] = p
	}
	return strings.Join(parts, ",")
}

// RedactURL hides a password in a URL (or in each of comma-separated ones)
// for messages: everything from a URL's scheme (or the start) to its last
// '@'. A URL runs to the next comma followed by a scheme, so a password
// holding a comma, a "://" or another '@' is hidden whole.
func RedactURL(u string) string {
	var b strings.Builder
	for {
		end := len(u)
		for i := strings.IndexByte(u, ','); i >= 0; i = nextComma(u, i) {
			if schemeLen(u[i+1:]) > 0 {
				end = i
				break
			}
		}
		one := u[:end]
		start := schemeLen(one)
		if at := strings.LastIndex(one, "@"); at >= start {
			one = one[:start] + "***" + one[at:]
		}
		b.WriteString(one)
		if end == len(u) {
			return b.String()
		}
		b.WriteByte(',')
		u = u[end+1:]
	}
}

// nextComma returns the index of the first comma in u after index i, -1
// when there is none.
func nextComma(u string, i int) int {
	j := strings.IndexByte(u[i+1:], ',')
	if j < 0 {
		return -1
	}
	return i + 1 + j
}

// schemeLen is the length of the scheme and "://" that u starts with
// ("redis://", "rediss-sentinel://"), 0 when it starts with none.
func schemeLen(u string) int {
	for i := 0; i < len(u); i++ {
		c := u[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case i > 0 && (c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			if i > 0 && strings.HasPrefix(u[i:], "://") {
				return i + 3
			}
			return 0
		}
	}
	return 0
}

// LogFlags are the --log-level and --log-format flags. Bad values are
// usage errors when the flags are parsed.
type LogFlags struct {
	level  slog.Level
	format logFormat
}

// logFormat is "json" or "text".
type logFormat string

func (f *logFormat) String() string { return string(*f) }

func (f *logFormat) Set(s string) error {
	if s != "json" && s != "text" {
		return errors.New("want json or text")
	}
	*f = logFormat(s)
	return nil
}

// Add defines the flags on fs: JSON logs at level unless told otherwise.
func (l *LogFlags) Add(fs *flag.FlagSet, level slog.Level) {
	l.format = "json"
	fs.TextVar(&l.level, "log-level", level, "log level: debug, info, warn or error")
	fs.Var(&l.format, "log-format", "log format: json or text (every line of the process in that format)")
}

// Logger returns the process's logger, writing to w: one format for every
// line, durations as text ("10s", not nanoseconds).
func (l *LogFlags) Logger(w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: l.level, ReplaceAttr: durationsAsText}
	if l.format == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(JSONWriter(w), opts))
}

func durationsAsText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}

// CheckAddr refuses, as a usage error naming the flag flagName, an addr
// that is no TCP listen address: not host:port, or a port that is neither
// a number from 0 to 65535 nor a service name. It resolves no host.
func CheckAddr(flagName, addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err == nil {
		_, err = net.LookupPort("tcp", port)
	}
	if err != nil {
		return fmt.Errorf("%w: %s %q: want host:port with a port from 0 to 65535 (e.g. 127.0.0.1:8080, or :8080 for every interface): %v",
			ErrUsage, flagName, addr, err)
	}
	return nil
}

// Listen opens addr, given by the flag flagName, saying what to do when the
// port is taken. A malformed addr is a usage error (see CheckAddr).
func Listen(flagName, addr string) (net.Listener, error) {
	if err := CheckAddr(flagName, addr); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		return ln, nil
	}
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, fmt.Errorf("%s %s: the address is in use (another process serves on it); choose a free port, or port 0 for any (e.g. %s 127.0.0.1:0): %w",
			flagName, addr, flagName, err)
	}
	return nil, fmt.Errorf("%s %s: %w", flagName, addr, err)
}

// ListenAndServe opens addr, given by the flag flagName (see Listen),
// passes the bound address to ready (when not nil), and serves h until ctx
// ends (see Serve).
func ListenAndServe(ctx context.Context, flagName, addr string, h http.Handler, ready func(addr string)) error {
	ln, err := Listen(flagName, addr)
	if err != nil {
		return err
	}
	if ready != nil {
		ready(ln.Addr().String())
	}
	return Serve(ctx, ln, h)
}

// Serve serves h on ln until ctx ends, then shuts the server down and
// returns once the requests in flight were answered (waiting up to 5s for
// them), so the caller does not close what they use under them. A request
// must arrive whole within 30s (its headers within 10s), and a keep-alive
// connection idle for a minute is closed.
func Serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := newServer(h)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	// Serve returns at once when Shutdown starts; Shutdown returns when
	// the requests in flight are done.
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	<-stopped
	return nil
}

// idleTimeout is how long a keep-alive connection may wait for its next
// request (a variable for tests).
var idleTimeout = time.Minute

// newServer is Serve's server for h: 10s to read a request's headers, 30s
// for the whole request, and idleTimeout for a keep-alive connection
// between requests, so a client that sends slowly or never closes does not
// hold a connection for good. Writing has no bound: a slow reader's
// answer is not cut.
func newServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, IdleTimeout: idleTimeout}
}

// Healthz answers "ok" while Redis answers, 503 otherwise.
func Healthz(ping func(context.Context) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := ping(r.Context()); err != nil {
			http.Error(w, "redis: unavailable", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	}
}
