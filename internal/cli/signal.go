package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// SignalContext returns a context that ends on the first SIGINT (Ctrl-C) or
// SIGTERM (what docker stop, Kubernetes and systemd send), for a graceful
// shutdown. The first signal also restores both signals' default action,
// so a second one ends the process at once, as a user pressing Ctrl-C
// again expects; on SIGINT it says so on stderr, prefixed with name.
// stop releases the signals and ends the context.
func SignalContext(name string, stderr io.Writer) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-ch:
			signal.Stop(ch)
			if s == os.Interrupt {
				fmt.Fprintf(stderr, "%s: stopping gracefully; press Ctrl-C again to stop at once\n", name)
			}
			cancel()
		case <-done:
		}
	}()
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			signal.Stop(ch)
			close(done)
			cancel()
		})
	}
}
