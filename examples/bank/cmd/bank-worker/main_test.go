package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fencedq/fencedq/examples/bank"
	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
)

// runMainEnv makes the test binary run the command (main) instead of the
// tests, for the tests of the process itself.
const runMainEnv = "BANK_WORKER_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

func runCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestHelpAndBadUsage: --help prints the usage once, on stdout; a bad flag,
// flag value or environment variable is one line and exit 2, before any
// connection is made.
func TestHelpAndBadUsage(t *testing.T) {
	code, out, errOut := runCmd(t, "--help")
	if code != 0 || strings.Count(out, "Usage: bank-worker [flags]") != 1 || errOut != "" ||
		!strings.Contains(out, "-metrics-addr") || !strings.Contains(out, "FENCEDQ_METRICS_ADDR") || strings.Contains(out, "FENCEDQ_CONCURRENCY") {
		t.Errorf("--help: code %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, errOut = runCmd(t, "--no-such-flag")
	if code != 2 || out != "" || errOut != "bank-worker: flag provided but not defined: -no-such-flag\nRun 'bank-worker --help' for its flags.\n" {
		t.Errorf("--no-such-flag: code %d, stdout %q, stderr %q", code, out, errOut)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--queues", "default=x"}, "priority"},
		{[]string{"--queues", ","}, "no queues"},
		{[]string{"--queues", "a{b}=1"}, "-queues"},
		{[]string{"--log-level", "verbose"}, "invalid value \"verbose\" for flag -log-level"},
		{[]string{"--log-format", "xml"}, "invalid value \"xml\" for flag -log-format"},
		{[]string{"--maintenance=maybe"}, "-maintenance"},
		{[]string{"extra-arg"}, "unexpected argument"},
		{[]string{"--redis", "not a url"}, "--redis"},
	} {
		code, out, errOut := runCmd(t, c.args...)
		if code != 2 || out != "" || !strings.Contains(errOut, c.want) || !strings.HasPrefix(errOut, "bank-worker: ") {
			t.Errorf("%v: code %d, stdout %q, stderr %q (want 2 and %q)", c.args, code, out, errOut, c.want)
		}
	}
	// The environment sets the connection, address and logging flags, not
	// the pool's settings: FENCEDQ_CONCURRENCY is ignored (and said so),
	// a bad FENCEDQ_LOG_FORMAT is one line and exit 2.
	t.Setenv("FENCEDQ_CONCURRENCY", "lots")
	t.Setenv("FENCEDQ_LOG_FORMAT", "xml")
	if code, _, errOut := runCmd(t); code != 2 || strings.Count(errOut, "\n") != 2 ||
		!strings.Contains(errOut, "bank-worker: FENCEDQ_CONCURRENCY is ignored: --concurrency is read from the command line only") ||
		!strings.Contains(errOut, "bank-worker: usage: FENCEDQ_LOG_FORMAT=\"xml\"") {
		t.Errorf("env vars: %d %q", code, errOut)
	}
}

// TestBadSettingsBeforeConnecting: a setting no worker could use is bad
// usage naming its flag (exit 2), said before any connection is tried, and
// no account is created with it; an empty --namespace too (not the
// default namespace), with --enqueue as without.
func TestBadSettingsBeforeConnecting(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--accounts", "-3"}, "--accounts -3 is negative"},
		{[]string{"--accounts", "2", "--initial-cents", "-5"}, "--initial-cents -5 is negative"},
		{[]string{"--namespace", "{x}"}, "--namespace"},
		{[]string{"--namespace="}, "invalid value \"\" for flag -namespace: the namespace is empty"},
		{[]string{"--enqueue", `{"from":"acct-000","to":"acct-001","cents":1}`, "--namespace="}, "invalid value \"\" for flag -namespace: the namespace is empty"},
		{[]string{"--enqueue", `{"from":"acct-000","to":"acct-001","cents":1}`, "--namespace", "{x}"}, "--namespace"},
	} {
		code, out, errOut := runCmd(t, append([]string{"--redis", "redis://127.0.0.1:1"}, c.args...)...)
		if code != 2 || out != "" || !strings.HasPrefix(errOut, "bank-worker: ") || !strings.Contains(errOut, c.want) || strings.Contains(errOut, "does not answer") {
			t.Errorf("%v: code %d, stdout %q, stderr %q (want exit 2 naming %q, before connecting)", c.args, code, out, errOut, c.want)
		}
	}
}

// TestMetricsAddrInUse: a worker whose metrics port is taken stops at once
// with a clear one-line error and exit 1, instead of running unwatched.
func TestMetricsAddrInUse(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	code := run(ctx, []string{"--redis", "redis://" + srv.Addr, "--namespace", redistest.Namespace(t),
		"--metrics-addr", ln.Addr().String(), "--log-level", "error"}, &out, &errb)
	if ctx.Err() != nil {
		t.Fatal("the worker kept running without its metrics port")
	}
	if code != 1 || !strings.Contains(errb.String(), "--metrics-addr "+ln.Addr().String()+": the address is in use") ||
		strings.Count(strings.TrimSpace(errb.String()), "\n") != 0 || strings.Contains(out.String(), "running") {
		t.Fatalf("code %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
}

// TestWorkerProcess runs the command as a real process configured from the
// environment: it creates the accounts, serves /healthz and /metrics,
// applies a transfer, and on SIGTERM shuts down and exits 0.
func TestWorkerProcess(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	cmd := exec.Command(os.Args[0], "--accounts", "2", "--metrics-addr", "127.0.0.1:0", "--lease-ttl", "2s", "--log-format", "json")
	cmd.Env = append(os.Environ(), runMainEnv+"=1", "FENCEDQ_REDIS=redis://"+srv.Addr, "FENCEDQ_NAMESPACE="+ns)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	// The metrics address comes from the log line that announces it; the
	// pool runs once stdout says so.
	metricsAddr := make(chan string, 1)
	logDone := eachLine(stderr, func(text string) {
		var line struct {
			Msg  string `json:"msg"`
			Addr string `json:"addr"`
		}
		if json.Unmarshal([]byte(text), &line) != nil {
			t.Errorf("log line is not JSON: %q", text)
		} else if line.Msg == "serving metrics" {
			metricsAddr <- line.Addr
		}
	})
	running := make(chan string, 1)
	outDone := eachLine(stdout, func(text string) {
		if strings.Contains(text, "running") {
			running <- text
		}
	})
	go func() {
		<-logDone
		<-outDone
		exited <- cmd.Wait()
	}()
	// A process start under the race detector can be slow: a generous
	// failure bound.
	bound := testsignal.Scale(30 * time.Second)
	var addr string
	select {
	case addr = <-metricsAddr:
	case err := <-exited:
		t.Fatalf("the worker exited before serving metrics: %v", err)
	case <-time.After(bound):
		t.Fatal("no metrics address announced")
	}
	select {
	case line := <-running:
		if !strings.Contains(line, "(queues default=1)") {
			t.Errorf("running line: %q", line)
		}
	case <-time.After(bound):
		t.Fatal("the pool did not say it runs")
	}
	if body := get(t, "http://"+addr+"/healthz"); body != "ok\n" {
		t.Errorf("/healthz: %q", body)
	}

	ctx := context.Background()
	client := jobs.NewClient(srv.Client(), jobs.Config{Namespace: ns})
	res, err := client.Enqueue(ctx, bank.Transfer{From: "acct-000", To: "acct-001", Cents: 250})
	if err != nil {
		t.Fatal(err)
	}
	jobstest.WaitState(t, ledger.New(srv.Client(), ledger.Config{Namespace: ns}), res.Queue, res.JobID, jobs.Succeeded)
	store, err := bank.NewRedisStore(srv.Client(), ns)
	if err != nil {
		t.Fatal(err)
	}
	balances, err := store.Balances(ctx)
	if err != nil || balances["acct-000"] != 100000-250 || balances["acct-001"] != 100000+250 {
		t.Fatalf("balances %v, %v", balances, err)
	}
	metrics := get(t, "http://"+addr+"/metrics")
	for _, want := range []string{"fencedq_", "go_goroutines", "process_"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v", err)
		}
	case <-time.After(bound):
		t.Fatal("the worker did not stop on SIGTERM")
	}
	exited <- nil // for the cleanup
}

// eachLine calls each with every line r gives, in a goroutine; the channel
// closes at r's end.
func eachLine(r io.Reader, each func(string)) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			each(sc.Text())
		}
	}()
	return done
}

func get(t *testing.T, url string) string {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, res.StatusCode, err)
	}
	return string(b)
}

// TestEnqueueMode: --enqueue enqueues one typed transfer (its account
// resource and the memo's redaction apply) and exits; the same --op is
// deduplicated; a body that is no valid transfer is exit 2, nothing written.
func TestEnqueueMode(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	base := []string{"--redis", "redis://" + srv.Addr, "--namespace", ns}
	enq := func(args ...string) (int, string, string) {
		return runCmd(t, append(append([]string{}, base...), args...)...)
	}
	body := `{"from":"acct-000","to":"acct-001","cents":100,"memo":"birthday"}`
	code, out, errOut := enq("--enqueue", body, "--op", "pay-1")
	if code != 0 || !strings.HasPrefix(out, "job ") || !strings.HasSuffix(out, " enqueued\n") || errOut != "" {
		t.Fatalf("--enqueue: code %d, stdout %q, stderr %q", code, out, errOut)
	}
	id := strings.Fields(out)[1]
	code, out, _ = enq("--enqueue", body, "--op", "pay-1")
	if code != 0 || !strings.Contains(out, id) || !strings.Contains(out, "deduplicated") {
		t.Fatalf("the same --op again: code %d, stdout %q", code, out)
	}
	rec, err := jobs.NewInspector(srv.Client(), jobs.Config{Namespace: ns}).Get(context.Background(), jobs.DefaultQueue, id)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Resource != "account:acct-000" || strings.Contains(string(rec.Args), "birthday") {
		t.Fatalf("the enqueued transfer: resource %q, args %s (want account:acct-000, memo redacted)", rec.Resource, rec.Args)
	}
	for _, c := range []struct{ args []string }{
		{[]string{"--enqueue", `{"from":"acct-000","to":"acct-001","cents":100,"order":"x"}`}},
		{[]string{"--enqueue", `{"from":"acct-000","to":"acct-001","cents":100} {}`}},
		{[]string{"--enqueue", `{"from":"acct-000","to":"acct-001","cents":100}}`}},
		{[]string{"--enqueue", `{"from":"acct-000","to":"acct-000","cents":100}`}},
		{[]string{"--enqueue", `not json`}},
		{[]string{"--op", "pay-2"}},
	} {
		if code, out, errOut := enq(c.args...); code != 2 || out != "" || !strings.HasPrefix(errOut, "bank-worker: ") {
			t.Errorf("%v: code %d, stdout %q, stderr %q (want exit 2)", c.args, code, out, errOut)
		}
	}
	if n, err := jobs.NewInspector(srv.Client(), jobs.Config{Namespace: ns}).Counts(context.Background(), jobs.DefaultQueue); err != nil || n[jobs.Pending] != 1 {
		t.Fatalf("jobs after the refused enqueues: %v, %v (want the one transfer pending)", n, err)
	}
}
