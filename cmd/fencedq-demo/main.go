// Command fencedq-demo runs the whole system on an embedded Redis and
// stages the classic failures live: two worker pools, the reconciler and
// the dashboard, a stream of bank transfers (the bank example's), a worker
// paused past its lease that is fenced out, a worker process killed with
// SIGKILL after its write, storage that answers after the job's timeout,
// duplicate submissions and a duplicate delivery.
//
//	go run ./cmd/fencedq-demo
//	go run ./cmd/fencedq-demo --help
//
// It runs in a fresh namespace (demo-<random>) unless given one, says when
// new jobs stop, prints its summary and a verdict for every staged failure
// and every global check (what happened, what had to happen, PASS, FAIL,
// or NOT RUN for a stage the run ended before), and keeps the dashboard up
// until Ctrl-C (--exit, or --json, ends it after the summary); it exits 1
// when a check failed, with --json as without (the JSON's "verdicts" carry
// check, job_id, happened, required and result).
//
// The demo injects faults, so it never reaches a Redis by accident: it
// reads no FENCEDQ_<FLAG> environment variable (a shell set up for the
// fencedq command cannot aim it at production; it says which variables it
// ignored), and on a Redis given with --redis it runs only in a namespace
// of its own: an empty one, which it marks as the demo's with the key
// <namespace>:fencedq-demo, or one it marked before. A namespace holding
// any other key is refused (exit 2) before anything is written, with an
// error naming --namespace.
//
// Logs are JSON (--log-format text for text). A dashboard whose --addr is
// taken exits 1 at once, naming the address. Exit codes: 0 every check
// passed, 1 a check failed or the run broke, 2 bad usage.
package main

import (
	"context"
	"flag"
	"io"
	"os"

	"github.com/fencedq/fencedq/internal/cli"
)

// summaryLine is the command's one-line description in its --help.
const summaryLine = "Run the whole system on an embedded Redis (or --redis) and stage the classic failures"

// errUsage marks bad flags or arguments (exit code 2).
var errUsage = cli.ErrUsage

func main() {
	if os.Getenv(crashWorkerEnv) == "1" {
		// Ctrl-C reaches it with the demo: the demo says what it does.
		ctx, stop := cli.SignalContext("fencedq-demo", io.Discard)
		code := crashWorker(ctx, os.Args[1:], os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	ctx, stop := cli.SignalContext("fencedq-demo", os.Stderr)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes args and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("fencedq-demo", flag.ContinueOnError)
	return cli.RunWithoutEnv(ctx, fs, summaryLine, demoCmd(fs), args, stdout, stderr)
}
