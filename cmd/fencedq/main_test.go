package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/examples/bank"
	"github.com/fencedq/fencedq/internal/cli"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestMain lets this test binary run as the command, for a test of the
// process's own output (FENCEDQ_RUN_MAIN).
func TestMain(m *testing.M) {
	if os.Getenv("FENCEDQ_RUN_MAIN") == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestHelpForEveryCommand: the top-level help and every command's list
// the flags and say what the exit codes mean (scripts branch on them).
func TestHelpForEveryCommand(t *testing.T) {
	const exitCodes = "Exit codes: 0 success, 1 failure"
	code, out, _ := runCLI(t, "--help")
	if code != 0 || !strings.Contains(out, "Commands:") || !strings.Contains(out, exitCodes) || !strings.Contains(out, "2 bad usage") {
		t.Fatalf("top-level help: %d %q", code, out)
	}
	for _, c := range commands {
		code, out, _ := runCLI(t, c.name, "--help")
		if code != 0 || !strings.Contains(out, "Usage: fencedq "+c.name) || !strings.Contains(out, "-") ||
			!strings.Contains(out, exitCodes) || !strings.Contains(out, "2 bad usage") {
			t.Errorf("%s --help: code %d, output %q", c.name, code, out)
		}
	}
}

func TestBadUsageExitsTwoWithAClearError(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{}, "Usage"},
		{[]string{"nope"}, `unknown command "nope"`},
		{[]string{"dashboard", "--no-such-flag"}, "flag provided but not defined"},
		{[]string{"enqueue"}, "--kind is required"},
		{[]string{"enqueue", "--args", "{}"}, "--kind is required: the job kind the workers registered"},
		{[]string{"enqueue", "--kind", "transfer"}, "--args is required: the job's args as a JSON object ('{}' for none)"},
		{[]string{"enqueue", "--kind", "x", "--args", "{}", "--limit", "export"}, "--limit \"export\": want key=max"},
		{[]string{"enqueue", "--kind", "x", "--args", "{}", "--limit", "export=many"}, "max is not a number"},
		{[]string{"enqueue", "--kind", "x", "--args", "{}", "--rate", "p=100"}, "want key=max/period"},
		{[]string{"enqueue", "--kind", "x", "--args", "{}", "--rate", "p=100/soon"}, "period"},
		{[]string{"enqueue", "--kind", "x", "--args", "{}", "--header", "novalue"}, "want key=value"},
		{[]string{"inspect"}, "give --state"},
		{[]string{"inspect", "--state", "dead", "--job", "x"}, "--state lists jobs, --job and --op show one"},
		{[]string{"inspect", "--queues"}, "flag provided but not defined: -queues"},
		{[]string{"cancel"}, "--job is required"},
		{[]string{"pause"}, "--queue is required"},
		{[]string{"resume", "--queue", "q{1}", "--actor", "a"}, "--queue"},
		{[]string{"inspect", "--state", "sleeping"}, "unknown state"},
		{[]string{"inspect", "--state", "pending", "--limit", "0"}, "--limit 0"},
		{[]string{"inspect", "--state", "pending", "--limit", "2000000"}, "--limit 2000000"},
		{[]string{"resolve", "--job", "x"}, "--actor are required"},
		{[]string{"resolve", "--job", "x", "--actor", "a", "--decision", "maybe"}, "--decision must be"},
		{[]string{"dashboard", "extra-arg"}, "unexpected argument"},
		{[]string{"dashboard", "--dashboard-user", "ops"}, "--dashboard-user and --dashboard-password go together"},
		{[]string{"dashboard", "--protect-reads", "--dashboard-token", "t"}, "--protect-reads needs --dashboard-user and --dashboard-password"},
		{[]string{"dashboard", "--csrf-key", "short"}, "--csrf-key has 5 bytes: give at least 32"},
		{[]string{"inspect", "--redis", "not a url", "--state", "review"}, "--redis"},
		{[]string{"partitions", "--queue", "orders", "--set", "0"}, "--set 0 is outside 1-64"}, // given, not "unset"
		{[]string{"partitions", "--queue", "orders", "--set", "65"}, "--set 65 is outside 1-64"},
	}
	for _, c := range cases {
		code, _, errOut := runCLI(t, c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: code %d, stderr %q (want 2 and %q)", c.args, code, errOut, c.want)
		}
	}
	t.Setenv("FENCEDQ_LOG_LEVEL", "loud")
	if code, _, errOut := runCLI(t, "dashboard"); code != 2 || !strings.Contains(errOut, "FENCEDQ_LOG_LEVEL") {
		t.Errorf("bad env var: %d %q", code, errOut)
	}
}

// TestFlagsBeforeTheCommand: flags typed before the command are answered
// with the command line reordered, not taken for an unknown command; no
// flag's value is repeated (it may be a password), even one starting with a
// dash, nor a word that is no flag of the command.
func TestFlagsBeforeTheCommand(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--redis", "127.0.0.1:1", "queues"}, "fencedq: flags follow the command: fencedq queues --redis …\n"},
		{[]string{"--namespace", "app", "workflow", "inspect", "--limit", "5"}, "fencedq workflow inspect --namespace … --limit …\n"},
		{[]string{"--actor", "alice", "pause", "--queue", "q", "--note", "a deploy"}, "fencedq pause --actor … --queue … --note …\n"},
		{[]string{"--dashboard-password=hunter2", "dashboard"}, "fencedq dashboard --dashboard-password=…\n"},
		// A value starting with a dash is a value all the same, and a word
		// that names no flag of the command is not repeated either (it
		// could carry terminal escapes).
		{[]string{"--dashboard-password", "-hunter2", "dashboard"}, "fencedq dashboard --dashboard-password …\n"},
		{[]string{"--redis\x1b]0;pwned\a", "queues"}, "fencedq queues …\n"},
	}
	for _, c := range cases {
		code, out, errOut := runCLI(t, c.args...)
		if code != 2 || out != "" || !strings.HasSuffix(errOut, c.want) || strings.Contains(errOut, "unknown command") {
			t.Errorf("%q: code %d, stdout %q, stderr %q (want 2 and %q)", c.args, code, out, errOut, c.want)
		}
	}
	if code, _, errOut := runCLI(t, "--redis", "127.0.0.1:1"); code != 2 || !strings.Contains(errOut, `unknown command "--redis"`) {
		t.Errorf("no command: code %d, stderr %q", code, errOut)
	}
}

// TestWorkerIsTheBankExamplesCommand: the worker pool is no fencedq
// command; `fencedq worker` says in one line where it went.
func TestWorkerIsTheBankExamplesCommand(t *testing.T) {
	for _, c := range commands {
		if c.name == "worker" {
			t.Errorf("fencedq still lists a worker command: %+v", c)
		}
	}
	code, out, _ := runCLI(t, "--help")
	if code != 0 || !strings.Contains(out, "\n  dashboard ") || strings.Contains(out, "\n  worker ") {
		t.Errorf("fencedq --help: %d %q", code, out)
	}
	for _, args := range [][]string{{"worker"}, {"worker", "--concurrency", "3"}} {
		code, out, errOut := runCLI(t, args...)
		if code != 2 || out != "" || strings.Count(errOut, "\n") != 1 ||
			!strings.Contains(errOut, "go run ./examples/bank/cmd/bank-worker --help") {
			t.Errorf("%v: code %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
}

// TestDemoIsItsOwnCommand: fencedq runs no demo; `fencedq demo` says in
// one line where it went, and runs nothing.
func TestDemoIsItsOwnCommand(t *testing.T) {
	for _, c := range commands {
		if c.name == "demo" {
			t.Errorf("fencedq still lists a demo command: %+v", c)
		}
	}
	code, out, _ := runCLI(t, "--help")
	if code != 0 || strings.Contains(out, "\n  demo ") || !strings.Contains(out, "go run ./cmd/fencedq-demo") {
		t.Errorf("fencedq --help: %d %q", code, out)
	}
	for _, args := range [][]string{{"demo"}, {"demo", "--redis", "127.0.0.1:1", "--exit"}} {
		code, out, errOut := runCLI(t, args...)
		if code != 2 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, "go run ./cmd/fencedq-demo --help") {
			t.Errorf("%v: code %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
}

// TestEnvNeverFillsPerActionFlags: FENCEDQ_QUEUE, FENCEDQ_JOB,
// FENCEDQ_DECISION, FENCEDQ_NOTE, FENCEDQ_STATE and FENCEDQ_KIND fill no
// flag of pause, cancel, resolve, inspect or enqueue: each command still
// asks for what it lacks, says the variable is ignored, and acts on
// nothing. The connection and identity variables do apply.
func TestEnvNeverFillsPerActionFlags(t *testing.T) {
	e := newOperatorEnv(t)
	job := e.enqueue(jobs.Delay(time.Hour))
	t.Setenv("FENCEDQ_REDIS", strings.TrimPrefix(e.url, "redis://"))
	t.Setenv("FENCEDQ_NAMESPACE", e.ns)
	t.Setenv("FENCEDQ_ACTOR", "alice")
	for k, v := range map[string]string{"QUEUE": "default", "JOB": job, "OP": "op-x", "DECISION": "dead", "NOTE": "from the shell",
		"STATE": "pending", "KIND": "transfer", "ARGS": `{"from":"acct-000","to":"acct-001","cents":1}`} {
		t.Setenv("FENCEDQ_"+k, v)
	}
	for _, c := range []struct {
		args         []string
		want, ignore string
	}{
		{[]string{"pause"}, "--queue is required", "FENCEDQ_QUEUE is ignored: --queue is read from the command line only"},
		{[]string{"pause", "--queue", "default"}, "--note is required", "FENCEDQ_NOTE is ignored"},
		{[]string{"cancel", "--note", "x"}, "--job is required", "FENCEDQ_JOB is ignored"},
		{[]string{"resolve", "--job", job}, "--decision must be", "FENCEDQ_DECISION is ignored"},
		{[]string{"resolve"}, "--job or --op", "FENCEDQ_OP is ignored"},
		{[]string{"inspect"}, "give --state", "FENCEDQ_STATE is ignored"},
		{[]string{"enqueue"}, "--kind is required", "FENCEDQ_KIND is ignored"},
		{[]string{"enqueue", "--kind", "transfer"}, "--args is required", "FENCEDQ_ARGS is ignored"},
	} {
		code, _, errOut := runCLI(t, c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) || !strings.Contains(errOut, c.ignore) {
			t.Errorf("%v: code %d, stderr %q (want 2, %q and %q)", c.args, code, errOut, c.want, c.ignore)
		}
	}
	if s := e.state(job); s != jobs.Pending {
		t.Fatalf("the job is %s", s)
	}
	if p, err := e.ledger.Paused(context.Background(), "default"); err != nil || p != nil {
		t.Fatalf("queue default paused: %+v %v", p, err)
	}
	if n, err := e.ledger.Counts(context.Background(), "default"); err != nil || n[jobs.Pending] != 1 {
		t.Fatalf("counts %v %v", n, err)
	}
	// FENCEDQ_REDIS (host:port), FENCEDQ_NAMESPACE and FENCEDQ_ACTOR apply.
	code, out, errOut := runCLI(t, "cancel", "--job", job, "--note", "customer withdrew")
	if code != 0 || out != "job "+job+" is now cancelled\n" {
		t.Fatalf("cancel from the environment's Redis, namespace and actor: %d %q %q", code, out, errOut)
	}
	code, out, _ = runCLI(t, "inspect", "--job", job)
	if code != 0 || !strings.Contains(out, "cancelled by operator:alice: customer withdrew") {
		t.Fatalf("inspect: %d %q", code, out)
	}
}

// TestEnvVariablesOfEachCommand: every command reads from the environment
// exactly its connection, identity, address, credential and logging
// flags, and its --help lists them.
func TestEnvVariablesOfEachCommand(t *testing.T) {
	conn := []string{"FENCEDQ_NAMESPACE", "FENCEDQ_REDIS"}
	op := []string{"FENCEDQ_ACTOR", "FENCEDQ_NAMESPACE", "FENCEDQ_REDIS"}
	want := map[string][]string{
		"dashboard": {"FENCEDQ_ADDR", "FENCEDQ_CSRF_KEY", "FENCEDQ_DASHBOARD_PASSWORD", "FENCEDQ_DASHBOARD_TOKEN", "FENCEDQ_DASHBOARD_USER", "FENCEDQ_FENCE_POSTGRES", "FENCEDQ_FENCE_REDIS", "FENCEDQ_LOG_FORMAT", "FENCEDQ_LOG_LEVEL", "FENCEDQ_NAMESPACE", "FENCEDQ_REDIS"},
		"enqueue":   conn, "inspect": conn, "queues": conn, "pools": conn, "schedules": op, "partitions": op,
		"resolve": {"FENCEDQ_ACTOR", "FENCEDQ_FENCE_POSTGRES", "FENCEDQ_FENCE_REDIS", "FENCEDQ_NAMESPACE", "FENCEDQ_REDIS"},
		"cancel":  op, "run-now": op, "pause": op, "resume": op,
		"workflow inspect": conn, "workflow cancel": op,
	}
	for _, c := range commands {
		fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
		c.setup(fs)
		if got := cli.EnvVars(fs); !slices.Equal(got, want[c.name]) {
			t.Errorf("%s reads %v, want %v", c.name, got, want[c.name])
		}
		_, out, _ := runCLI(t, c.name, "--help")
		for _, v := range want[c.name] {
			if !strings.Contains(out, "  "+v+" ") {
				t.Errorf("%s --help does not list %s: %q", c.name, v, out)
			}
		}
	}
	_, out, _ := runCLI(t, "--help")
	env := strings.Fields(out[strings.Index(out, "logging flags:")+len("logging flags:") : strings.Index(out, "Flags that say")])
	if want := []string{"FENCEDQ_ACTOR", "FENCEDQ_ADDR", "FENCEDQ_CSRF_KEY", "FENCEDQ_DASHBOARD_PASSWORD", "FENCEDQ_DASHBOARD_TOKEN",
		"FENCEDQ_DASHBOARD_USER", "FENCEDQ_FENCE_POSTGRES", "FENCEDQ_FENCE_REDIS", "FENCEDQ_LOG_FORMAT", "FENCEDQ_LOG_LEVEL", "FENCEDQ_NAMESPACE", "FENCEDQ_REDIS"}; !slices.Equal(env, want) {
		t.Errorf("fencedq --help lists %v, want %v:\n%s", env, want, out)
	}
}

// TestRedisHostPortAndAnEmptyNamespace: --redis takes host:port; a
// namespace without queues says which namespace it looked in.
func TestRedisHostPortAndAnEmptyNamespace(t *testing.T) {
	e := newOperatorEnv(t)
	e.enqueue()
	addr := strings.TrimPrefix(e.url, "redis://")
	code, out, errOut := runCLI(t, "queues", "--redis", addr, "--namespace", e.ns)
	if code != 0 || !strings.Contains(out, "1 queue(s)\n") || strings.Contains(out, "has no queues") {
		t.Fatalf("queues on host:port: %d %q %q", code, out, errOut)
	}
	for _, args := range [][]string{{"queues"}, {"inspect", "--state", "pending"}} {
		code, out, errOut = runCLI(t, append(args, "--redis", addr, "--namespace", "fq-typo")...)
		if code != 0 || !strings.Contains(out, "namespace fq-typo has no queues") || !strings.Contains(out, "--namespace") {
			t.Errorf("%v in a wrong namespace: %d %q %q", args, code, out, errOut)
		}
	}
	if code, out, _ := runCLI(t, "queues", "--redis", addr, "--namespace", "fq-typo", "--json"); code != 0 || out != "[]\n" {
		t.Errorf("queues --json in a wrong namespace: %d %q", code, out)
	}
}

// TestWrongNamespaceLookupsSaySo: looking a job, workflow or schedule up
// in a namespace without queues (a typo, or the default fq while the
// workers use another) says so, naming --namespace, beside "not found";
// so do the pools, schedules and workflow listings when empty. In the
// workers' namespace a missing job is only not found.
func TestWrongNamespaceLookupsSaySo(t *testing.T) {
	e := newOperatorEnv(t)
	id := e.enqueue(jobs.OperationID("op-1"))
	for _, args := range [][]string{
		{"inspect", "--job", id},
		{"inspect", "--op", "op-1"},
		{"cancel", "--job", id, "--actor", "a", "--note", "n"},
		{"cancel", "--job", id, "--queue", "default", "--actor", "a", "--note", "n"},
		{"run-now", "--job", id, "--actor", "a"},
		{"resolve", "--job", id, "--decision", "rerun", "--actor", "a"},
		{"resolve", "--op", "op-1", "--decision", "rerun", "--actor", "a"},
		{"schedules", "--id", "nightly"},
		{"workflow", "inspect", "--id", "wf-1"},
		{"workflow", "cancel", "--id", "wf-1", "--actor", "a", "--note", "n"},
		{"pools"},
		{"schedules"},
		{"workflow", "inspect"},
	} {
		code, out, errOut := runCLI(t, append(args, "--redis", e.url, "--namespace", "fq-typo")...)
		wantCode := 1
		if args[len(args)-1] == "pools" || args[len(args)-1] == "schedules" || args[len(args)-1] == "inspect" {
			wantCode = 0
		}
		if code != wantCode || !strings.Contains(out+errOut, "namespace fq-typo has no queues") || !strings.Contains(out+errOut, "--namespace") {
			t.Errorf("%v in a wrong namespace: code %d (want %d), stdout %q, stderr %q", args, code, wantCode, out, errOut)
		}
	}
	code, out, errOut := e.cli("inspect", "--job", "nope")
	if code != 1 || !strings.Contains(errOut, "not found") || strings.Contains(out+errOut, "has no queues") {
		t.Errorf("a missing job in the workers' namespace: code %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// TestEnqueueInspectResolve: enqueue takes every kind as raw JSON, the
// bank example's transfer included: refused while no live pool runs it,
// and refused even with --unchecked once a live pool reports its rules;
// a kind without rules is enqueued, deduplicated by its operation id,
// inspected and listed.
func TestEnqueueInspectResolve(t *testing.T) {
	e := newOperatorEnv(t)
	ctx := context.Background()
	transfer := `{"from":"acct-000","to":"acct-001","cents":250,"memo":"rent for flat 4"}`
	if code, _, errOut := e.cli("enqueue", "--kind", "transfer", "--args", transfer); code != 2 || !strings.Contains(errOut, "no live pool runs kind transfer") || !strings.Contains(errOut, "--unchecked") {
		t.Fatalf("transfer with no live pool: %d %q", code, errOut)
	}
	if err := e.ledger.Heartbeat(ctx, jobs.PoolInfo{ID: "pool-1", Queues: map[string]int{"default": 1}, Concurrency: 1,
		Kinds: map[string]jobs.KindRules{"transfer": jobs.RulesOf(bank.Transfer{}), "report": {}}}, time.Minute); err != nil {
		t.Fatal(err)
	}
	for _, extra := range [][]string{nil, {"--unchecked"}} {
		code, _, errOut := e.cli(append([]string{"enqueue", "--kind", "transfer", "--op", "op-t", "--args", transfer}, extra...)...)
		if code != 2 || !strings.Contains(errOut, "kind transfer has rules raw JSON cannot honour (Validate, Resource, sensitive fields)") {
			t.Fatalf("transfer %v with a live pool reporting its rules: %d %q", extra, code, errOut)
		}
	}
	if qs, err := e.client.Inspector().Queues(ctx); err != nil || len(qs) != 0 {
		t.Fatalf("refused enqueues wrote queues %v (%v)", qs, err)
	}
	code, out, errOut := e.cli("enqueue", "--kind", "report", "--op", "op-1", "--json", "--args", `{"customer":"acme"}`)
	if code != 0 {
		t.Fatalf("enqueue: %d %s", code, errOut)
	}
	var res struct {
		JobID string `json:"job_id"`
	}
	_ = json.Unmarshal([]byte(out), &res)
	code, out, _ = e.cli("enqueue", "--kind", "report", "--op", "op-1", "--args", `{"customer":"acme"}`)
	if code != 0 || !strings.Contains(out, "deduplicated") || !strings.Contains(out, res.JobID) {
		t.Fatalf("second enqueue: %d %q", code, out)
	}
	code, out, _ = e.cli("inspect", "--op", "op-1")
	if code != 0 || !strings.Contains(out, "state pending") || !strings.Contains(out, "acme") {
		t.Fatalf("inspect: %d %q", code, out)
	}
	// a transfer enqueued from Go with its type is shown redacted
	if _, err := e.client.Enqueue(ctx, bank.Transfer{From: "acct-000", To: "acct-001", Cents: 250, Memo: "rent for flat 4"}, jobs.OperationID("op-2")); err != nil {
		t.Fatal(err)
	}
	code, out, _ = e.cli("inspect", "--op", "op-2")
	if code != 0 || !strings.Contains(out, "state pending") || strings.Contains(out, "rent for flat") || !strings.Contains(out, "[redacted]") {
		t.Fatalf("inspect a typed transfer: %d %q", code, out)
	}
	code, out, _ = e.cli("inspect", "--state", "pending", "--json")
	if code != 0 || !strings.Contains(out, res.JobID) {
		t.Fatalf("list: %d %q", code, out)
	}
	// Only review (or uncertain) jobs can be resolved.
	code, _, errOut = e.cli("resolve", "--job", res.JobID, "--decision", "dead", "--actor", "alice")
	if code != 1 || !strings.Contains(errOut, "not in a state") {
		t.Fatalf("resolve pending: %d %q", code, errOut)
	}
	if code, _, errOut := e.cli("inspect", "--job", "no-such-job"); code != 1 || !strings.Contains(errOut, "not found") {
		t.Fatalf("missing job: %d %q", code, errOut)
	}
	// flow-control flags reach the job
	code, out, errOut = e.cli("enqueue", "--kind", "report", "--unchecked", "--json",
		"--args", `{"customer":"acme"}`, "--header", "tenant=acme", "--limit", "export:acme=2", "--rate", "provider=100/1s", "--group", "acme")
	if code != 0 {
		t.Fatalf("enqueue with flow flags: %d %s", code, errOut)
	}
	_ = json.Unmarshal([]byte(out), &res)
	rec, err := e.client.Inspector().Get(ctx, jobs.DefaultQueue, res.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Headers["tenant"] != "acme" || rec.LimitKey != "export:acme" || rec.LimitMax != 2 || rec.RateKey != "provider" ||
		rec.RateMax != 100 || rec.RatePer != time.Second || rec.Group != "acme" {
		t.Fatalf("job from flow flags: headers %v limit %q/%d rate %q/%d/%v group %q", rec.Headers, rec.LimitKey, rec.LimitMax,
			rec.RateKey, rec.RateMax, rec.RatePer, rec.Group)
	}
}

// operatorEnv is a real Redis namespace for the operator commands, with a
// ledger to put jobs where the commands act on them.
type operatorEnv struct {
	t      *testing.T
	url    string
	ns     string
	client *jobs.Client
	ledger *ledger.Ledger
}

func newOperatorEnv(t *testing.T) *operatorEnv {
	srv := redistest.Start(t, redistest.Options{})
	rdb := srv.Client()
	ns := redistest.Namespace(t)
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	t.Cleanup(func() { _ = c.Close() })
	return &operatorEnv{t: t, url: "redis://" + srv.Addr, ns: ns, client: c, ledger: ledger.New(rdb, ledger.Config{Namespace: ns})}
}

// cli runs fencedq against the environment's Redis and namespace.
func (e *operatorEnv) cli(args ...string) (int, string, string) {
	e.t.Helper()
	return runCLI(e.t, append(args, "--redis", e.url, "--namespace", e.ns)...)
}

func (e *operatorEnv) enqueue(opts ...jobs.Option) string {
	e.t.Helper()
	res, err := e.client.Enqueue(context.Background(), bank.Transfer{From: "acct-000", To: "acct-001", Cents: 5}, opts...)
	if err != nil {
		e.t.Fatal(err)
	}
	return res.JobID
}

// claim starts an attempt on the next due job of queue default, which must be id.
func (e *operatorEnv) claim(id string) ledger.Claimed {
	e.t.Helper()
	res, err := e.ledger.Claim(context.Background(), "default", "pool-1", time.Minute, 1)
	if err != nil || len(res.Jobs) != 1 || res.Jobs[0].ID != id {
		e.t.Fatalf("claim of %s: %+v %v", id, res, err)
	}
	return res.Jobs[0]
}

func (e *operatorEnv) state(id string) jobs.State {
	e.t.Helper()
	r, err := e.ledger.Get(context.Background(), "default", id)
	if err != nil {
		e.t.Fatal(err)
	}
	return r.State
}

func TestCancelCommand(t *testing.T) {
	e := newOperatorEnv(t)
	scheduled := e.enqueue(jobs.Delay(time.Hour))

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"cancel", "--actor", "alice", "--note", "x"}, "--job is required"},
		{[]string{"cancel", "--job", scheduled, "--note", "x"}, "--actor is required"},
		{[]string{"cancel", "--job", scheduled, "--actor", "alice"}, "--note is required"},
		{[]string{"cancel", "--job", scheduled, "--actor", "alice", "--note", strings.Repeat("n", 2001)}, "note longer than 2000"},
	} {
		if code, _, errOut := e.cli(c.args...); code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: code %d, stderr %q (want 2 and %q)", c.args, code, errOut, c.want)
		}
	}
	if s := e.state(scheduled); s != jobs.Pending {
		t.Fatalf("a refused cancel moved the job to %s", s)
	}

	// A scheduled job becomes cancelled, a final state with who and why.
	code, out, errOut := e.cli("cancel", "--job", scheduled, "--actor", "alice", "--note", "customer withdrew")
	if code != 0 || out != "job "+scheduled+" is now cancelled\n" {
		t.Fatalf("cancel: %d %q %q", code, out, errOut)
	}
	code, out, _ = e.cli("inspect", "--job", scheduled)
	if code != 0 || !strings.Contains(out, "state cancelled (cancelled by operator:alice)") ||
		!strings.Contains(out, "pending job cancelled by operator:alice: customer withdrew") {
		t.Fatalf("inspect cancelled: %d %q", code, out)
	}
	code, out, _ = e.cli("inspect", "--state", "cancelled")
	if code != 0 || !strings.Contains(out, scheduled) || !strings.Contains(out, "1 cancelled job(s)") {
		t.Fatalf("list cancelled: %d %q", code, out)
	}
	// Twice: the job is final now.
	code, _, errOut = e.cli("cancel", "--job", scheduled, "--actor", "alice", "--note", "again")
	if code != 1 || !strings.Contains(errOut, "cannot cancel") || !strings.Contains(errOut, "is cancelled") ||
		!strings.Contains(errOut, "takes a pending or running job") || strings.Count(errOut, "\n") != 1 {
		t.Fatalf("second cancel: %d %q", code, errOut)
	}
	code, _, errOut = e.cli("cancel", "--job", "no-such-job", "--actor", "alice", "--note", "x")
	if code != 1 || !strings.Contains(errOut, "cannot cancel") || !strings.Contains(errOut, "not found") {
		t.Fatalf("missing job: %d %q", code, errOut)
	}
	code, _, errOut = e.cli("cancel", "--job", "no-such-job", "--queue", "default", "--actor", "alice", "--note", "x")
	if code != 1 || !strings.Contains(errOut, "not found") {
		t.Fatalf("missing job in a given queue: %d %q", code, errOut)
	}

	// A running job is asked to stop; it keeps its token and stays running.
	running := e.enqueue()
	cl := e.claim(running)
	t.Setenv("FENCEDQ_ACTOR", "bob") // the operator's name comes from the environment too
	code, out, errOut = e.cli("cancel", "--job", running, "--queue", "default", "--note", "wrong amount", "--json")
	if code != 0 {
		t.Fatalf("cancel running: %d %q", code, errOut)
	}
	var res struct {
		Job struct {
			ID          string `json:"id"`
			State       string `json:"state"`
			Token       string `json:"token"`
			CancelledBy string `json:"cancel_requested_by"`
		} `json:"job"`
		Cancelled     bool `json:"cancelled"`
		StopRequested bool `json:"stop_requested"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("cancel --json: %v %q", err, out)
	}
	if res.Cancelled || !res.StopRequested || res.Job.ID != running || res.Job.State != "running" ||
		res.Job.Token != cl.Token.String() || res.Job.CancelledBy != "operator:bob" {
		t.Fatalf("cancel running --json: %+v", res)
	}
	code, out, _ = e.cli("inspect", "--job", running)
	if code != 0 || !strings.Contains(out, "cancel requested by operator:bob") ||
		!strings.Contains(out, "running attempt asked to stop by operator:bob: wrong amount") {
		t.Fatalf("inspect running: %d %q", code, out)
	}
	// Its retry becomes cancelled: the outcome is still committed by its token.
	cs, err := e.ledger.Complete(context.Background(), "default", []ledger.Completion{{ID: running, Token: cl.Token,
		Outcome: ledger.Outcome{To: jobs.Pending, Error: "context canceled", RetryIn: 0}}})
	if err != nil || !cs[0].Applied || cs[0].State != jobs.Cancelled {
		t.Fatalf("retry of a cancelled job: %+v %v", cs, err)
	}
}

func TestRerunDeadAndCancelledJobs(t *testing.T) {
	e := newOperatorEnv(t)
	ctx := context.Background()
	dead := e.enqueue()
	cl := e.claim(dead)
	// The attempt leased a named resource: its fence token is shown.
	cs, err := e.ledger.Complete(ctx, "default", []ledger.Completion{{ID: dead, Token: cl.Token, Fence: 777,
		Outcome: ledger.Outcome{To: jobs.Dead, Error: "card declined", Reason: "permanent error"}}})
	if err != nil || !cs[0].Applied {
		t.Fatalf("commit dead: %+v %v", cs, err)
	}
	code, out, _ := e.cli("inspect", "--job", dead)
	if code != 0 || !strings.Contains(out, "fence 777 (the resource lease's token)") || !strings.Contains(out, "fence 777 -> dead") {
		t.Fatalf("inspect dead: %d %q", code, out)
	}
	code, out, _ = e.cli("inspect", "--job", dead, "--json")
	if code != 0 || !strings.Contains(out, `"fence":"777"`) || !strings.Contains(out, `"queue_paused":null`) {
		t.Fatalf("inspect --json: %d %q", code, out)
	}
	code, out, _ = e.cli("inspect", "--state", "dead")
	if code != 0 || !strings.Contains(out, "FENCE") || !strings.Contains(out, "777") {
		t.Fatalf("list dead: %d %q", code, out)
	}

	code, out, errOut := e.cli("resolve", "--job", dead, "--decision", "rerun", "--actor", "alice", "--note", "card replaced", "--json")
	if code != 0 {
		t.Fatalf("rerun dead: %d %q", code, errOut)
	}
	var res struct {
		Job struct {
			State string `json:"state"`
			Runs  int    `json:"runs"`
		} `json:"job"`
		Decision string `json:"decision"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Job.State != "pending" || res.Job.Runs != 1 || res.Decision != "rerun" {
		t.Fatalf("rerun dead --json: %+v %v %q", res, err, out)
	}
	// Its next attempt gets a higher token: the old one stays fenced out.
	if next := e.claim(dead); next.Token <= cl.Token {
		t.Fatalf("re-run token %d not above %d", next.Token, cl.Token)
	}

	cancelled := e.enqueue(jobs.Delay(time.Hour))
	if code, _, errOut := e.cli("cancel", "--job", cancelled, "--actor", "alice", "--note", "hold"); code != 0 {
		t.Fatalf("cancel: %d %q", code, errOut)
	}
	code, out, errOut = e.cli("resolve", "--job", cancelled, "--decision", "rerun", "--actor", "alice", "--note", "go ahead after all")
	if code != 0 || out != "job "+cancelled+" is now pending\n" || e.state(cancelled) != jobs.Pending {
		t.Fatalf("rerun cancelled: %d %q %q", code, out, errOut)
	}
	// Only a re-run takes a cancelled job.
	if _, err := e.client.Cancel(ctx, "default", cancelled, "alice", "stop again"); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = e.cli("resolve", "--job", cancelled, "--decision", "succeeded", "--actor", "alice")
	if code != 1 || !strings.Contains(errOut, "cannot resolve") || !strings.Contains(errOut, "rerun also takes a dead or cancelled one") {
		t.Fatalf("resolve cancelled as succeeded: %d %q", code, errOut)
	}
}

func TestPauseAndResumeCommands(t *testing.T) {
	e := newOperatorEnv(t)
	job := e.enqueue()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"pause", "--actor", "bob", "--note", "x"}, "--queue is required"},
		{[]string{"pause", "--queue", "bad queue", "--actor", "bob", "--note", "x"}, "--queue"},
		{[]string{"pause", "--queue", "default", "--note", "x"}, "--actor is required: who acts (or set FENCEDQ_ACTOR)"},
		{[]string{"pause", "--queue", "default", "--actor", "bob"}, "--note is required"},
		{[]string{"resume", "--queue", "default"}, "--actor is required"},
	} {
		if code, _, errOut := e.cli(c.args...); code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: code %d, stderr %q (want 2 and %q)", c.args, code, errOut, c.want)
		}
	}

	code, out, errOut := e.cli("pause", "--queue", "default", "--actor", "bob", "--note", "gateway maintenance")
	if code != 0 || !strings.Contains(out, "queue default is paused") || strings.Contains(out, "note:") {
		t.Fatalf("pause: %d %q %q", code, out, errOut)
	}
	res, err := e.ledger.Claim(context.Background(), "default", "pool-1", time.Minute, 10)
	if err != nil || !res.Paused || len(res.Jobs) != 0 {
		t.Fatalf("claim on a paused queue: %+v %v", res, err)
	}
	code, out, _ = e.cli("pause", "--queue", "default", "--actor", "carol", "--note", "me too")
	if code != 0 || !strings.Contains(out, "already paused by operator:bob") || !strings.Contains(out, "gateway maintenance") {
		t.Fatalf("second pause: %d %q", code, out)
	}
	code, out, _ = e.cli("queues")
	if code != 0 || !strings.Contains(out, "CANCELLED") || !strings.Contains(out, "PAUSED") ||
		!strings.Contains(out, "by operator:bob since") || !strings.Contains(out, "1 queue(s)") {
		t.Fatalf("queues: %d %q", code, out)
	}
	code, out, _ = e.cli("queues", "--json")
	var qs []struct {
		Queue  string         `json:"queue"`
		Counts map[string]int `json:"counts"`
		Paused *jobs.Pause    `json:"paused"`
	}
	if err := json.Unmarshal([]byte(out), &qs); code != 0 || err != nil || len(qs) != 1 || qs[0].Queue != "default" ||
		qs[0].Counts["pending"] != 1 || qs[0].Paused == nil || qs[0].Paused.Actor != "operator:bob" || qs[0].Paused.Note != "gateway maintenance" {
		t.Fatalf("queues --json: %d %v %q", code, err, out)
	}
	code, out, _ = e.cli("inspect", "--job", job)
	if code != 0 || !strings.Contains(out, "queue default is paused by operator:bob") {
		t.Fatalf("inspect a job of a paused queue: %d %q", code, out)
	}
	code, out, _ = e.cli("inspect", "--state", "pending")
	if code != 0 || !strings.Contains(out, "paused queue default (by operator:bob") {
		t.Fatalf("list of a paused queue: %d %q", code, out)
	}

	code, out, _ = e.cli("resume", "--queue", "default", "--actor", "bob", "--json")
	var r struct {
		Queue   string      `json:"queue"`
		Paused  *jobs.Pause `json:"paused"`
		Changed bool        `json:"changed"`
		Known   bool        `json:"known"`
	}
	if err := json.Unmarshal([]byte(out), &r); code != 0 || err != nil || r.Queue != "default" || r.Paused != nil || !r.Changed || !r.Known {
		t.Fatalf("resume --json: %d %v %q", code, err, out)
	}
	if code, out, _ := e.cli("resume", "--queue", "default", "--actor", "bob"); code != 0 || out != "queue default was not paused\n" {
		t.Fatalf("second resume: %d %q", code, out)
	}
	e.claim(job) // claims run again

	// A queue nobody has used is paused (pools starting later honour it),
	// with a warning about its name.
	code, out, _ = e.cli("pause", "--queue", "defualt", "--actor", "bob", "--note", "typo")
	if code != 0 || !strings.Contains(out, "no job or pool has used queue defualt yet") {
		t.Fatalf("pause of an unknown queue: %d %q", code, out)
	}

	events, err := e.ledger.Events(context.Background(), "default", 10)
	if err != nil || len(events) != 2 || events[0].Type != "resume" || events[1].Type != "pause" || events[1].Note != "gateway maintenance" {
		t.Fatalf("queue events: %+v %v", events, err)
	}
}

func TestRunNowCommand(t *testing.T) {
	e := newOperatorEnv(t)
	scheduled := e.enqueue(jobs.Delay(time.Hour))
	if code, _, errOut := e.cli("run-now", "--job", scheduled); code != 2 || !strings.Contains(errOut, "--actor is required") {
		t.Fatalf("run-now without an actor: %d %q", code, errOut)
	}
	code, out, errOut := e.cli("run-now", "--job", scheduled, "--actor", "alice", "--note", "customer waiting")
	if code != 0 || out != "job "+scheduled+" is due now (pending)\n" {
		t.Fatalf("run-now: %d %q %q", code, out, errOut)
	}
	code, out, _ = e.cli("inspect", "--job", scheduled)
	if code != 0 || !strings.Contains(out, "made due now by operator:alice: customer waiting") {
		t.Fatalf("inspect after run-now: %d %q", code, out)
	}
	if code, _, _ := e.cli("cancel", "--job", scheduled, "--actor", "alice", "--note", "x"); code != 0 {
		t.Fatal("cancel failed")
	}
	if code, _, errOut := e.cli("run-now", "--job", scheduled, "--actor", "alice"); code != 1 || !strings.Contains(errOut, "takes a pending (scheduled) job") {
		t.Fatalf("run-now of a cancelled job: %d %q", code, errOut)
	}
	// Without a note the history says who, with nothing dangling.
	quiet := e.enqueue(jobs.Delay(time.Hour))
	if code, _, errOut := e.cli("run-now", "--job", quiet, "--actor", "bob"); code != 0 {
		t.Fatalf("run-now without a note: %d %q", code, errOut)
	}
	code, out, _ = e.cli("inspect", "--job", quiet)
	if code != 0 || !strings.Contains(out, "made due now by operator:bob\n") {
		t.Fatalf("inspect after run-now without a note: %d %q", code, out)
	}
}

// TestInspectPendingDueAndLimit: pending jobs show when they are due, and
// --limit bounds the whole list (every queue's together) and says how many
// it left out.
func TestInspectPendingDueAndLimit(t *testing.T) {
	e := newOperatorEnv(t)
	var ids []string
	for range 3 {
		ids = append(ids, e.enqueue())
	}
	later := e.enqueue(jobs.Delay(time.Hour), jobs.Queue("other"))
	code, out, errOut := e.cli("inspect", "--state", "pending", "--limit", "10")
	if code != 0 || !strings.Contains(out, "\tDUE") && !strings.Contains(out, " DUE ") {
		t.Fatalf("inspect pending: %d %q %q: want a DUE column", code, out, errOut)
	}
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(line, later):
			if !regexp.MustCompile(`\(in (59m5\ds|1h0m0s)\)`).MatchString(line) {
				t.Errorf("the scheduled job's line %q: want its due time an hour off", line)
			}
		case len(line) > 36 && slices.Contains(ids, line[:36]):
			if !strings.Contains(line, " now ") {
				t.Errorf("a due job's line %q: want due now", line)
			}
		}
	}
	if !strings.HasSuffix(out, "4 pending job(s)\n") || strings.Contains(out, "%!") {
		t.Errorf("every job shown, every column formatted: %q", out)
	}
	code, out, _ = e.cli("inspect", "--state", "pending", "--limit", "2")
	rows := 0
	for _, line := range strings.Split(out, "\n") {
		if len(line) > 36 && (slices.Contains(ids, line[:36]) || line[:36] == later) {
			rows++
		}
	}
	if code != 0 || rows != 2 || !strings.Contains(out, "2 of 4 pending job(s) shown (--limit 2)") {
		t.Fatalf("--limit 2 over two queues: %d rows, %q", rows, out)
	}
	if code, _, errOut := e.cli("inspect", "--state", "pending", "--limit", "0"); code != 2 || !strings.Contains(errOut, "--limit") {
		t.Fatalf("--limit 0: %d %q", code, errOut)
	}
}

// TestInspectShowsUniqueKey: inspect --job shows a unique job's key and the
// states in which it holds it, and nothing of the kind for other jobs.
func TestInspectShowsUniqueKey(t *testing.T) {
	e := newOperatorEnv(t)
	unique := e.enqueue(jobs.Unique(jobs.UniqueOpts{ByFields: []string{"from"}}))
	plain := e.enqueue()
	code, out, errOut := e.cli("inspect", "--job", unique)
	if code != 0 || !strings.Contains(out, "unique key ") || !strings.Contains(out, "held while pending, running, uncertain, review, succeeded") {
		t.Fatalf("inspect of a unique job: %d %q %q", code, out, errOut)
	}
	if code, out, _ = e.cli("inspect", "--job", plain); code != 0 || strings.Contains(out, "unique key") {
		t.Fatalf("inspect of a plain job: %d %q", code, out)
	}
}

// TestInspectShowsHeaders: inspect --job shows a job's headers, sorted by
// key and escaped, and nothing of the kind for a job without.
func TestInspectShowsHeaders(t *testing.T) {
	e := newOperatorEnv(t)
	id := e.enqueue(jobs.Header("tenant", "acme"), jobs.Header("traceparent", "00-abc-01"))
	code, out, errOut := e.cli("inspect", "--job", id)
	if code != 0 || !strings.Contains(out, "\n  headers tenant=acme, traceparent=00-abc-01\n") {
		t.Fatalf("inspect of a job with headers: %d %q %q", code, out, errOut)
	}
	plain := e.enqueue()
	if code, out, _ = e.cli("inspect", "--job", plain); code != 0 || strings.Contains(out, "headers") {
		t.Fatalf("inspect of a job without headers: %d %q", code, out)
	}
	if _, err := e.client.Enqueue(context.Background(), bank.Transfer{From: "acct-000", To: "acct-001", Cents: 5},
		jobs.Header("note", "a\x1b[2Jb")); err == nil {
		t.Fatal("a header value with a control character was accepted")
	}
}

// TestJobAndOpExcludeEachOther: inspect and resolve refuse --job with --op
// (inspect showed --job's job and ignored --op; resolve said --job or --op
// was missing), and inspect refuses --state with either, each naming the
// flags at fault.
func TestJobAndOpExcludeEachOther(t *testing.T) {
	e := newOperatorEnv(t)
	id := e.enqueue()
	for _, args := range [][]string{
		{"inspect", "--job", id, "--op", "another-operation"},
		{"resolve", "--job", id, "--op", "another-operation", "--decision", "dead", "--actor", "alice"},
	} {
		if code, out, errOut := e.cli(args...); code != 2 || out != "" || !strings.Contains(errOut, "--job and --op each name a job: give one of them") {
			t.Errorf("%v: %d %q %q", args, code, out, errOut)
		}
	}
	if code, out, errOut := e.cli("inspect", "--state", "pending", "--job", id); code != 2 || out != "" ||
		!strings.Contains(errOut, "--state lists jobs, --job and --op show one") {
		t.Errorf("inspect --state --job: %d %q %q", code, out, errOut)
	}
	if code, _, errOut := e.cli("inspect"); code != 2 || !strings.Contains(errOut, "give --state, or --job or --op") {
		t.Errorf("inspect alone: %d %q", code, errOut)
	}
	if code, out, _ := e.cli("inspect", "--job", id); code != 0 || !strings.Contains(out, id) {
		t.Errorf("inspect --job: %d %q", code, out)
	}
}

// TestFlagsAModeIgnoresAreUsageErrors: a flag given where the command's
// mode does nothing with it exits 2 naming the conflict, before any
// connection (--redis names a port nothing listens on).
func TestFlagsAModeIgnoresAreUsageErrors(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"schedules", "--removed", "--id", "x"}, "--id does nothing with --removed"},
		{[]string{"schedules", "--removed", "--ticks", "3"}, "--ticks does nothing with --removed"},
		{[]string{"schedules", "--remove", "--id", "x", "--actor", "a", "--ticks", "3"}, "--ticks does nothing with --remove"},
		{[]string{"inspect", "--job", "j", "--limit", "3"}, "--limit does nothing with --job"},
		{[]string{"inspect", "--op", "o", "--limit", "3"}, "--limit does nothing with --op"},
		{[]string{"workflow", "inspect", "--id", "w", "--limit", "3"}, "--limit does nothing with --id"},
	}
	for _, c := range cases {
		code, _, errOut := runCLI(t, append(c.args, "--redis", "127.0.0.1:1")...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: code %d, stderr %q (want 2 and %q)", c.args, code, errOut, c.want)
		}
	}
}
