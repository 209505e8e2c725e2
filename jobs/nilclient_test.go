package jobs_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/jobs"
)

// TestNilRedisClientIsRefusedClearly: a client or inspector built over a
// nil Redis client (a nil interface, or a typed nil pointer such as an
// unset *redis.Client field) refuses every call with an error matching
// jobs.ErrInvalid that names the mistake, instead of panicking on first
// use.
func TestNilRedisClientIsRefusedClearly(t *testing.T) {
	ctx := context.Background()
	var unset *redis.Client
	for name, rdb := range map[string]redis.UniversalClient{"nil": nil, "typed nil": unset} {
		c := jobs.NewClient(rdb, jobs.Config{})
		in := jobs.NewInspector(rdb, jobs.Config{})
		calls := map[string]func() error{
			"Enqueue": func() error { _, err := c.Enqueue(ctx, rangeArgs{N: 1}); return err },
			"EnqueueRaw": func() error {
				_, err := c.EnqueueRaw(ctx, "range", []byte(`{}`), jobs.Unchecked())
				return err
			},
			"EnqueueMany":         func() error { _, err := c.EnqueueMany(ctx, []jobs.Params{{Args: rangeArgs{}}}); return err },
			"Cancel":              func() error { _, err := c.Cancel(ctx, "default", "id", "ada", ""); return err },
			"Pause":               func() error { _, err := c.Pause(ctx, "default", "ada", ""); return err },
			"Output":              func() error { var v any; return c.Output(ctx, "default", "id", &v) },
			"SetPartitions":       func() error { _, err := c.SetPartitions(ctx, "default", 2, "test", ""); return err },
			"Resubmit":            func() error { _, err := c.Resubmit(ctx); return err },
			"Inspector().Queues":  func() error { _, err := c.Inspector().Queues(ctx); return err },
			"NewInspector.Queues": func() error { _, err := in.Queues(ctx); return err },
		}
		for call, f := range calls {
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Errorf("%s client: %s panicked: %v", name, call, r)
					}
				}()
				err := f()
				if !errors.Is(err, jobs.ErrInvalid) || !strings.Contains(err.Error(), "nil") || !strings.Contains(err.Error(), "Redis client") && !strings.Contains(err.Error(), "redis.Client") {
					t.Errorf("%s client: %s: %v, want ErrInvalid naming the nil Redis client", name, call, err)
				}
			}()
		}
	}
}
