// Command bank-worker runs a worker pool for the bank example's transfers
// (package bank): the workers that docker-compose.yml runs, and a starting
// point for a worker process of your own.
//
//	go run ./examples/bank/cmd/bank-worker --help
//	go run ./examples/bank/cmd/bank-worker --accounts 20 --metrics-addr 127.0.0.1:9100
//
// The accounts live in Redis (through redisfence) unless --postgres names a
// PostgreSQL database (through pgfence). --metrics-addr serves /metrics
// and /healthz (200 while Redis answers); a taken port stops the worker at
// once, with one line naming the address (exit 1), rather than running
// unwatched. SIGINT or SIGTERM shuts the pool down gracefully: running
// transfers finish (or are cancelled after --shutdown-timeout, 10s by
// default) and their outcomes are committed, within 10s more
// (worker.ShutdownGrace): give the process manager a kill timeout above
// both. A second signal (Ctrl-C again) ends the process at once, leaving
// the transfers it ran to lease expiry and reconciling.
//
// The environment sets the connection, address and logging flags:
// FENCEDQ_REDIS, FENCEDQ_POSTGRES, FENCEDQ_NAMESPACE, FENCEDQ_METRICS_ADDR,
// FENCEDQ_LOG_LEVEL and FENCEDQ_LOG_FORMAT (flags win over them). The
// pool's settings (--concurrency, --queues, --lease-ttl, ...) come from the
// command line only; --help lists the variables.
//
// With --enqueue it runs no pool: it enqueues one transfer (its JSON, with
// --op as the operation id) as the bank's typed job, so validation, the
// account resource and the redaction of the memo apply, prints the job id
// and exits:
//
//	bank-worker --enqueue '{"from":"acct-000","to":"acct-001","cents":100}' --op pay-1
//
// Logs are JSON (--log-format text for text), with durations as text
// ("10s"). Errors are one line on stderr. Exit codes: 0 after a graceful
// shutdown, 1 failure, 2 bad usage.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/fencedq/fencedq/examples/bank"
	"github.com/fencedq/fencedq/internal/cli"
	"github.com/fencedq/fencedq/jobs"
)

func main() {
	ctx, stop := cli.SignalContext("bank-worker", os.Stderr)
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
	transfer := fs.String("enqueue", "", "enqueue this transfer (JSON: from, to, cents, memo) and exit instead of running a pool")
	op := fs.String("op", "", "operation id of the --enqueue transfer (an enqueue with the same id is deduplicated)")
	return cli.Run(ctx, fs, summary, func(ctx context.Context, out io.Writer) error {
		if *transfer != "" {
			return enqueue(ctx, cfg, *transfer, *op, out)
		}
		if *op != "" {
			return fmt.Errorf("%w: --op needs --enqueue", cli.ErrUsage)
		}
		cfg.Logger = logs.Logger(stderr)
		return bank.RunWorker(ctx, cfg, out)
	}, args, stdout, stderr)
}

// enqueue enqueues transfer (JSON) as a typed bank.Transfer and prints its
// job id.
func enqueue(ctx context.Context, cfg bank.WorkerConfig, transfer, op string, out io.Writer) error {
	var t bank.Transfer
	dec := json.NewDecoder(bytes.NewReader([]byte(transfer)))
	dec.DisallowUnknownFields()
	err := dec.Decode(&t)
	if _, terr := dec.Token(); err == nil && !errors.Is(terr, io.EOF) { // More misses a stray "}" or "]"
		err = errors.New("trailing data after the JSON object")
	}
	if err != nil {
		return fmt.Errorf("%w: --enqueue is not a transfer (from, to, cents, memo): %v", cli.ErrUsage, err)
	}
	if err := (jobs.Config{Namespace: cfg.Namespace}).Validate(); err != nil {
		return fmt.Errorf("%w: --namespace: %v", cli.ErrUsage, err)
	}
	rdb, err := cli.ConnectRedis(ctx, cfg.Redis)
	if err != nil {
		return err
	}
	defer rdb.Close()
	client := jobs.NewClient(rdb, jobs.Config{Namespace: cfg.Namespace, Sentinel: cli.SentinelOptions(cfg.Redis)})
	defer client.Close()
	var opts []jobs.Option
	if op != "" {
		opts = append(opts, jobs.OperationID(op))
	}
	res, err := client.Enqueue(ctx, t, opts...)
	if errors.Is(err, jobs.ErrInvalid) {
		return fmt.Errorf("%w: %v", cli.ErrUsage, err)
	}
	if err != nil {
		return err
	}
	if res.Deduplicated {
		fmt.Fprintf(out, "job %s (deduplicated: operation %s was enqueued before)\n", res.JobID, op)
	} else {
		fmt.Fprintf(out, "job %s enqueued\n", res.JobID)
	}
	return nil
}
