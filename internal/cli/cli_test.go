package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/termsafe"
)

// TestLogsPrintDurationsAsDurations: in both formats.
func TestLogsPrintDurationsAsDurations(t *testing.T) {
	for _, format := range []logFormat{"json", "text"} {
		var buf bytes.Buffer
		l := LogFlags{level: slog.LevelInfo, format: format}
		l.Logger(&buf).Info("pool started", "lease_ttl", 10*time.Second, "group", slog.GroupValue(slog.Duration("wait", 1500*time.Millisecond)))
		out := buf.String()
		want := map[logFormat][]string{"json": {`"lease_ttl":"10s"`, `"wait":"1.5s"`}, "text": {"lease_ttl=10s", "group.wait=1.5s"}}[format]
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: %q lacks %s", format, out, w)
			}
		}
	}
}

// TestJSONLogsEscapeWhatATerminalActsOn: a JSON log line quoting a
// handler's error text writes DEL, C1 controls, bidirectional formatting
// and invisible characters (a zero-width space, a tag character above
// U+FFFF) as \u escapes (slog's JSON handler writes them as they are), and
// still decodes to the text logged.
func TestJSONLogsEscapeWhatATerminalActsOn(t *testing.T) {
	const sneaky = "declined\u009b2J\x7f\u202egnp.exe\u2028 caf\u00e9 pay\u200bee\U000e0041"
	var buf bytes.Buffer
	l := LogFlags{level: slog.LevelInfo, format: "json"}
	l.Logger(&buf).Error("handler failed", "error", sneaky)
	out := buf.String()
	if i := strings.IndexFunc(out, func(r rune) bool { return r > 0x1f && termsafe.Unsafe(r) }); i >= 0 {
		t.Fatalf("raw %U at %d of %q", []rune(out[i:])[0], i, out)
	}
	if !strings.Contains(out, `pay\u200bee\udb40\udc41`) {
		t.Fatalf("the invisible characters are not escaped: %q", out)
	}
	var line struct{ Error string }
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil || line.Error != sneaky {
		t.Fatalf("decoded %q (%v), want %q", line.Error, err, sneaky)
	}
}

// TestRunExitCodes: 0 on success and --help, 2 on bad usage (flags,
// arguments, the environment, an ErrUsage from the command), 1 on any
// other error; errors are one line prefixed with the command's name.
func TestRunExitCodes(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		env     string
		err     error
		code    int
		stdout  string
		errLine string
	}{
		{name: "ok", args: []string{"--n", "3"}, code: 0, stdout: "n=3 level=INFO\n"},
		{name: "help", args: []string{"--help"}, code: 0, stdout: "Usage: tool sub [flags]\n\nDoes a thing.\n\nFlags:\n"},
		{name: "bad flag", args: []string{"--nope"}, code: 2, errLine: "tool sub: flag provided but not defined: -nope\nRun 'tool sub --help' for its flags.\n"},
		{name: "argument", args: []string{"extra"}, code: 2, errLine: "tool sub: unexpected argument \"extra\"\n"},
		{name: "env", env: "loud", code: 2, errLine: "tool sub: usage: FENCEDQ_LOG_LEVEL=\"loud\": slog: level string \"loud\": unknown name\n"},
		{name: "env", env: "warn", code: 0, stdout: "n=1 level=WARN\n"},
		{name: "env loses to flag", args: []string{"--log-level", "error"}, env: "loud", code: 0, stdout: "n=1 level=ERROR\n"},
		{name: "usage error", err: fmt.Errorf("%w: bad", ErrUsage), code: 2, errLine: "tool sub: usage: bad\n"},
		{name: "failure", err: errors.New("redis down"), code: 1, errLine: "tool sub: redis down\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.env != "" {
				t.Setenv("FENCEDQ_LOG_LEVEL", c.env)
			}
			fs := flag.NewFlagSet("tool sub", flag.ContinueOnError)
			n := fs.Int("n", 1, "a number")
			var logs LogFlags
			logs.Add(fs, slog.LevelInfo)
			var stdout, stderr bytes.Buffer
			code := Run(context.Background(), fs, "Does a thing", func(_ context.Context, out io.Writer) error {
				if c.err != nil {
					return c.err
				}
				_, err := fmt.Fprintf(out, "n=%d level=%v\n", *n, logs.level)
				return err
			}, c.args, &stdout, &stderr)
			if code != c.code || !strings.HasPrefix(stdout.String(), c.stdout) || stderr.String() != c.errLine {
				t.Errorf("code %d (want %d), stdout %q, stderr %q (want %q)", code, c.code, stdout.String(), stderr.String(), c.errLine)
			}
		})
	}
}

// actionFlags is a command with connection, identity and logging flags and
// the per-action flags of pause, cancel and resolve.
func actionFlags(name string) (*flag.FlagSet, func() string) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	redisURL := fs.String("redis", "redis://127.0.0.1:6379/0", "Redis")
	ns := fs.String("namespace", "fq", "namespace")
	actor := fs.String("actor", "", "who acts")
	queue := fs.String("queue", "", "queue")
	job := fs.String("job", "", "job")
	decision := fs.String("decision", "", "decision")
	limit := fs.Int("limit", 50, "how many")
	var logs LogFlags
	logs.Add(fs, slog.LevelInfo)
	return fs, func() string {
		return fmt.Sprintf("redis=%s namespace=%s actor=%s queue=%s job=%s decision=%s limit=%d level=%v",
			*redisURL, *ns, *actor, *queue, *job, *decision, *limit, logs.level)
	}
}

// setActionEnv sets a FENCEDQ_ variable for every flag of actionFlags.
func setActionEnv(t *testing.T) {
	for k, v := range map[string]string{"REDIS": "redis://prod:6379/0", "NAMESPACE": "prod", "ACTOR": "alice",
		"QUEUE": "payments", "JOB": "job-1", "DECISION": "dead", "LIMIT": "7", "LOG_LEVEL": "debug"} {
		t.Setenv(EnvPrefix+k, v)
	}
}

// TestEnvSetsOnlyConnectionIdentityAddressCredentialAndLogging: the
// environment fills --redis, --namespace, --actor and --log-level, never a
// per-action flag (--queue, --job, --decision, --limit); each of those
// variables is named as ignored, one line each; a flag given wins.
func TestEnvSetsOnlyConnectionIdentityAddressCredentialAndLogging(t *testing.T) {
	setActionEnv(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "redis=redis://prod:6379/0 namespace=prod actor=alice queue= job= decision= limit=50 level=DEBUG"},
		{[]string{"--redis", "127.0.0.1:6379", "--queue", "q", "--limit", "3"},
			"redis=127.0.0.1:6379 namespace=prod actor=alice queue=q job= decision= limit=3 level=DEBUG"},
	} {
		fs, got := actionFlags("tool act")
		var stdout, stderr bytes.Buffer
		code := Run(context.Background(), fs, "Acts", func(_ context.Context, out io.Writer) error {
			_, err := io.WriteString(out, got())
			return err
		}, c.args, &stdout, &stderr)
		warn := func(v, f string) string {
			return "tool act: FENCEDQ_" + v + " is ignored: --" + f + " is read from the command line only (the environment sets only connection, identity, address, credential and logging flags)\n"
		}
		wantErr := warn("DECISION", "decision") + warn("JOB", "job") + warn("LIMIT", "limit") + warn("QUEUE", "queue")
		if code != 0 || stdout.String() != c.want || stderr.String() != wantErr {
			t.Errorf("%v: code %d\nstdout %q\n  want %q\nstderr %q\n  want %q", c.args, code, stdout.String(), c.want, stderr.String(), wantErr)
		}
	}
}

// TestRunWithoutEnvReadsNoVariable: a command run without the environment
// (the demo) takes no flag from it, not even --redis, and says which
// variables it ignored.
func TestRunWithoutEnvReadsNoVariable(t *testing.T) {
	setActionEnv(t)
	fs, got := actionFlags("tool demo")
	var stdout, stderr bytes.Buffer
	code := RunWithoutEnv(context.Background(), fs, "Demos", func(_ context.Context, out io.Writer) error {
		_, err := io.WriteString(out, got())
		return err
	}, nil, &stdout, &stderr)
	want := "redis=redis://127.0.0.1:6379/0 namespace=fq actor= queue= job= decision= limit=50 level=INFO"
	if code != 0 || stdout.String() != want || strings.Count(stderr.String(), "\n") != 8 ||
		!strings.Contains(stderr.String(), "tool demo: FENCEDQ_REDIS is ignored: this command reads no flag from the environment (give --redis on the command line)\n") {
		t.Errorf("code %d, stdout %q (want %q), stderr %q", code, stdout.String(), want, stderr.String())
	}
}

// TestHelpNamesTheVariables: --help lists the variables that set a flag of
// the command, and only those; without the environment it says none.
func TestHelpNamesTheVariables(t *testing.T) {
	fs, _ := actionFlags("tool act")
	var out bytes.Buffer
	if code := Run(context.Background(), fs, "Acts", nil, []string{"--help"}, &out, io.Discard); code != 0 {
		t.Fatalf("help: %d", code)
	}
	help := out.String()
	env := help[strings.Index(help, "\nEnvironment"):]
	for _, v := range []string{"FENCEDQ_REDIS       sets -redis", "FENCEDQ_NAMESPACE   sets -namespace", "FENCEDQ_ACTOR", "FENCEDQ_LOG_LEVEL", "FENCEDQ_LOG_FORMAT"} {
		if !strings.Contains(env, v) {
			t.Errorf("help lacks %q:\n%s", v, help)
		}
	}
	for _, v := range []string{"QUEUE", "JOB", "DECISION", "LIMIT"} {
		if strings.Contains(help, "FENCEDQ_"+v) {
			t.Errorf("help names FENCEDQ_%s:\n%s", v, help)
		}
	}
	fs, _ = actionFlags("tool demo")
	out.Reset()
	if code := RunWithoutEnv(context.Background(), fs, "Demos", nil, []string{"--help"}, &out, io.Discard); code != 0 ||
		!strings.Contains(out.String(), "\nEnvironment: none. This command reads no FENCEDQ_<FLAG> variable") || strings.Contains(out.String(), "FENCEDQ_REDIS") {
		t.Errorf("help without the environment: %d %q", code, out.String())
	}
}

// TestEnvFlags: the allow-list holds connection, identity, address,
// credential and logging flags only.
func TestEnvFlags(t *testing.T) {
	want := []string{"redis", "postgres", "fence-postgres", "fence-redis", "namespace", "actor", "addr", "metrics-addr", "dashboard-user", "dashboard-password", "dashboard-token", "csrf-key", "log-level", "log-format"}
	if got := EnvFlags(); !slices.Equal(got, want) {
		t.Errorf("EnvFlags() = %v, want %v", got, want)
	}
	if v := EnvVar("dashboard-password"); v != "FENCEDQ_DASHBOARD_PASSWORD" {
		t.Errorf("EnvVar: %s", v)
	}
}

// TestRedisTakesHostPortAndURLs: --redis host:port reaches the server as
// redis://host:port does; a malformed address is a usage error that names
// the flag and hides a password.
func TestRedisTakesHostPortAndURLs(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ctx := context.Background()
	for _, addr := range []string{srv.Addr, " " + srv.Addr, "redis://" + srv.Addr, "redis://" + srv.Addr + "/0"} {
		rdb, err := ConnectRedis(ctx, addr)
		if err != nil {
			t.Errorf("ConnectRedis(%q): %v", addr, err)
			continue
		}
		if err := rdb.Set(ctx, redistest.Namespace(t)+":k", "v", time.Minute).Err(); err != nil {
			t.Errorf("%q: %v", addr, err)
		}
		_ = rdb.Close()
	}
	for in, want := range map[string]string{"127.0.0.1:6379": "127.0.0.1:6379", "redis-host:7000": "redis-host:7000", "redis://h:1/2": "h:1"} {
		if opt, err := ParseRedisURL(in); err != nil || opt.Addr != want {
			t.Errorf("ParseRedisURL(%q) = %+v, %v (want addr %s)", in, opt, err, want)
		}
	}
	if opt, err := ParseRedisURL("127.0.0.1:6379"); err != nil || opt.DB != 0 || opt.TLSConfig != nil {
		t.Errorf("host:port: %+v %v", opt, err)
	}
	for _, bad := range []string{"not a url", "redis://:secret@bad host:1/0", "http://h:1"} {
		_, err := ParseRedisURL(bad)
		if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "--redis") || strings.Contains(err.Error(), "secret") {
			t.Errorf("ParseRedisURL(%q): %v", bad, err)
		}
	}
	port := redistest.FreePort(t)
	_, err := ConnectRedis(ctx, fmt.Sprintf("user:secret@127.0.0.1:%d", port))
	if err == nil || strings.Contains(err.Error(), "secret") || !strings.Contains(err.Error(), fmt.Sprintf("redis redis://***@127.0.0.1:%d does not answer", port)) {
		t.Errorf("unreachable: %v", err)
	}
}

// TestRedactURL: a password never reaches a message.
func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"redis://:secret@host:6379/0":     "redis://***@host:6379/0",
		"redis://user:secret@host:6379/0": "redis://***@host:6379/0",
		"redis://host:6379/0":             "redis://host:6379/0",
		"user:secret@host:6379":           "***@host:6379",
		"redis://:a@h:1,redis://:b@h:2":   "redis://***@h:1,redis://***@h:2",
		// a password holding a comma is no list of addresses
		"redis://user:sec,ret@h:1/0":                 "redis://***@h:1/0",
		"redis-sentinel://user:sec,ret@s1:1,s2:2/fq": "redis-sentinel://***@s1:1,s2:2/fq",
		"user:sec,ret@h:1":                           "***@h:1",
		// nor is a password holding "://" a second address
		"redis://user:sec://ret@h:1/0":            "redis://***@h:1/0",
		"user:sec://ret@h:1":                      "***@h:1",
		"redis://user:sec://ret@h:1,redis://h:2":  "redis://***@h:1,redis://h:2",
		"redis-sentinel://user:sec://ret@s1:1/fq": "redis-sentinel://***@s1:1/fq",
		"unix://user:secret@/run/redis.sock":      "unix://***@/run/redis.sock",
	} {
		if got := RedactURL(in); got != want || strings.Contains(got, "secret") || strings.Contains(got, "sec,") {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestClusterURLsKeepTLS: comma-separated rediss:// URLs (a TLS Redis
// Cluster) connect with TLS, as one rediss:// URL does: the password never
// crosses the network in clear text.
func TestClusterURLsKeepTLS(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	first := make(chan []byte, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
				b := make([]byte, 512)
				n, _ := c.Read(b)
				first <- b[:n]
			}()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	a := ln.Addr().String()
	rdb, err := ConnectRedis(ctx, "rediss://user:secret@"+a+",rediss://user:secret@"+a)
	if err == nil {
		_ = rdb.Close()
		t.Fatal("connected to a server that speaks no TLS")
	}
	got := <-first
	if len(got) == 0 || got[0] != 0x16 || strings.Contains(string(got), "secret") {
		t.Fatalf("first bytes sent to a rediss:// cluster node are not a TLS handshake: %q", got)
	}
	for _, mixed := range []string{"rediss://" + a + ",redis://" + a, "redis://" + a + ",rediss://" + a} {
		if _, err := ConnectRedis(ctx, mixed); !errors.Is(err, ErrUsage) {
			t.Errorf("ConnectRedis(%q) = %v, want ErrUsage (TLS for some nodes only)", mixed, err)
		}
	}
}

// TestRedisThatRefusesIsNotCalledSilent: a Redis that answers the first
// contact with an error (a password it wants or refuses, a database it
// does not have) is reported as refusing, with its answer and where to look,
// not as a Redis that does not answer.
func TestRedisThatRefusesIsNotCalledSilent(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ctx := context.Background()
	for addr, want := range map[string]string{
		"redis://" + srv.Addr + "/99":            "DB index is out of range",
		"redis://user:secret@" + srv.Addr + "/0": "WRONGPASS",
	} {
		_, err := ConnectRedis(ctx, addr)
		if err == nil || strings.Contains(err.Error(), "does not answer") || !strings.Contains(err.Error(), "refused the connection") ||
			!strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "secret") {
			t.Errorf("ConnectRedis(%q): %v, want it refused, saying %q", RedactURL(addr), err, want)
		}
	}
}

// TestMalformedRedisURLNeverShowsThePassword: a password typed with a
// character a URL reserves (/ ? # ,) makes a malformed address; the usage
// error says so without quoting any part of the password, for every form
// of --redis (one URL, a Redis Cluster's list, Sentinels).
func TestMalformedRedisURLNeverShowsThePassword(t *testing.T) {
	ctx := context.Background()
	for _, addr := range []string{
		"redis://user:sec/ret@127.0.0.1:1/0",
		"redis://user:sec?ret@127.0.0.1:1/0",
		"redis://user:sec#ret@127.0.0.1:1/0",
		"redis://user:1234/ret@127.0.0.1:1/0",
		"redis://user:1234?ret@127.0.0.1:1/0",
		"user:sec/ret@127.0.0.1:1",
		"redis://user:sec,ret@127.0.0.1:1/0",
		"redis://user:sec,ret@127.0.0.1:1,redis://user:sec,ret@127.0.0.1:2",
		"redis://user:1234,ret@127.0.0.1:1/0",
		"redis-sentinel://user:sec/ret@127.0.0.1:1/fq",
		"redis-sentinel://user:sec,ret@127.0.0.1:1/fq/x",
		"redis://user:sec://ret@127.0.0.1:1/0",
		"redis://user:sec://ret@127.0.0.1:1,redis://127.0.0.1:2",
		"redis-sentinel://user:sec://ret@127.0.0.1:1/fq",
	} {
		_, err := ConnectRedis(ctx, addr)
		if err == nil {
			t.Errorf("ConnectRedis(%s) connected", RedactURL(addr))
			continue
		}
		for _, part := range []string{"sec", "ret", "1234"} {
			if strings.Contains(err.Error(), part) {
				t.Errorf("ConnectRedis(%s): %v: shows %q of the password", RedactURL(addr), err, part)
			}
		}
	}
}

// TestClusterWithAMasterDownNamesIt: a Redis Cluster one of whose masters
// does not answer is refused every time, naming that master (a cluster
// client's PING goes to a random master: the command connected or not by
// chance, and named every address given).
func TestClusterWithAMasterDownNamesIt(t *testing.T) {
	c := redistest.StartCluster(t)
	addr := strings.Join(c.Addrs(), ",")
	rdb, err := ConnectRedis(context.Background(), addr)
	if err != nil {
		t.Fatalf("ConnectRedis(%q): %v", addr, err)
	}
	_ = rdb.Close()
	down := c.Nodes[2]
	down.Pause()
	t.Cleanup(down.Resume)
	for range 2 {
		rdb, err := ConnectRedis(context.Background(), addr)
		if err == nil {
			_ = rdb.Close()
		}
		var why string
		if err != nil {
			_, why, _ = strings.Cut(err.Error(), " does not answer: ")
		}
		if !strings.HasPrefix(why, "master "+down.Addr+": ") || strings.Contains(why, c.Nodes[0].Addr) || strings.Contains(why, c.Nodes[1].Addr) {
			t.Fatalf("ConnectRedis(%q) with %s paused: %v, want it refused naming that master alone", addr, down.Addr, err)
		}
	}
}

// TestOneClusterNodeMakesAClusterClient: --redis naming one node of a Redis
// Cluster reaches every master (a plain client met MOVED on the keys of
// the others: "jobs: counts default: MOVED 5718 host:port").
func TestOneClusterNodeMakesAClusterClient(t *testing.T) {
	c := redistest.StartCluster(t)
	ctx := context.Background()
	rdb, err := ConnectRedis(ctx, "redis://"+c.Nodes[0].Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	ns := redistest.Namespace(t)
	for i := range 30 { // keys on every master
		k := fmt.Sprintf("%s:{%d}", ns, i)
		if err := rdb.Set(ctx, k, i, time.Minute).Err(); err != nil {
			t.Fatalf("SET %s through --redis %s: %v", k, c.Nodes[0].Addr, err)
		}
	}
}

// TestMalformedHostPortIsAUsageError: an address whose host:port does not
// parse (too many colons, a port out of range) is a usage error naming it,
// not a lookup of a host made of its pieces; a bracketed IPv6 address is
// read as one.
func TestMalformedHostPortIsAUsageError(t *testing.T) {
	for _, bad := range []string{"redis://h:1:2", "h:1:2", "redis://:secret@h:1:2/0", "redis://h:70000", "redis://h:0", "h:1:2,h:3"} {
		_, err := ConnectRedis(context.Background(), bad)
		if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "--redis") || strings.Contains(err.Error(), "secret") {
			t.Errorf("ConnectRedis(%q): %v (want a usage error naming --redis)", bad, err)
		}
	}
	if opt, err := ParseRedisURL("redis://[::1]:6380/0"); err != nil || opt.Addr != "[::1]:6380" {
		t.Errorf("an IPv6 address: %+v, %v", opt, err)
	}
}

// TestEmptyVariableNamesItself: a FENCEDQ_<FLAG> variable set but empty
// for a flag with a default (FENCEDQ_REDIS=, say, from an unset variable
// it was copied from) is a usage error naming the variable, not the flag
// it emptied; an empty one for a flag whose default is empty is taken.
func TestEmptyVariableNamesItself(t *testing.T) {
	for _, v := range []string{"FENCEDQ_REDIS", "FENCEDQ_NAMESPACE", "FENCEDQ_LOG_LEVEL"} {
		t.Run(v, func(t *testing.T) {
			t.Setenv(v, "")
			fs, _ := actionFlags("tool act")
			var stdout, stderr bytes.Buffer
			ran := false
			code := Run(context.Background(), fs, "Acts", func(context.Context, io.Writer) error { ran = true; return nil }, nil, &stdout, &stderr)
			if code != 2 || ran || !strings.Contains(stderr.String(), v+" is set but empty") {
				t.Errorf("code %d, ran %v, stderr %q (want 2 naming %s)", code, ran, stderr.String(), v)
			}
		})
	}
	t.Setenv("FENCEDQ_ACTOR", "")
	fs, got := actionFlags("tool act")
	var stdout, stderr bytes.Buffer
	code := Run(context.Background(), fs, "Acts", func(_ context.Context, out io.Writer) error {
		_, err := io.WriteString(out, got())
		return err
	}, nil, &stdout, &stderr)
	if code != 0 || !strings.Contains(stdout.String(), "actor= ") {
		t.Errorf("FENCEDQ_ACTOR empty: code %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
}

// dialLog keeps the lines the Redis client logs (its pool logs each
// connection it gave up on, with the attempts made).
type dialLog struct {
	mu    sync.Mutex
	lines []string
}

func (d *dialLog) Printf(_ context.Context, format string, v ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.lines = append(d.lines, fmt.Sprintf(format, v...))
}

func (d *dialLog) text() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return strings.Join(d.lines, "\n")
}

// TestOperatorClientDialsADeadMasterOnce: with a Cluster master killed,
// a read of a key it held, on ConnectRedisPartial's client, dials it once
// and gives it up (go-redis's default dials 5 times per try, 100 ms apart:
// the first read with a master down took about 7.5 s); the other masters'
// keys still read.
func TestOperatorClientDialsADeadMasterOnce(t *testing.T) {
	logs := &dialLog{}
	redis.SetLogger(logs)
	t.Cleanup(QuietRedis)
	cl := redistest.StartCluster(t)
	ctx := context.Background()
	_, master := cl.Degradable()
	rdb, err := ConnectRedisPartial(ctx, strings.Join(cl.Addrs(), ","))
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	victim := cl.Nodes[0]
	var lost, kept string
	for i := 0; lost == "" || kept == ""; i++ {
		k := fmt.Sprintf("k%d", i)
		if master(k) == victim.Addr {
			lost = k
		} else {
			kept = k
		}
	}
	victim.Kill()
	if err := rdb.Get(ctx, lost).Err(); err == nil || errors.Is(err, redis.Nil) || !strings.Contains(err.Error(), victim.Addr) {
		t.Fatalf("a key of the dead master: %v, want an error naming it", err)
	}
	if text := logs.text(); !strings.Contains(text, "after 1 attempts") || strings.Contains(text, "after 5 attempts") {
		t.Fatalf("the client's log:\n%s\nwant each dial of the dead master given up after 1 attempt", text)
	}
	if err := rdb.Get(ctx, kept).Err(); err != nil && !errors.Is(err, redis.Nil) {
		t.Fatalf("a key of a live master: %v", err)
	}
}
