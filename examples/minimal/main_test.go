package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// runMainEnv makes the test binary run the example's main instead of the
// tests, so a test can start it as a process and signal it.
const runMainEnv = "FENCEDQ_MINIMAL_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestSIGTERMStopsThePoolGracefully: docker stop, Kubernetes and systemd
// stop a process with SIGTERM. The example (the program a new user copies)
// must shut its pool down gracefully on it, as on Ctrl-C, and exit 0:
// killed by the signal instead, a job its pool had claimed would stay
// running until its lease lapsed, and then wait in uncertain and review
// for an operator (its kind cannot be reconciled).
func TestSIGTERMStopsThePoolGracefully(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	rdb := srv.Client()
	ctx := context.Background()
	client := jobs.NewClient(rdb, jobs.Config{Namespace: "minimal"})
	// The queue paused, the example's job waits, and so does the example.
	if _, err := client.Pause(ctx, jobs.DefaultQueue, "test", "hold the example's job"); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), runMainEnv+"=1", "REDIS_ADDR="+srv.Addr)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	in := client.Inspector()
	redistest.AwaitWithin(t, rdb, "minimal", "the example's pool running and its job enqueued", time.Minute, func() bool {
		pools, err := in.Pools(ctx)
		if err != nil || len(pools) != 1 {
			return false
		}
		_, err = in.FindByOperation(ctx, "welcome:ada")
		return err == nil
	})
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("after SIGTERM the example exited with %v, want 0 after a graceful shutdown; output:\n%s", err, out.String())
		}
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		t.Fatalf("the example did not stop within a minute of SIGTERM; output:\n%s", out.String())
	}
	// A graceful stop removes the pool's heartbeat at once.
	if pools, err := in.Pools(ctx); err != nil || len(pools) != 0 {
		t.Fatalf("after the example stopped the live pools are %v (%v), want none", pools, err)
	}
}

// TestRedisNotThere: a new user's first run with no Redis at REDIS_ADDR
// fails (exit 1) with a message naming the address and what to check, not
// with an enqueue whose outcome is "unknown".
func TestRedisNotThere(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	var out bytes.Buffer
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), runMainEnv+"=1", "REDIS_ADDR="+addr)
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	if exit := (*exec.ExitError)(nil); !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("exit: %v, want 1; output:\n%s", err, out.String())
	}
	if want := "cannot reach Redis at " + addr + " (is it running? REDIS_ADDR sets the address)"; !strings.Contains(out.String(), want) || strings.Contains(out.String(), "unknown") {
		t.Fatalf("output:\n%s\nwant it to say %q", out.String(), want)
	}
}
