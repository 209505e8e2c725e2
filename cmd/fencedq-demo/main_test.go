package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/examples/bank"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/syncbuf"
	"github.com/fencedq/fencedq/jobs"
)

// TestMain lets this test binary run as the demo's crash-stage worker, as
// the crash stage re-executes its own binary (crashWorkerEnv).
func TestMain(m *testing.M) {
	if os.Getenv(crashWorkerEnv) == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

func runDemo(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// operatorEnv is a real Redis namespace with a client and its ledger.
type operatorEnv struct {
	url    string
	ns     string
	client *jobs.Client
	ledger *ledger.Ledger
}

func newOperatorEnv(t *testing.T) *operatorEnv {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	c := jobs.NewClient(srv.Client(), jobs.Config{Namespace: ns})
	t.Cleanup(func() { _ = c.Close() })
	return &operatorEnv{url: "redis://" + srv.Addr, ns: ns, client: c, ledger: ledger.New(srv.Client(), ledger.Config{Namespace: ns})}
}

func TestHelpAndBadUsage(t *testing.T) {
	code, out, errOut := runDemo(t, "--help")
	if code != 0 || strings.Count(out, "Usage: fencedq-demo [flags]") != 1 || errOut != "" || !strings.Contains(out, "-duration") ||
		!strings.Contains(out, "Environment: none.") {
		t.Errorf("--help: code %d, stdout %q, stderr %q", code, out, errOut)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--duration", "1s"}, "at least 5s"},
		{[]string{"--rate", "0"}, "--rate must be positive"},
		{[]string{"--log-level", "chatty"}, "invalid value \"chatty\" for flag -log-level"},
		{[]string{"--namespace", "a b"}, "--namespace"},
		{[]string{"--redis", "not a url"}, "--redis"},
		{[]string{"extra"}, "unexpected argument"},
	} {
		code, out, errOut := runDemo(t, c.args...)
		if code != 2 || out != "" && !strings.HasPrefix(out, "namespace ") || !strings.Contains(errOut, c.want) || !strings.HasPrefix(errOut, "fencedq-demo: ") {
			t.Errorf("%v: code %d, stdout %q, stderr %q (want 2 and %q)", c.args, code, out, errOut, c.want)
		}
	}
}

func TestDemoOnEmbeddedRedis(t *testing.T) {
	code, out, errOut := runDemo(t, "--duration", "20s", "--json", "--addr", "127.0.0.1:0")
	if code != 0 {
		t.Fatalf("demo exit %d\nsummary: %s\nstderr:\n%s", code, out, errOut)
	}
	var s summary
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("summary is not JSON: %v\n%s", err, out)
	}
	t.Logf("summary: %+v", s)
	if s.Lost != 0 || !s.MoneyConserved || !s.ExactlyOnce || s.AppliedButDead != 0 {
		t.Fatalf("lost %d, money conserved %v, exactly once %v, dead with an effect %d", s.Lost, s.MoneyConserved, s.ExactlyOnce, s.AppliedButDead)
	}
	if s.FencedRejections < 1 || s.Deduplicated < 1 || s.UncertainResolved < 1 {
		t.Fatalf("demo did not show fencing, deduplication and reconciliation: %+v\nstderr:\n%s", s, errOut)
	}
	if s.Enqueued < 50 || s.Succeeded < s.Enqueued/2 {
		t.Fatalf("too little work done: %+v", s)
	}
	if len(s.Stages) < 4 {
		t.Fatalf("stages: %v", s.Stages)
	}
	// Every staged failure ran and passed its verdict.
	checks := map[string]bool{}
	for _, v := range s.Verdicts {
		checks[v.Check] = true
		if v.Result != resultPass || v.Happened == "" || v.Required == "" {
			t.Errorf("verdict %+v", v)
		}
	}
	for _, c := range []string{checkPaused, checkLateAnswer, checkCrash, checkStray, checkDuplicates, checkLost, checkMoney, checkOnce} {
		if !checks[c] {
			t.Errorf("no verdict for %s", c)
		}
	}
}

// TestDemoJSONFailsWhenACheckFails: the demo's verdict is its exit code,
// with --json as without.
func TestDemoJSONFailsWhenACheckFails(t *testing.T) {
	for _, asJSON := range []bool{true, false} {
		for _, s := range []summary{{Lost: 1, MoneyConserved: true, ExactlyOnce: true}, {MoneyConserved: false, ExactlyOnce: true},
			{MoneyConserved: true, ExactlyOnce: false}} {
			var out bytes.Buffer
			err := report(&out, &s, asJSON)
			if !errors.Is(err, errCheckFailed) {
				t.Errorf("json %v, %+v: %v", asJSON, s, err)
			}
			if asJSON {
				var back summary
				if json.Unmarshal(out.Bytes(), &back) != nil || back.Lost != s.Lost {
					t.Errorf("json summary not printed: %q", out.String())
				}
			}
		}
		var out bytes.Buffer
		if err := report(&out, &summary{MoneyConserved: true, ExactlyOnce: true}, asJSON); err != nil {
			t.Errorf("json %v, a passing run: %v", asJSON, err)
		}
	}
}

// TestDemoStaysUpUntilInterruptedAndIgnoresTheEnvironment: after its
// summary the demo keeps the dashboard up for the newcomer to explore,
// until Ctrl-C; it runs in a fresh namespace and says when new jobs stop.
// A shell set up for production (FENCEDQ_REDIS, FENCEDQ_NAMESPACE) does not
// aim it there: it runs on its embedded Redis, says which variables it
// ignored, and the other Redis is left as it was.
func TestDemoStaysUpUntilInterruptedAndIgnoresTheEnvironment(t *testing.T) {
	prod := newOperatorEnv(t)
	ctx0 := context.Background()
	job, err := prod.client.Enqueue(ctx0, bank.Transfer{From: "acct-000", To: "acct-001", Cents: 5})
	if err != nil {
		t.Fatal(err)
	}
	rdb := prod.ledger.Redis()
	keysBefore, err := rdb.Keys(ctx0, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("FENCEDQ_REDIS", prod.url)
	t.Setenv("FENCEDQ_NAMESPACE", prod.ns)
	t.Setenv("FENCEDQ_DURATION", "1h")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb syncbuf.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"--duration", "5s", "--rate", "10", "--addr", "127.0.0.1:0"}, &out, &errb)
	}()
	deadline := time.After(90 * time.Second)
	for !strings.Contains(out.String(), "stays up at ") {
		select {
		case code := <-done:
			t.Fatalf("the demo ended (%d) without staying up: %s %s", code, out.String(), errb.String())
		case <-deadline:
			t.Fatalf("no summary: %s", out.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	text := out.String()
	url := strings.Fields(text[strings.Index(text, "stays up at ")+len("stays up at "):])[0]
	res, err := http.Get(url + "api/overview")
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("the dashboard is down after the summary: %v %v", res, err)
	}
	res.Body.Close()
	if !regexp.MustCompile(`namespace demo-[0-9a-f]{8}\n`).MatchString(text) || !strings.Contains(text, "new transfers stopped;") ||
		!strings.Contains(text, "lost (must be 0)") || !strings.Contains(text, "embedded Redis on ") || strings.Contains(text, prod.ns) {
		t.Errorf("output: %s", text)
	}
	for _, v := range []string{"FENCEDQ_DURATION", "FENCEDQ_NAMESPACE", "FENCEDQ_REDIS"} {
		if !strings.Contains(errb.String(), "fencedq-demo: "+v+" is ignored: this command reads no flag from the environment") {
			t.Errorf("stderr does not say %s is ignored: %q", v, errb.String())
		}
	}
	keysAfter, err := rdb.Keys(ctx0, "*").Result()
	if err != nil || len(keysAfter) != len(keysBefore) {
		t.Errorf("the demo wrote to the Redis of FENCEDQ_REDIS: %d keys before, %d after (%v)", len(keysBefore), len(keysAfter), err)
	}
	if rec, err := prod.ledger.Get(ctx0, "default", job.JobID); err != nil || rec.State != jobs.Pending || rec.Attempts != 0 {
		t.Errorf("the job in FENCEDQ_NAMESPACE was touched: %+v %v", rec, err)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d after Ctrl-C: %s\noutput:\n%s", code, errb.String(), out.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the demo did not end on Ctrl-C")
	}
}

// TestDemoRefusesANamespaceItDidNotCreate: on a given Redis the demo
// refuses a namespace that holds keys it did not write, naming
// --namespace, before writing anything; an empty namespace becomes the
// demo's (marked), and one it marked is taken again.
func TestDemoRefusesANamespaceItDidNotCreate(t *testing.T) {
	e := newOperatorEnv(t)
	ctx := context.Background()
	rdb := e.ledger.Redis()
	if _, err := e.client.Enqueue(ctx, bank.Transfer{From: "acct-000", To: "acct-001", Cents: 5}); err != nil {
		t.Fatal(err)
	}
	keysBefore, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	// Through the command: bare host:port, as an operator would type it.
	addr := strings.TrimPrefix(e.url, "redis://")
	code, _, errOut := runDemo(t, "--redis", addr, "--namespace", e.ns, "--exit", "--addr", "127.0.0.1:0")
	if code != 2 || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, "--namespace "+e.ns+" on redis "+addr+":") ||
		!strings.Contains(errOut, "the namespace holds keys the demo did not create") || !strings.Contains(errOut, "give --namespace a new name") {
		t.Fatalf("foreign namespace: code %d, stderr %q", code, errOut)
	}
	if keysAfter, err := rdb.Keys(ctx, "*").Result(); err != nil || len(keysAfter) != len(keysBefore) {
		t.Fatalf("the refused demo wrote: %v -> %v (%v)", keysBefore, keysAfter, err)
	}

	// One key the demo did not write is enough; another namespace's keys
	// (even one whose name starts alike) do not count.
	other := e.ns + "-other"
	if err := rdb.Set(ctx, other+":x", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := claimNamespace(ctx, rdb, e.ns+"-oth"); err != nil {
		t.Fatalf("an empty namespace was refused: %v", err)
	}
	if n, err := rdb.Exists(ctx, markerKey(e.ns+"-oth")).Result(); err != nil || n != 1 {
		t.Fatalf("an empty namespace was not marked: %d %v", n, err)
	}
	if err := claimNamespace(ctx, rdb, e.ns+"-oth"); err != nil {
		t.Fatalf("the demo's own namespace was refused: %v", err)
	}
	if err := claimNamespace(ctx, rdb, other); !errors.Is(err, errForeignNamespace) || !strings.Contains(err.Error(), other+":x") {
		t.Fatalf("a namespace with one foreign key: %v", err)
	}

	// On a cluster every master is looked at: a namespace whose one key
	// lives on any master is refused.
	cl := redistest.StartCluster(t).Client()
	masters := map[string]bool{}
	for i := 0; len(masters) < 3 && i < 1000; i++ {
		ns := fmt.Sprintf("c%d", i)
		node, err := cl.MasterForKey(ctx, ns+":k")
		if err != nil {
			t.Fatal(err)
		}
		addr := node.Options().Addr
		if masters[addr] {
			continue
		}
		masters[addr] = true
		if err := cl.Set(ctx, ns+":k", "1", 0).Err(); err != nil {
			t.Fatal(err)
		}
		if err := claimNamespace(ctx, cl, ns); !errors.Is(err, errForeignNamespace) {
			t.Errorf("cluster, namespace %s with its one key on master %s: %v", ns, addr, err)
		}
	}
	if len(masters) != 3 {
		t.Fatalf("keys on %d masters", len(masters))
	}
	if err := claimNamespace(ctx, cl, "fresh"); err != nil {
		t.Fatalf("cluster, empty namespace: %v", err)
	}
}

// TestBalanceDiffsNameEachAccount: a failed exactly-once check names the
// accounts whose balance is off, and by how much.
func TestBalanceDiffsNameEachAccount(t *testing.T) {
	got := balanceDiffs(map[string]int64{"a": 10, "b": 5, "c": 1}, map[string]int64{"a": 10, "b": 7, "d": 3})
	want := []string{"b: expected 5, is 7", "c: expected 1, is 0", "d: expected none, is 3"}
	if !slices.Equal(got, want) {
		t.Fatalf("balanceDiffs = %q, want %q", got, want)
	}
	if d := diffText(got); d != " (b: expected 5, is 7; c: expected 1, is 0; d: expected none, is 3)" {
		t.Fatalf("diffText = %q", d)
	}
}
