package worker_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// TestMain doubles as a worker process for the crash tests: with
// FENCEDQ_HELPER set, the test binary runs a pool instead of the tests.
func TestMain(m *testing.M) {
	if mode := os.Getenv("FENCEDQ_HELPER"); mode != "" {
		runHelper(mode)
		return
	}
	os.Exit(m.Run())
}

// effectArgs is a job whose side effect is recorded in a Redis hash
// (operation id -> token), standing in for an external system.
type effectArgs struct {
	Name string `json:"name"`
}

func (effectArgs) Kind() string { return "effect" }

// applyEffect records an operation's effect once and counts applications.
var applyEffect = redis.NewScript(`
if redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) == 1 then
  redis.call('HINCRBY', KEYS[2], ARGV[1], 1)
end
return 1`)

// effectWorker applies the effect; mode makes a helper process block
// before or after it so the test can SIGKILL it there.
type effectWorker struct {
	rdb  redis.UniversalClient
	ns   string
	mode string
}

func (w *effectWorker) Work(ctx context.Context, j *jobs.Job[effectArgs]) error {
	w.rdb.RPush(ctx, w.ns+":test:started", fmt.Sprintf("%s/%d", j.ID, j.Token))
	if w.mode == "block-before-effect" {
		select {}
	}
	// The effect and its count in one script, so a client-side retry of a
	// call whose reply was lost cannot count the effect twice. A failed call
	// may have been applied before the connection broke: outcome unknown.
	if err := applyEffect.Run(ctx, w.rdb, []string{w.ns + ":test:{fx}:effects", w.ns + ":test:{fx}:applies"},
		j.OperationID, j.Token.String()).Err(); err != nil {
		return jobs.Unknown(err)
	}
	if w.mode == "slow" {
		time.Sleep(30 * time.Millisecond) // a slow handler, so a restart finds attempts in flight
	}
	if w.mode == "block-after-effect" {
		w.rdb.RPush(ctx, w.ns+":test:effect-done", j.ID)
		select {}
	}
	return nil
}

// Reconcile looks the operation id up in the effect hash.
func (w *effectWorker) Reconcile(ctx context.Context, j *jobs.Job[effectArgs]) (jobs.Verdict, error) {
	n, err := w.rdb.HExists(ctx, w.ns+":test:{fx}:effects", j.OperationID).Result()
	if err != nil {
		return jobs.CannotTell, err
	}
	if n {
		return jobs.Applied, nil
	}
	return jobs.NotApplied, nil
}

func runHelper(mode string) {
	var rdb redis.UniversalClient = redis.NewClient(&redis.Options{Addr: os.Getenv("FENCEDQ_REDIS")})
	if addrs := os.Getenv("FENCEDQ_CLUSTER"); addrs != "" {
		rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(addrs, ",")})
	}
	ns := os.Getenv("FENCEDQ_NS")
	// A 3 s lease: a helper on a loaded machine (a race-detector binary
	// beside other tests) may wait a second for a claim's reply, and a
	// 1 s lease would then end before its handler starts.
	p, err := worker.NewPool(rdb, worker.Config{
		Jobs: jobs.Config{Namespace: ns}, Concurrency: 2, LeaseTTL: 3 * time.Second, WorkerID: "helper-" + mode,
		Logger:      slog.New(slog.NewTextHandler(os.Stderr, nil)),
		Maintenance: worker.MaintenanceConfig{Disabled: true},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	_ = worker.Register(p, jobs.Worker[effectArgs](&effectWorker{rdb: rdb, ns: ns, mode: mode}))
	_ = worker.Register(p, jobs.Worker[limitArgs](&limitWorker{rdb: rdb, ns: ns, proc: mode}))
	_ = worker.Register(p, jobs.Worker[groupArgs](&groupLogWorker{rdb: rdb, ns: ns, proc: mode}))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	_ = p.Run(ctx)
}

// startHelper runs a worker process in mode against addr/ns.
// env adds variables (FENCEDQ_CLUSTER: a cluster's addresses, comma-separated).
func startHelper(t *testing.T, mode, addr, ns string, env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "FENCEDQ_HELPER="+mode, "FENCEDQ_REDIS="+addr, "FENCEDQ_NS="+ns)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
	return cmd
}

// fakeService is an external HTTP service that applies an effect, then
// answers too late; it can be asked by operation id what it applied.
type fakeService struct {
	applied map[string]int
	delay   time.Duration
	mu      chan struct{}
}

func newFakeService(delay time.Duration) *fakeService {
	f := &fakeService{applied: map[string]int{}, delay: delay, mu: make(chan struct{}, 1)}
	f.mu <- struct{}{}
	return f
}

func (f *fakeService) count(op string) int {
	<-f.mu
	defer func() { f.mu <- struct{}{} }()
	return f.applied[op]
}

func (f *fakeService) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	op := strings.TrimPrefix(r.URL.Path, "/effects/")
	switch r.Method {
	case http.MethodPost:
		<-f.mu
		f.applied[op]++
		f.mu <- struct{}{}
		time.Sleep(f.delay) // accepted, but the answer comes too late
		w.WriteHeader(http.StatusCreated)
	case http.MethodGet:
		if f.count(op) > 0 {
			w.WriteHeader(http.StatusOK)
			return
		}
		w.WriteHeader(http.StatusNotFound)
	}
}
