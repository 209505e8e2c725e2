package main

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestFenceRedisErrorsNameTheFlagGiven: an address given to --fence-redis
// that cannot be used (malformed, refusing the password, naming no
// monitored master) is reported against --fence-redis, the flag given,
// never --redis, which the command was given right.
func TestFenceRedisErrorsNameTheFlagGiven(t *testing.T) {
	e := newOperatorEnv(t)
	id, _ := e.uncertain(jobs.OperationID("pay-9"))
	base := []string{"resolve", "--job", id, "--decision", "rerun", "--actor", "alice", "--note", "n"}
	locked := redistest.Start(t, redistest.Options{})
	if err := locked.Client().ConfigSet(context.Background(), "requirepass", "right").Err(); err != nil {
		t.Fatal(err)
	}
	bare := regexp.MustCompile(`--redis\b`)
	for _, addr := range []string{
		"redis://u:pa,ss@127.0.0.1:1",              // a comma split a password
		"redis://u:p@[::1",                         // not a URL
		"redis-sentinel://127.0.0.1:1",             // no master name
		"rediss://127.0.0.1:1,redis://127.0.0.1:2", // mixes TLS and not
		"redis://:wrong@" + locked.Addr,            // the password refused
	} {
		code, out, errOut := e.cli(append(slices.Clone(base), "--fence-redis", addr)...)
		if code == 0 || !strings.Contains(errOut, "--fence-redis") || bare.MatchString(errOut) || strings.Contains(out+errOut, "wrong") {
			t.Errorf("--fence-redis %q: code %d, stderr %q; want it named --fence-redis, never --redis, no password", addr, code, errOut)
		}
		if s := e.state(id); s != jobs.Uncertain {
			t.Fatalf("after --fence-redis %q the job is %s, want it left uncertain", addr, s)
		}
	}
}
