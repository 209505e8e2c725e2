package cli

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/testsignal"
)

// signalChildEnv makes the test binary run signalChild instead of the
// tests: a command whose graceful shutdown never ends.
const signalChildEnv = "FENCEDQ_CLI_SIGNAL_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(signalChildEnv) == "1" {
		signalChild()
		return
	}
	os.Exit(m.Run())
}

func signalChild() {
	ctx, stop := SignalContext("child", os.Stderr)
	defer stop()
	fmt.Println("ready")
	<-ctx.Done()
	fmt.Println("stopping")
	time.Sleep(time.Hour) // a shutdown that outlasts the test
}

// TestSecondSignalStopsAtOnce: the first SIGINT or SIGTERM ends the
// context for a graceful shutdown (SIGINT with a hint on stderr); a second
// one ends the process at once, as the signal's default action does.
func TestSecondSignalStopsAtOnce(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), signalChildEnv+"=1")
			var stderr strings.Builder
			cmd.Stderr = &stderr
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cmd.Process.Kill() })
			lines := make(chan string, 2)
			go func() {
				sc := bufio.NewScanner(stdout)
				for sc.Scan() {
					lines <- sc.Text()
				}
				close(lines)
			}()
			await := func(want string) {
				t.Helper()
				select {
				case line := <-lines:
					if line != want {
						t.Fatalf("the child wrote %q, want %q; stderr %q", line, want, stderr.String())
					}
				case <-time.After(testsignal.Scale(time.Minute)):
					t.Fatalf("the child did not write %q", want)
				}
			}
			await("ready")
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			await("stopping")
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() {
				for range lines { // drain to the end before Wait
				}
				exited <- cmd.Wait()
			}()
			select {
			case err = <-exited:
			case <-time.After(testsignal.Scale(time.Minute)):
				t.Fatal("the second signal did not end the process")
			}
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				t.Fatalf("exit: %v, want the end by %v", err, sig)
			}
			if ws, ok := exit.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != sig {
				t.Fatalf("exit: %v, want the end by %v", err, sig)
			}
			hint := "child: stopping gracefully; press Ctrl-C again to stop at once\n"
			if want := map[syscall.Signal]string{syscall.SIGINT: hint}[sig]; stderr.String() != want {
				t.Fatalf("stderr %q, want %q", stderr.String(), want)
			}
		})
	}
}

// TestSignalContextStop: stop ends the context without a signal, and says
// nothing.
func TestSignalContextStop(t *testing.T) {
	var out strings.Builder
	ctx, stop := SignalContext("cmd", &out)
	stop()
	stop()
	<-ctx.Done()
	if out.Len() != 0 {
		t.Fatalf("stop wrote %q", out.String())
	}
}
