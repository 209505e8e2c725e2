// Command minimal is the smallest fencedq application: one job kind, a
// worker pool and an enqueue, against the Redis at REDIS_ADDR (default
// 127.0.0.1:6379; one not there exits 1, naming it). The README's "Use it
// in your module" shows it.
// Ctrl-C (SIGINT) or SIGTERM, which docker stop, Kubernetes and systemd
// send, shuts the pool down gracefully; a second one ends the process at
// once.
//
//	go run ./examples/minimal
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// Welcome is a job kind: its value is the job's args, stored as JSON.
type Welcome struct {
	Email string `json:"email"`
}

// Kind names the job kind.
func (Welcome) Kind() string { return "welcome" }

func main() {
	// SIGTERM too: a process killed by it would leave the jobs its pool
	// claimed running until their leases lapse.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// After the first signal, stop restores the signals' default action: a
	// second Ctrl-C ends a shutdown that takes too long.
	context.AfterFunc(ctx, stop)
	addr := os.Getenv("REDIS_ADDR")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	// A Redis that is not there is said here, with what to check, rather
	// than by the enqueue below (whose outcome would read "unknown").
	if err := rdb.Ping(ctx).Err(); err != nil {
		log.Fatalf("cannot reach Redis at %s (is it running? REDIS_ADDR sets the address): %v", addr, err)
	}

	cfg := jobs.Config{Namespace: "minimal"} // the same for the pool and the client
	pool, err := worker.NewPool(rdb, worker.Config{Jobs: cfg})
	if err != nil {
		log.Fatal(err)
	}
	done := make(chan struct{})
	err = worker.Register(pool, jobs.WorkFunc[Welcome](func(ctx context.Context, j *jobs.Job[Welcome]) error {
		// j.Token fences this attempt's side effects (see package fence).
		fmt.Printf("welcome %s (attempt %d, token %d)\n", j.Args.Email, j.Attempt, j.Token)
		close(done)
		return nil
	}))
	if err != nil {
		log.Fatal(err)
	}
	runCtx, stopPool := context.WithCancel(ctx)
	stopped := make(chan error, 1)
	go func() { stopped <- pool.Run(runCtx) }()

	client := jobs.NewClient(rdb, cfg)
	res, err := client.Enqueue(ctx, Welcome{Email: "ada@example.com"}, jobs.OperationID("welcome:ada"))
	switch {
	case err != nil:
		log.Fatal(err)
	case res.Deduplicated: // a second run: the operation id is known, nothing new was written
		fmt.Println("already enqueued as job", res.JobID)
	default:
		select {
		case <-done:
		case <-ctx.Done():
		case err := <-stopped: // the pool ended before the job ran
			if err != nil {
				log.Fatal(err)
			}
			return
		}
	}
	stopPool()
	switch err := <-stopped; {
	case errors.Is(err, worker.ErrUnsettled):
		// A handler ignored its cancelled context: its job was recorded
		// uncertain, and the maintenance leader resolves it.
		log.Print(err)
	case err != nil:
		log.Fatal(err)
	}
}
