package jobs_test

import (
	"context"
	"errors"
	"path"
	"testing"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestQueueNamesThatPathCleanToAnotherAreRefused: a queue name that a URL
// or file path would clean to another name ("." and "..") is refused by
// the validators, by an enqueue (nothing written) and by the read API;
// other names of dots are kept as they are.
func TestQueueNamesThatPathCleanToAnotherAreRefused(t *testing.T) {
	rdb, ns := redistest.New(t)
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	ctx := context.Background()
	for _, q := range []string{".", "..", "...", ".a", "a.", "a..b", "-", ":", "_."} {
		url := "/api/queues/" + q + "/jobs"
		cleaned := path.Clean(url) != url
		err := jobs.ValidateQueue(q)
		if cleaned != errors.Is(err, jobs.ErrInvalid) {
			t.Errorf("ValidateQueue(%q) = %v (%s cleans to %s)", q, err, url, path.Clean(url))
		}
		if !cleaned {
			continue
		}
		if err := jobs.ValidateQueueRef(q + "#1"); !errors.Is(err, jobs.ErrInvalid) {
			t.Errorf("ValidateQueueRef(%q) = %v, want ErrInvalid", q+"#1", err)
		}
		if _, err := c.Enqueue(ctx, noteArgs{}, jobs.Queue(q)); !errors.Is(err, jobs.ErrInvalid) {
			t.Errorf("enqueue into %q: %v, want ErrInvalid", q, err)
		}
		if _, err := c.Inspector().Counts(ctx, q); !errors.Is(err, jobs.ErrInvalid) {
			t.Errorf("counts of %q: %v, want ErrInvalid", q, err)
		}
	}
	if keys, err := rdb.Keys(ctx, ns+":*").Result(); err != nil || len(keys) != 0 {
		t.Errorf("refused names left keys behind: %v %v", keys, err)
	}
}
