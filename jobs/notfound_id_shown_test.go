package jobs_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestNotFoundQuotesTheIDCut: a job or operation id no job has, of 10 KB
// or holding escape sequences and line feeds, is named in the ErrNotFound
// of every read and operator action cut to 64 bytes and quoted, never
// echoed in full or as given into a log or a terminal.
func TestNotFoundQuotesTheIDCut(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	insp := c.Inspector()
	if _, err := c.SetPartitions(ctx, "orders", 2, "test", ""); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{strings.Repeat("x", 10<<10), "\x1b]0;pwned\a\x1b[2J\nforged log line"} {
		for _, q := range []string{jobs.DefaultQueue, "orders"} {
			calls := map[string]func() error{
				"Get":     func() error { _, err := insp.Get(ctx, q, id); return err },
				"History": func() error { _, err := insp.History(ctx, q, id); return err },
				"Output":  func() error { var v any; return c.Output(ctx, q, id, &v) },
				"Cancel":  func() error { _, err := c.Cancel(ctx, q, id, "alice", ""); return err },
				"RunNow":  func() error { _, err := c.RunNow(ctx, q, id, "alice", ""); return err },
				"Resolve": func() error {
					_, err := c.Resolve(ctx, q, id, jobs.DecideDead, "alice", "")
					return err
				},
				"Find":              func() error { _, err := insp.Find(ctx, id); return err },
				"FindByOperation":   func() error { _, err := insp.FindByOperation(ctx, id); return err },
				"FindByOperationIn": func() error { _, err := insp.FindByOperationIn(ctx, q, id); return err },
			}
			for name, call := range calls {
				err := call()
				if !errors.Is(err, jobs.ErrNotFound) && !errors.Is(err, jobs.ErrInvalid) {
					t.Fatalf("%s(%s): %v, want ErrNotFound", name, q, err)
				}
				if msg := err.Error(); len(msg) > 200 || strings.ContainsAny(msg, "\x1b\a\n") {
					t.Errorf("%s(%s): error of %d bytes %q: want the id cut and quoted", name, q, len(msg), msg[:min(len(msg), 120)])
				}
			}
		}
	}
}
