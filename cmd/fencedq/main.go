// Command fencedq is the operator's tool: the dashboard and the operator
// commands. Worker pools are the application's own processes; the bank
// example's is examples/bank/cmd/bank-worker (go run
// ./examples/bank/cmd/bank-worker --help). The demo, which stages
// failures, is its own command, cmd/fencedq-demo (go run
// ./cmd/fencedq-demo), so that nothing aimed at production can start it.
//
//	fencedq dashboard   serve the dashboard and /metrics
//	fencedq enqueue     enqueue a job
//	fencedq inspect     list jobs by state, or show one job and its history
//	fencedq resolve     decide on a job in review or uncertain, or re-run a dead or cancelled one
//	fencedq cancel      cancel a pending job, or ask a running one to stop
//	fencedq run-now     make a scheduled job due at once
//	fencedq pause       stop pools from starting a queue's jobs
//	fencedq resume      let pools start a paused queue's jobs again
//	fencedq queues      list the queues: jobs per state, paused or not
//	fencedq partitions  show a queue's partitions, or declare how many it has
//	fencedq pools       list the live worker pools (with Redis's clock against each) and the maintenance leader
//	fencedq schedules   list the periodic schedules: next and last tick, the job each tick produced
//	fencedq workflow inspect  list the newest workflows, or show one with its steps
//	fencedq workflow cancel   cancel a workflow's steps that have not run
//
// The operator commands (resolve, cancel, run-now, pause, resume, workflow
// cancel, and partitions --set, schedules --remove) need --actor, the
// operator's name, recorded as operator:<actor> with the action and its
// --note (required for cancel, pause and workflow cancel). A cancelled job is final unless
// re-run (resolve --decision rerun). A rerun or dead decision on a job in
// uncertain or review says its last attempt did not apply, yet that
// attempt may still be running: resolve then needs the store the handlers
// write through, --fence-postgres URL (with --fence-postgres-schema and
// --fence-postgres-table-prefix, pgfence's options) or --fence-redis URL
// (with --fence-redis-namespace, --namespace by default), and fences the
// attempt out of it before it decides; without one it refuses (exit 1,
// nothing decided) unless --unfenced is given. The dashboard takes the
// same flags for its re-runs and dead decisions, and with actions enabled
// refuses to start without a store unless --unfenced is given. Cancelling a running job asks its
// attempt to stop through its context; its outcome is still committed by
// its token, and a retry it asks for becomes cancelled. A paused queue
// starts no new attempts; running ones finish and enqueues are accepted.
//
// The environment configures only where to connect, who acts, where to
// listen, the dashboard's credentials and logging: FENCEDQ_REDIS,
// FENCEDQ_FENCE_POSTGRES, FENCEDQ_FENCE_REDIS, FENCEDQ_NAMESPACE,
// FENCEDQ_ACTOR, FENCEDQ_ADDR, FENCEDQ_DASHBOARD_USER,
// FENCEDQ_DASHBOARD_PASSWORD, FENCEDQ_DASHBOARD_TOKEN, FENCEDQ_CSRF_KEY,
// FENCEDQ_LOG_LEVEL and FENCEDQ_LOG_FORMAT set the flags of the same names
// (flags win). Flags that say what an action
// does (--queue, --job, --op, --decision, --note, --state, --kind, ...)
// come from the command line only; a FENCEDQ_ variable naming one is
// ignored, with a warning. Each command's --help lists the variables it
// reads. --redis takes a URL (redis://[user:password@]host:port/db,
// rediss:// for TLS, comma-separated URLs for a Redis Cluster,
// redis-sentinel://[user:password@]host:port[,host:port...]/master[/db]
// for a primary found through Sentinels) or a bare host:port.
//
// Logs are JSON (--log-format text for text), one format for every line of
// a process, with durations as text ("10s"). A dashboard whose --addr is
// taken exits 1 at once, naming the address.
//
// Exit codes: 0 success, 1 failure (including a missing job, or a job in a
// state the action does not take, and a partial answer: with a Cluster
// master down, a listing prints what it read, then fails naming what it
// could not read), 2 bad usage (including a flag the mode
// given does nothing with: schedules --removed --id, inspect --job --limit).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/internal/cli"
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
	{"dashboard", "serve the dashboard and /metrics", dashboardCmd},
	{"enqueue", "enqueue a job", enqueueCmd},
	{"inspect", "list jobs by state, or show one job and its history", inspectCmd},
	{"resolve", "decide on a job in review or uncertain (succeeded, rerun, dead), or re-run a dead or cancelled job", resolveCmd},
	{"cancel", "cancel a pending or scheduled job, or ask a running job to stop", cancelCmd},
	{"run-now", "make a scheduled job due at once", runNowCmd},
	{"pause", "pause a queue: pools start none of its jobs until it is resumed", pauseCmd},
	{"resume", "resume a paused queue", resumeCmd},
	{"queues", "list the queues: jobs per state, and whether each is paused (a partitioned queue with each partition and its master)", queuesCmd},
	{"partitions", "show a queue's partitions, or declare how many it has (--set)", partitionsCmd},
	{"pools", "list the live worker pools and which one is the maintenance leader", poolsCmd},
	{"schedules", "list the periodic schedules: last and next tick, and the job each tick produced", schedulesCmd},
	{"workflow inspect", "list the newest workflows, or show one (--id): each step's dependencies, state, token and output", workflowInspectCmd},
	{"workflow cancel", "cancel a workflow: its waiting and pending steps are cancelled, running ones asked to stop", workflowCancelCmd},
}

// errUsage marks bad flags or arguments (exit code 2).
var errUsage = cli.ErrUsage

// movedWorker answers `fencedq worker`: the bank example's worker pool is
// the example's own command now.
const movedWorker = `fencedq: "worker" is not a fencedq command: the bank example's worker pool is its own command, bank-worker (go run ./examples/bank/cmd/bank-worker --help)`

// movedDemo answers `fencedq demo`: the demo stages failures, so it is a
// command of its own that reads no environment variable.
const movedDemo = `fencedq: "demo" is not a fencedq command: the demo is its own command, fencedq-demo (go run ./cmd/fencedq-demo --help); it reads no FENCEDQ_ variable and runs only in a namespace of its own`

func main() {
	ctx, stop := cli.SignalContext("fencedq", os.Stderr)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "fencedq: the operator's tool for fencedq job queues (the dashboard, operator commands)")
	fmt.Fprintln(w, "\nUsage: fencedq <command> [flags]\n\nCommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-17s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'fencedq <command> --help' for a command's flags. The environment sets only")
	fmt.Fprintln(w, "the connection, identity, address, credential and logging flags:")
	line := " "
	for _, v := range envVars() {
		if len(line)+len(v) > 78 {
			fmt.Fprintln(w, line)
			line = " "
		}
		line += " " + v
	}
	fmt.Fprintln(w, line)
	fmt.Fprintln(w, "Flags that say what an action does (--queue, --job, --decision, ...) come from")
	fmt.Fprintln(w, "the command line only. The demo is its own command: go run ./cmd/fencedq-demo")
	fmt.Fprintln(w, "\nExit codes: 0 success, 1 failure (among them a job, workflow or schedule not")
	fmt.Fprintln(w, "found, a job in a state the action does not take, or a partial answer: with a")
	fmt.Fprintln(w, "Cluster master down, a listing prints what it read, then names what it could")
	fmt.Fprintln(w, "not read), 2 bad usage.")
}

// envVars lists, sorted, the FENCEDQ_ variables some command reads.
func envVars() []string {
	var vars []string
	for _, c := range commands {
		fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
		c.setup(fs)
		for _, v := range cli.EnvVars(fs) {
			if !slices.Contains(vars, v) {
				vars = append(vars, v)
			}
		}
	}
	slices.Sort(vars)
	return vars
}

// run executes args and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		return 0
	}
	if subs := subcommands(args[0]); len(subs) > 0 { // two-word commands
		if len(args) > 1 && slices.Contains(subs, args[0]+" "+args[1]) {
			args = append([]string{args[0] + " " + args[1]}, args[2:]...)
		} else if len(args) > 1 && (args[1] == "-h" || args[1] == "--help" || args[1] == "help") {
			fmt.Fprintf(stdout, "Usage: fencedq %s <command> [flags]\n\nCommands:\n", args[0])
			for _, c := range commands {
				if slices.Contains(subs, c.name) {
					fmt.Fprintf(stdout, "  %-17s %s\n", c.name, c.summary)
				}
			}
			return 0
		} else {
			fmt.Fprintf(stderr, "fencedq %s: give a command: %s\n", args[0], strings.Join(prefixed("fencedq ", subs), " or "))
			return 2
		}
	}
	for _, c := range commands {
		if c.name == args[0] {
			fs := flag.NewFlagSet("fencedq "+c.name, flag.ContinueOnError)
			return cli.Run(ctx, fs, c.summary, c.setup(fs), args[1:], stdout, stderr)
		}
	}
	switch args[0] {
	case "worker":
		fmt.Fprintln(stderr, movedWorker)
		return 2
	case "demo":
		fmt.Fprintln(stderr, movedDemo)
		return 2
	}
	if fix := flagsFirst(args); fix != "" {
		fmt.Fprintf(stderr, "fencedq: flags follow the command: %s\n", fix)
		return 2
	}
	fmt.Fprintf(stderr, "fencedq: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

// flagsFirst returns the command line with the command first when args
// begin with flags and name a command after them ("--redis h:p queues" gives
// "fencedq queues --redis …"), "" when they do not. Only the command's flag
// names are repeated; values (a flag's value may be a password, even one
// starting with a dash) and any other word are shown as "…".
func flagsFirst(args []string) string {
	if !strings.HasPrefix(args[0], "-") {
		return ""
	}
	for i, a := range args {
		name := a
		if subs := subcommands(a); len(subs) > 0 && i+1 < len(args) && slices.Contains(subs, a+" "+args[i+1]) {
			name = a + " " + args[i+1]
		}
		at := slices.IndexFunc(commands, func(c command) bool { return c.name == name })
		if at < 0 {
			continue
		}
		fs := flag.NewFlagSet(name, flag.ContinueOnError)
		commands[at].setup(fs)
		n := len(strings.Fields(name))
		words := slices.Clone(args[i : i+n])
		value := false // the word is the value of the flag before it
		for _, w := range slices.Concat(args[:i], args[i+n:]) {
			f, hasValue := knownFlag(fs, w)
			switch {
			case value || f == nil:
				words, value = append(words, "…"), false
			case hasValue:
				words = append(words, "--"+f.Name+"=…")
			default:
				words = append(words, "--"+f.Name)
				b, ok := f.Value.(interface{ IsBoolFlag() bool })
				value = !ok || !b.IsBoolFlag()
			}
		}
		return "fencedq " + strings.Join(words, " ")
	}
	return ""
}

// knownFlag returns the flag of fs that w names ("-name", "--name",
// "--name=value"; nil for any other word) and whether w holds its value.
func knownFlag(fs *flag.FlagSet, w string) (*flag.Flag, bool) {
	name, ok := strings.CutPrefix(w, "-")
	if !ok {
		return nil, false
	}
	name = strings.TrimPrefix(name, "-")
	name, _, hasValue := strings.Cut(name, "=")
	return fs.Lookup(name), hasValue
}

// subcommands lists the commands of a two-word group ("workflow inspect",
// "workflow cancel" for "workflow"), nil for any other word.
func subcommands(group string) []string {
	var subs []string
	for _, c := range commands {
		if g, _, ok := strings.Cut(c.name, " "); ok && g == group {
			subs = append(subs, c.name)
		}
	}
	return subs
}

// prefixed returns each of names with p before it.
func prefixed(p string, names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = p + n
	}
	return out
}

// commonFlags are shared by the commands that talk to Redis.
type commonFlags struct {
	redis     string
	namespace string
	// replicas is the workers' jobs.Config.Durability.Replicas: operator
	// actions wait for that many replicas (0: off).
	replicas int
	// down is set by openClient when some Cluster masters did not answer
	// (matching cli.ErrMastersDown, naming them).
	down error
	// fencer, set before openClient, is the client's jobs.Config.Fencer:
	// the store an operator's "not applied" decision fences the job's last
	// attempt out of first (nil: none).
	fencer fence.Fencer
}

// openClient connects to Redis and returns a jobs client on the namespace;
// closeAll releases both. An invalid namespace is bad usage, refused
// before connecting, and so is an empty one (an unset shell variable,
// "--namespace $NS"): it would act on the default namespace fq unseen.
// On Redis Cluster with some masters down (not all) it connects all the
// same, and sets c.down: a listing prints what the other masters hold and
// ends with an error matching jobs.ErrPartial naming what it could not
// read; an action on a job or queue whose master answers goes through,
// and one whose master is down fails naming it. With --replicas the
// client's operator actions wait for that many replicas (durable mode,
// as the workers'); a negative count is bad usage.
func (c *commonFlags) openClient(ctx context.Context) (client *jobs.Client, closeAll func(), err error) {
	if err := c.checkNamespace(); err != nil {
		return nil, nil, err
	}
	durability := jobs.Durability{Replicas: c.replicas}
	if err := (jobs.Config{Durability: durability}).Validate(); err != nil {
		return nil, nil, fmt.Errorf("%w: --replicas: %v", errUsage, err)
	}
	rdb, err := cli.ConnectRedisPartial(ctx, c.redis)
	if errors.Is(err, cli.ErrMastersDown) {
		c.down, err = err, nil
	}
	if err != nil {
		return nil, nil, err
	}
	// A Sentinel address gives its options to the client as well, as a
	// failover deployment's every process does (see jobs.Config.Sentinel).
	client = jobs.NewClient(rdb, jobs.Config{Namespace: c.namespace, Sentinel: cli.SentinelOptions(c.redis), Durability: durability, Fencer: c.fencer})
	return client, func() { _ = client.Close(); _ = rdb.Close() }, nil
}

// checkNamespace refuses, as bad usage, an empty or invalid --namespace.
func (c *commonFlags) checkNamespace() error {
	if c.namespace == "" {
		return fmt.Errorf("%w: --namespace is empty: name the workers' namespace (fq when the flag is not given)", errUsage)
	}
	if err := (jobs.Config{Namespace: c.namespace}).Validate(); err != nil {
		return fmt.Errorf("%w: --namespace: %v", errUsage, err)
	}
	return nil
}

func (c *commonFlags) add(fs *flag.FlagSet) {
	fs.StringVar(&c.redis, "redis", "redis://127.0.0.1:6379/0", "Redis URL or host:port (comma-separated for a Redis Cluster; redis-sentinel://host:port[,host:port...]/master[/db] through Sentinels)")
	fs.StringVar(&c.namespace, "namespace", "fq", "key namespace (must match the workers')")
	rangedInt(fs, &c.replicas, "replicas", 0, 0, 1000, "durable mode: replicas that must acknowledge each operator action, as the workers' jobs.Config.Durability.Replicas (0: off); one too few acknowledge fails, saying it applied on the primary only")
}

// ignoredIn returns a usage error naming the first of the flags names given
// on the command line, which mode (a flag, as typed) does nothing with; nil
// when none was given. Only flags the environment cannot set are checked:
// a FENCEDQ_ variable applies to every mode.
func ignoredIn(fs *flag.FlagSet, mode string, names ...string) error {
	var err error
	fs.Visit(func(f *flag.Flag) {
		if err == nil && slices.Contains(names, f.Name) && !slices.Contains(cli.EnvFlags(), f.Name) {
			err = fmt.Errorf("%w: --%s does nothing with %s: leave it out", errUsage, f.Name, mode)
		}
	})
	return err
}
