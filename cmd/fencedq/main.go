// Command fencedq runs fencedq worker pools, its dashboard, operator
// commands, and a self-contained demo.
//
//	fencedq demo        run the whole system on an embedded Redis and stage failures
//	fencedq worker      run a worker pool for the example kinds (bank transfers)
//	fencedq dashboard   serve the dashboard and /metrics
//	fencedq enqueue     enqueue a job
//	fencedq inspect     list jobs by state, list queues (counts, paused), or show one job
//	fencedq resolve     decide on a job in review or uncertain, or re-run a dead or cancelled one
//	fencedq cancel      cancel a pending job, or ask a running one to stop
//	fencedq run-now     make a scheduled job due at once
//	fencedq pause       stop pools from starting a queue's jobs
//	fencedq resume      let pools start a paused queue's jobs again
//	fencedq queues      list the queues: jobs per state, paused or not
//	fencedq pools       list the live worker pools and the reconciler's leader
//	fencedq schedules   list the periodic schedules: next and last tick, the job each tick produced
//
// The operator commands (resolve, cancel, pause, resume) need --actor, the
// operator's name, recorded as operator:<actor> with the action and its
// --note (required for cancel and pause). A cancelled job is final unless
// re-run (resolve --decision rerun). Cancelling a running job asks its
// attempt to stop through its context; its outcome is still committed by
// its token, and a retry it asks for becomes cancelled. A paused queue
// starts no new attempts; running ones finish and enqueues are accepted.
//
// Every flag can also be set with an environment variable FENCEDQ_<FLAG>
// (upper case, dashes as underscores), e.g. FENCEDQ_REDIS, FENCEDQ_POSTGRES,
// FENCEDQ_NAMESPACE, FENCEDQ_ADDR, FENCEDQ_DASHBOARD_USER,
// FENCEDQ_DASHBOARD_PASSWORD. Flags win over the environment.
//
// fencedq demo runs in a fresh namespace (demo-<random>) unless given one,
// says when new jobs stop, prints its summary and a verdict for every
// staged failure and every global check (what happened, what had to
// happen, PASS, FAIL, or NOT RUN for a stage the run ended before), and
// keeps the dashboard up until Ctrl-C (--exit, or --json, ends it after the
// summary); it exits 1 when a check failed, with --json as without (the
// JSON's "verdicts" carry check, job_id, happened, required and result).
//
// Logs are JSON (--log-format text for text), one format for every line of
// a process, with durations as text ("10s"). A worker whose --metrics-addr
// (or a dashboard whose --addr) is taken exits 1 at once, naming the
// address.
//
// Exit codes: 0 success, 1 failure (including a missing job, or a job in a
// state the action does not take), 2 bad usage.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/jobs"
)

// command is one subcommand.
type command struct {
	name    string
	summary string
	// setup defines the flags; run does the work.
	setup func(fs *flag.FlagSet) func(ctx context.Context, out io.Writer) error
}

var commands = []command{
	{"demo", "run the whole system on an embedded Redis and stage the classic failures", demoCmd},
	{"worker", "run a worker pool for the example kinds (bank transfers)", workerCmd},
	{"dashboard", "serve the dashboard and /metrics", dashboardCmd},
	{"enqueue", "enqueue a job", enqueueCmd},
	{"inspect", "list jobs by state, list queues (counts, paused), or show one job's history", inspectCmd},
	{"resolve", "decide on a job in review or uncertain (succeeded, rerun, dead), or re-run a dead or cancelled job", resolveCmd},
	{"cancel", "cancel a pending or scheduled job, or ask a running job to stop", cancelCmd},
	{"run-now", "make a scheduled job due at once", runNowCmd},
	{"pause", "pause a queue: pools start none of its jobs until it is resumed", pauseCmd},
	{"resume", "resume a paused queue", resumeCmd},
	{"queues", "list the queues: jobs per state, and whether each is paused", queuesCmd},
	{"pools", "list the live worker pools and which one leads the reconciler", poolsCmd},
	{"schedules", "list the periodic schedules: last and next tick, and the job each tick produced", schedulesCmd},
}

// errUsage marks bad flags or arguments (exit code 2).
var errUsage = errors.New("usage")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "fencedq: job queue workers with fenced leases")
	fmt.Fprintln(w, "\nUsage: fencedq <command> [flags]\n\nCommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'fencedq <command> --help' for a command's flags. Every flag can also be")
	fmt.Fprintln(w, "set with FENCEDQ_<FLAG> (e.g. FENCEDQ_REDIS, FENCEDQ_NAMESPACE).")
}

// pingTimeout bounds the first contact with Redis.
const pingTimeout = 5 * time.Second

// quietRedis drops the Redis client's own log lines (its dial retries):
// a command reports a failure once, as its error.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

// run executes args and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	redis.SetLogger(quietRedis{})
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		return 0
	}
	for _, c := range commands {
		if c.name != args[0] {
			continue
		}
		fs := flag.NewFlagSet("fencedq "+c.name, flag.ContinueOnError)
		do := c.setup(fs)
		// The flag package would print the usage on every parse error and
		// on --help; the usage is printed here instead, once.
		fs.SetOutput(io.Discard)
		fs.Usage = func() {}
		if err := fs.Parse(args[1:]); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fs.SetOutput(stdout)
				fmt.Fprintf(stdout, "Usage: fencedq %s [flags]\n\n%s.\n\nFlags (or FENCEDQ_<FLAG> environment variables):\n", c.name, c.summary)
				fs.PrintDefaults()
				return 0
			}
			fmt.Fprintf(stderr, "fencedq %s: %v\nRun 'fencedq %s --help' for its flags.\n", c.name, err, c.name)
			return 2
		}
		if fs.NArg() > 0 {
			fmt.Fprintf(stderr, "fencedq %s: unexpected argument %q\n", c.name, fs.Arg(0))
			return 2
		}
		if err := applyEnv(fs); err != nil {
			fmt.Fprintf(stderr, "fencedq %s: %v\n", c.name, err)
			return 2
		}
		if err := do(ctx, stdout); err != nil {
			fmt.Fprintf(stderr, "fencedq %s: %v\n", c.name, err)
			if errors.Is(err, errUsage) {
				return 2
			}
			return 1
		}
		return 0
	}
	fmt.Fprintf(stderr, "fencedq: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

// applyEnv sets every flag not given on the command line from FENCEDQ_<FLAG>.
func applyEnv(fs *flag.FlagSet) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var errs []string
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] {
			return
		}
		key := "FENCEDQ_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(key); ok {
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Sprintf("%s=%q: %v", key, v, err))
			}
		}
	})
	if len(errs) > 0 {
		sort.Strings(errs)
		return fmt.Errorf("%w: %s", errUsage, strings.Join(errs, "; "))
	}
	return nil
}

// connectRedis opens a Redis client from a URL; several comma-separated
// URLs make a cluster client.
func connectRedis(ctx context.Context, url string) (redis.UniversalClient, error) {
	var rdb redis.UniversalClient
	if strings.Contains(url, ",") {
		var addrs []string
		var opt *redis.Options
		for _, u := range strings.Split(url, ",") {
			o, err := redis.ParseURL(strings.TrimSpace(u))
			if err != nil {
				return nil, fmt.Errorf("%w: --redis %q: %v", errUsage, u, err)
			}
			addrs = append(addrs, o.Addr)
			opt = o
		}
		rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, Username: opt.Username, Password: opt.Password})
	} else {
		opt, err := redis.ParseURL(url)
		if err != nil {
			return nil, fmt.Errorf("%w: --redis %q: %v", errUsage, url, err)
		}
		rdb = redis.NewClient(opt)
	}
	pctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	if err := rdb.Ping(pctx).Err(); err != nil {
		_ = rdb.Close()
		return nil, fmt.Errorf("redis %s does not answer: %w", redactURL(url), err)
	}
	return rdb, nil
}

// redactURL hides a password in a URL for messages.
func redactURL(u string) string {
	at := strings.LastIndex(u, "@")
	scheme := strings.Index(u, "://")
	if at < 0 || scheme < 0 {
		return u
	}
	return u[:scheme+3] + "***" + u[at:]
}

// commonFlags are shared by the commands that talk to Redis.
type commonFlags struct {
	redis     string
	namespace string
}

// openClient connects to Redis and returns a jobs client on the namespace;
// closeAll releases both.
func (c *commonFlags) openClient(ctx context.Context) (client *jobs.Client, closeAll func(), err error) {
	rdb, err := connectRedis(ctx, c.redis)
	if err != nil {
		return nil, nil, err
	}
	client = jobs.NewClient(rdb, jobs.Config{Namespace: c.namespace})
	return client, func() { _ = client.Close(); _ = rdb.Close() }, nil
}

func (c *commonFlags) add(fs *flag.FlagSet) {
	fs.StringVar(&c.redis, "redis", "redis://127.0.0.1:6379/0", "Redis URL (comma-separated URLs for a Redis Cluster)")
	fs.StringVar(&c.namespace, "namespace", "fq", "key namespace (must match the workers')")
}
