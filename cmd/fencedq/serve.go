package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/internal/cli"
	"github.com/fencedq/fencedq/jobs"
)

func dashboardCmd(fs *flag.FlagSet) func(context.Context, io.Writer) error {
	var c commonFlags
	c.add(fs)
	addr := fs.String("addr", "127.0.0.1:8080", "listen address (port 0 picks a free port)")
	user := fs.String("dashboard-user", "", "user name for actions (with --dashboard-password; read-only without)")
	password := fs.String("dashboard-password", "", "password for actions")
	token := fs.String("dashboard-token", "", "bearer token for scripts' actions (Authorization: Bearer <token>)")
	protectReads := fs.Bool("protect-reads", false, "require --dashboard-user and --dashboard-password for every page and read too (not /metrics, which Prometheus scrapes)")
	csrfKey := fs.String("csrf-key", "", "key signing CSRF tokens, at least 32 bytes: give every replica behind one load balancer the same (default: random per process)")
	origins := fs.String("trusted-origins", "", "comma-separated origins (https://ops.example.com) allowed to send actions although they differ from the request's Host (a proxy that rewrites Host)")
	secureCookie := fs.Bool("secure-cookie", false, "mark the CSRF cookie Secure even over plain HTTP (behind a TLS-terminating proxy)")
	var fl fenceFlags
	fl.add(fs)
	var logs cli.LogFlags
	logs.Add(fs, slog.LevelInfo)
	return func(ctx context.Context, out io.Writer) error {
		opts := dashboard.Options{Username: *user, Password: *password, Token: *token, ProtectReads: *protectReads,
			SecureCookie: *secureCookie, Logger: logs.Logger(os.Stderr)}
		switch {
		case (*user == "") != (*password == ""):
			return fmt.Errorf("%w: --dashboard-user and --dashboard-password go together: set both, or neither", errUsage)
		case *protectReads && *user == "":
			return fmt.Errorf("%w: --protect-reads needs --dashboard-user and --dashboard-password (a browser cannot send --dashboard-token)", errUsage)
		case *csrfKey != "" && len(*csrfKey) < 32:
			return fmt.Errorf("%w: --csrf-key has %d bytes: give at least 32 (for example: openssl rand -hex 32)", errUsage, len(*csrfKey))
		}
		if err := fl.check(fs); err != nil {
			return err
		}
		// Actions include re-runs (alone and in bulk) and dead decisions
		// on uncertain and review jobs, whose last attempt may still run.
		actions := *user != "" || *token != ""
		if actions && !fl.given() && !fl.unfenced {
			return fmt.Errorf("%w: --dashboard-user and --dashboard-token enable actions, among them re-runs and dead decisions on uncertain and review jobs, whose last attempt may still be running: "+
				"give the store the handlers write through, --fence-postgres URL or --fence-redis URL (or FENCEDQ_FENCE_POSTGRES, FENCEDQ_FENCE_REDIS), to fence that attempt out before each such decision, "+
				"or --unfenced to decide without (a late write of the attempt may then apply the operation too)", errUsage)
		}
		if err := cli.CheckAddr("--addr", *addr); err != nil {
			return err
		}
		if err := c.checkNamespace(); err != nil {
			return err
		}
		// Not reached before a decision needs it: a fence store down
		// answers each such decision 503 not_fenced_out, nothing decided,
		// and leaves the pages and the other actions served.
		fr, closeFence, err := fl.open(ctx, c.namespace, false)
		if err != nil {
			return err
		}
		defer closeFence()
		c.fencer = fr
		if actions && fl.unfenced {
			opts.Logger.Warn("dashboard: re-runs and dead decisions on uncertain and review jobs are recorded without fencing the last attempt out (--unfenced): an attempt still running may apply its operation after the decision")
		}
		if *csrfKey != "" {
			opts.CSRFKey = []byte(*csrfKey)
		}
		for _, o := range strings.Split(*origins, ",") {
			if o = strings.TrimSpace(o); o != "" {
				opts.TrustedOrigins = append(opts.TrustedOrigins, o)
			}
		}
		client, closeAll, err := c.openClient(ctx)
		if err != nil {
			return err
		}
		defer closeAll()
		if c.down != nil { // it serves what the other masters hold, under a banner
			opts.Logger.Warn("dashboard: starting with Redis Cluster masters down", "error", c.down)
		}
		h, err := dashboard.New(client.Inspector(), client, opts)
		if err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
		reg := prometheus.NewRegistry()
		reg.MustRegister(newLedgerCollector(client.Inspector()))
		metrics := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
		healthz := cli.Healthz(client.Inspector().Ping)
		// Routed by hand, not by an http.ServeMux: a mux would redirect a
		// path with an empty, "." or ".." segment to its cleaned form, and
		// a client follows that with its POST body and credentials, so an
		// action sent for job "x/../y" would act on job y. The dashboard
		// answers such a path itself (404).
		root := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/metrics":
				metrics.ServeHTTP(w, r)
			case "/healthz":
				healthz(w, r)
			default:
				h.ServeHTTP(w, r)
			}
		})
		return cli.ListenAndServe(ctx, "--addr", *addr, root, func(a string) {
			fmt.Fprintf(out, "dashboard: http://%s/\n", a)
		})
	}
}

// ledgerCollector exports the ledger's per-state counts at scrape time,
// and per queue how many of its queue names could not be read.
type ledgerCollector struct {
	l                 *jobs.Inspector
	desc, unreachable *prometheus.Desc
}

func newLedgerCollector(l *jobs.Inspector) *ledgerCollector {
	return &ledgerCollector{l: l,
		desc: prometheus.NewDesc("fencedq_ledger_jobs",
			"Jobs per state in the ledger, read at scrape time.", []string{"queue", "state"}, nil),
		unreachable: prometheus.NewDesc("fencedq_ledger_unreachable",
			"Queue names (the queue's own or its partitions') whose counts could not be read at scrape time.", []string{"queue"}, nil)}
}

func (c *ledgerCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc; ch <- c.unreachable }

// Collect reads every queue's counts. A read that fails whole (Redis
// unreachable) fails the scrape with its error: no series would tell
// Prometheus the ledger is empty. A partial read (on Redis Cluster, a
// master down) exports the queues read whole; a queue with names not read
// has no counts (they would be too low), only its unreachable count.
func (c *ledgerCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	// Every queue's counts in a fixed number of round trips.
	ov, err := c.l.Overview(ctx)
	if err != nil && !errors.Is(err, jobs.ErrPartial) {
		ch <- prometheus.NewInvalidMetric(c.desc, fmt.Errorf("reading the ledger's queues: %w", err))
		return
	}
	for _, o := range ov {
		ch <- prometheus.MustNewConstMetric(c.unreachable, prometheus.GaugeValue, float64(len(o.Unreachable)), o.Queue)
		if len(o.Unreachable) > 0 {
			continue
		}
		for s, n := range o.Counts {
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), o.Queue, string(s))
		}
	}
}
