package lease_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/syncbuf"
	"github.com/fencedq/fencedq/lease"
)

// The Manager's fencing epoch logs go to Config.Logger, not to
// slog.Default(): the epoch learned first (debug) and a new primary's
// epoch after a restart without persistence (info).
func TestEpochLogsGoToTheConfiguredLogger(t *testing.T) {
	ctx := context.Background()
	var given, def syncbuf.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&def, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() { slog.SetDefault(prev) })

	srv := redistest.Start(t, redistest.Options{})
	c := srv.Client()
	ns := redistest.Namespace(t)
	m := lease.NewManager(c, lease.Config{Namespace: ns,
		Logger: slog.New(slog.NewTextHandler(&given, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if _, err := m.Acquire(ctx, "r", "a", time.Minute); err != nil {
		t.Fatal(err)
	}
	srv.Restart() // a new replication id: a new primary to the tracker
	if _, err := m.Acquire(ctx, "r", "b", time.Minute); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"msg=\"fencing epoch\"", "msg=\"fencing epoch: new primary\""} {
		if !strings.Contains(given.String(), want) || !strings.Contains(given.String(), ns) {
			t.Errorf("the configured logger lacks %s for namespace %s; it got:\n%s", want, ns, given.String())
		}
	}
	if strings.Contains(def.String(), ns) {
		t.Errorf("slog.Default() got the manager's logs:\n%s", def.String())
	}
}
