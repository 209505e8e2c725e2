package jobs_test

import (
	"context"
	"errors"
	"path"
	"strconv"
	"strings"
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

// A refused queue reference names what the caller gave ("#", not the
// empty queue before it), and a refused note is quoted cut to 64 bytes as
// other refused names are, not in full; neither action writes anything.
func TestRefusedQueueRefAndNoteQuotedAsGiven(t *testing.T) {
	rdb, ns := redistest.New(t)
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	ctx := context.Background()
	for _, q := range []string{"#", "#1", "..#1", "a b#1"} {
		_, err := c.Pause(ctx, q, "alice", "")
		if !errors.Is(err, jobs.ErrInvalid) || !strings.Contains(err.Error(), strconv.Quote(q)) {
			t.Errorf("pause %q: %v, want ErrInvalid naming %q", q, err, q)
		}
		if _, err := c.Inspector().Counts(ctx, q); !errors.Is(err, jobs.ErrInvalid) || !strings.Contains(err.Error(), strconv.Quote(q)) {
			t.Errorf("counts of %q: %v, want ErrInvalid naming %q", q, err, q)
		}
	}
	note := strings.Repeat("secret ", 280) + "\x1b[2J"
	_, err := c.Pause(ctx, "default", "alice", note)
	if !errors.Is(err, jobs.ErrInvalid) || len(err.Error()) > 200 || strings.Count(err.Error(), "secret") > 10 {
		t.Fatalf("pause with a bad note: error of %d bytes (%v), want ErrInvalid with the note cut", len(err.Error()), err)
	}
	if n, err := rdb.Keys(ctx, ns+"*").Result(); err != nil || len(n) != 0 {
		t.Fatalf("keys written by refused actions: %v (%v)", n, err)
	}
}
