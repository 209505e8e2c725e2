// Command bank-worker runs a worker pool for the bank example's transfers
// (package bank): the workers that docker-compose.yml runs, and a starting
// point for a worker process of your own.
//
//	go run ./examples/bank/cmd/bank-worker --help
//	go run ./examples/bank/cmd/bank-worker --accounts 20 --metrics-addr :9100
//
// The accounts live in Redis (through redisfence) unless --postgres names a
// PostgreSQL database (through pgfence). --metrics-addr serves /metrics
// and /healthz (200 while Redis answers); a taken port stops the worker at
// once, with one line naming the address (exit 1), rather than running
// unwatched. SIGINT or SIGTERM shuts the pool down gracefully: running
// transfers finish (or are cancelled after the pool's shutdown timeout) and
// their outcomes are committed.
//
// The environment sets the connection, address and logging flags:
// FENCEDQ_REDIS, FENCEDQ_POSTGRES, FENCEDQ_NAMESPACE, FENCEDQ_METRICS_ADDR,
// FENCEDQ_LOG_LEVEL and FENCEDQ_LOG_FORMAT (flags win over them). The
// pool's settings (--concurrency, --queues, --lease-ttl, ...) come from the
// command line only; --help lists the variables.
//
// Logs are JSON (--log-format text for text), with durations as text
// ("10s"). Errors are one line on stderr. Exit codes: 0 after a graceful
// shutdown, 1 failure, 2 bad usage.
package main

import (
	"context"
	"flag"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/fencedq/fencedq/examples/bank"
	"github.com/fencedq/fencedq/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// summary is the command's one-line description in its --help.
const summary = "Run a worker pool for the bank example's transfers"

// run executes args and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bank-worker", flag.ContinueOnError)
	var cfg bank.WorkerConfig
	cfg.AddFlags(fs)
	var logs cli.LogFlags
	logs.Add(fs, slog.LevelInfo)
	return cli.Run(ctx, fs, summary, func(ctx context.Context, out io.Writer) error {
		cfg.Logger = logs.Logger(stderr)
		return bank.RunWorker(ctx, cfg, out)
	}, args, stdout, stderr)
}
