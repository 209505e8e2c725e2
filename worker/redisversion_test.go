package worker_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// oldVersion makes the server's INFO say it is version v: a Redis release
// the harness cannot start, for the version check only.
type oldVersion struct{ v string }

func (oldVersion) DialHook(next redis.DialHook) redis.DialHook { return next }
func (oldVersion) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (o oldVersion) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	re := regexp.MustCompile(`redis_version:[^\r\n]*`)
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if c, ok := cmd.(*redis.StringCmd); ok && cmd.Name() == "info" && err == nil {
			c.SetVal(re.ReplaceAllString(c.Val(), "redis_version:"+o.v))
		}
		return err
	}
}

type versionJob struct{}

func (versionJob) Kind() string { return "version-check" }

// TestRunRefusesARedisOlderThanTheLedgerNeeds: the ledger's reads use
// ZRANGE ... BYSCORE LIMIT (Redis 6.2); on Redis 6.0 a pool started, and
// its maintenance leader's resolver then failed every pass with "ERR
// syntax error", leaving uncertain jobs unresolved for ever. Run now
// refuses such a server at once, naming its version and the one needed,
// with ErrRedisUnusable; a 6.2 or newer server starts.
func TestRunRefusesARedisOlderThanTheLedgerNeeds(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	for i, c := range []struct {
		version string
		starts  bool
	}{{"6.0.16", false}, {"5.0.14", false}, {"6.2.0", true}, {"7.4.2", true}} {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
		rdb.AddHook(oldVersion{c.version})
		t.Cleanup(func() { _ = rdb.Close() })
		cfg := jobs.Config{Namespace: fmt.Sprintf("%s-%d", redistest.Namespace(t), i)}
		p, err := worker.NewPool(rdb, worker.Config{Jobs: cfg})
		if err != nil {
			t.Fatal(err)
		}
		// A pool that starts runs a job, which ends it.
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		if err := worker.Register(p, jobs.WorkFunc[versionJob](func(context.Context, *jobs.Job[versionJob]) error {
			cancel()
			return nil
		})); err != nil {
			t.Fatal(err)
		}
		if _, err := jobs.NewClient(rdb, cfg).Enqueue(context.Background(), versionJob{}); err != nil {
			t.Fatal(err)
		}
		err = p.Run(ctx)
		if c.starts {
			if err != nil {
				t.Errorf("Redis %s: Run: %v", c.version, err)
			}
			continue
		}
		if !errors.Is(err, worker.ErrRedisUnusable) || err == nil ||
			!strings.Contains(err.Error(), "Redis at "+srv.Addr) || !strings.Contains(err.Error(), c.version) ||
			!strings.Contains(err.Error(), "6.2 or later") {
			t.Errorf("Redis %s: Run: %v; want it to name the server's version and the one needed", c.version, err)
		}
	}
}
