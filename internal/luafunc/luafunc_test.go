package luafunc_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/luafunc"
	"github.com/fencedq/fencedq/internal/redistest"
)

// newTwice returns a library of one function, and its script: twice
// ARGV[1] (a helper defined once per load) plus INCR KEYS[1].
func newTwice(name string) (*luafunc.Library, *luafunc.Script) {
	lib := luafunc.NewLibrary(func() (string, string) {
		return name, "#!lua name=" + name + "\n" +
			"local function twice(x) return 2 * tonumber(x) end\n" +
			"redis.register_function('" + name + "_twice', function(keys, args) return twice(args[1]) + redis.call('INCR', keys[1]) end)\n"
	})
	s := luafunc.NewScript(lib, "twice", "local function twice(x) return 2 * tonumber(x) end\n"+
		"return twice(ARGV[1]) + redis.call('INCR', KEYS[1])")
	return lib, s
}

// runAll calls s once per value of want with argument x, each on key n,
// and fails unless each call returns its value.
func runAll(t *testing.T, s *luafunc.Script, rdb *redis.Client, x int, want ...int64) {
	t.Helper()
	for i, w := range want {
		got, err := s.Run(context.Background(), rdb, []string{"n"}, x).Int64()
		if err != nil || got != w {
			t.Fatalf("call %d: %d, %v; want %d", i, got, err, w)
		}
	}
}

// calls returns how many times the server ran cmd (commandstats), and how
// many of those failed.
func calls(t *testing.T, rdb *redis.Client, cmd string) (n, failed int) {
	t.Helper()
	s, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(s, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || k != "cmdstat_"+cmd {
			continue
		}
		for _, f := range strings.Split(v, ",") {
			name, val, _ := strings.Cut(f, "=")
			x, _ := strconv.Atoi(val)
			switch name {
			case "calls":
				n = x
			case "failed_calls":
				failed = x
			}
		}
	}
	return n, failed
}

func TestRunLoadsTheLibraryOnceAndCallsByName(t *testing.T) {
	rdb := redistest.Start(t, redistest.Options{}).Client()
	lib, s := newTwice("fqtest_once")
	runAll(t, s, rdb, 3, 7, 8, 9)
	if !lib.Available() {
		t.Fatal("the library is marked unavailable on a server with functions")
	}
	if n, _ := calls(t, rdb, "function|load"); n != 1 {
		t.Fatalf("FUNCTION LOAD ran %d times, want once", n)
	}
	if n, failed := calls(t, rdb, "fcall"); n != 4 || failed != 1 {
		t.Fatalf("FCALL ran %d times (%d failed), want 4 with 1 failed (the first, before the load)", n, failed)
	}
	if n, _ := calls(t, rdb, "eval"); n != 0 {
		t.Fatalf("EVAL ran %d times on a server with functions", n)
	}
}

func TestRestartedServerGetsTheLibraryAgain(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Options{})
	rdb := srv.Client()
	_, s := newTwice("fqtest_restart")
	if err := s.Run(ctx, rdb, []string{"n"}, 1).Err(); err != nil {
		t.Fatal(err)
	}
	srv.Restart() // no persistence: the library is gone
	got, err := s.Run(ctx, rdb, []string{"n"}, 1).Int64()
	if err != nil || got != 3 {
		t.Fatalf("after the restart: %d, %v; want 3 (the counter started again)", got, err)
	}
	if n, _ := calls(t, rdb, "function|load"); n != 1 {
		t.Fatalf("FUNCTION LOAD ran %d times on the restarted server, want once", n)
	}
}

func TestServerWithoutFunctionsRunsPlainScripts(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t, redistest.Options{NoFunctions: true}).Client()
	lib, s := newTwice("fqtest_plain")
	runAll(t, s, rdb, 2, 5, 6)
	if lib.Available() {
		t.Fatal("the library is still marked available on a server without functions")
	}
	// From now on by SHA, without trying FCALL.
	before, _ := calls(t, rdb, "evalsha")
	if err := s.EvalSha(ctx, rdb, []string{"n"}, 2).Err(); err != nil {
		t.Fatal(err)
	}
	if after, _ := calls(t, rdb, "evalsha"); after != before+1 {
		t.Fatalf("EVALSHA ran %d times for one call, want 1", after-before)
	}
}

func TestRefusedLibraryIsLoggedOnceAndNotRetried(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t, redistest.Options{}).Client()
	const name = "fqtest_refused"
	lib := luafunc.NewLibrary(func() (string, string) {
		return name, "#!lua name=" + name + "\nthis is not lua\n"
	})
	var logs bytes.Buffer
	lib.SetLogger(slog.New(slog.NewTextHandler(&logs, nil)))
	s := luafunc.NewScript(lib, "twice", "return 2 * tonumber(ARGV[1]) + redis.call('INCR', KEYS[1])")
	runAll(t, s, rdb, 1, 3, 4, 5, 6)
	if lib.Available() {
		t.Fatal("a library the server refused is still marked available")
	}
	if err := lib.Rejected(); !errors.Is(err, luafunc.ErrRejected) || !strings.Contains(err.Error(), "compiling") {
		t.Fatalf("Rejected() = %v, want ErrRejected with the server's reason", err)
	}
	if n, _ := calls(t, rdb, "function|load"); n != 1 {
		t.Fatalf("FUNCTION LOAD ran %d times for 4 calls, want once (a refusal is not retried)", n)
	}
	if n, _ := calls(t, rdb, "fcall"); n != 1 {
		t.Fatalf("FCALL ran %d times, want once (the first call, before the refusal)", n)
	}
	if got := strings.Count(logs.String(), "level=ERROR"); got != 1 || !strings.Contains(logs.String(), name) {
		t.Fatalf("want one error-level line naming the library, got:\n%s", logs.String())
	}
	// A passing condition is not a refusal: a replica's READONLY leaves the
	// library to load later.
	replica := luafunc.NewLibrary(func() (string, string) { return "fqtest_ro", "#!lua name=fqtest_ro\n" })
	ro := redistest.Start(t, redistest.Options{}).Client()
	if err := ro.ConfigSet(ctx, "replica-read-only", "yes").Err(); err != nil {
		t.Fatal(err)
	}
	if err := ro.ReplicaOf(ctx, "127.0.0.1", "1").Err(); err != nil {
		t.Fatal(err)
	}
	defer ro.ReplicaOf(ctx, "NO", "ONE")
	if err := replica.Load(ctx, ro); err == nil || errors.Is(err, luafunc.ErrRejected) || !replica.Available() {
		t.Fatalf("a load refused by a read-only replica: %v, available %v; want a passing error", err, replica.Available())
	}
}

func TestIsMissing(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t, redistest.Options{}).Client()
	missing := []error{
		rdb.EvalSha(ctx, strings.Repeat("0", 40), nil).Err(),
		rdb.FCall(ctx, "fqtest_nothing", nil).Err(),
		rdb.Do(ctx, "NOSUCHCOMMAND").Err(),
	}
	for _, err := range missing {
		if !luafunc.IsMissing(err) {
			t.Errorf("IsMissing(%v) = false, want true", err)
		}
	}
	for _, err := range []error{
		nil,
		errors.New("NOSCRIPT not a server's reply"),
		rdb.Eval(ctx, "return redis.error_reply('FENCEDQ stale')", nil).Err(),
		rdb.Eval(ctx, "return 1 + nil", nil).Err(),
	} {
		if luafunc.IsMissing(err) {
			t.Errorf("IsMissing(%v) = true, want false", err)
		}
	}
}

// A user whose ACLs forbid FCALL and FUNCTION runs the scripts as plain
// scripts.
func TestUserWithoutFunctionPermissionsRunsPlainScripts(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Options{})
	admin := srv.Client()
	if err := admin.Do(ctx, "ACL", "SETUSER", "plain", "on", "nopass", "~*", "&*", "+@all", "-fcall", "-function").Err(); err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, Username: "plain", Password: "any"}) // nopass: any password
	t.Cleanup(func() { _ = rdb.Close() })
	lib, s := newTwice("fqtest_acl")
	runAll(t, s, rdb, 1, 3, 4)
	if lib.Available() {
		t.Fatal("the library is still marked available for a user who may not call functions")
	}
}

// TestIsMissingOfNoErrorAllocatesNothing: every script call's result goes
// through IsMissing; a success (no error) costs it no allocation.
func TestIsMissingOfNoErrorAllocatesNothing(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() {
		if luafunc.IsMissing(nil) {
			t.Fatal("no error reads as missing")
		}
	}); n != 0 {
		t.Fatalf("%v allocations per success, want 0", n)
	}
}
