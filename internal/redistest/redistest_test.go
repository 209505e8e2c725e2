package redistest_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/redistest"
)

func TestPauseResumeKillRestart(t *testing.T) {
	ctx := context.Background()
	s := redistest.Start(t, redistest.Options{AOF: true})
	c := s.Client()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	s.Pause()
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	if err := c.Ping(short).Err(); err == nil {
		t.Fatal("paused server answered")
	}
	cancel()
	s.Resume()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("resumed server: %v", err)
	}
	s.Kill()
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("killed server answered")
	}
	s.Restart()
	if v := c.Get(ctx, "k").Val(); v != "v" {
		t.Fatalf("AOF restart lost the key: %q", v)
	}

	plain := redistest.Start(t, redistest.Options{})
	pc := plain.Client()
	pc.Set(ctx, "k", "v", 0)
	plain.Restart()
	if n := pc.DBSize(ctx).Val(); n != 0 {
		t.Fatalf("restart without persistence kept %d keys", n)
	}
}

func TestCluster(t *testing.T) {
	ctx := context.Background()
	c := redistest.StartCluster(t)
	cc := c.Client()
	for _, k := range []string{"a", "b", "c", "d", "e", "f"} {
		if err := cc.Set(ctx, k, k, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	n, err := redistest.CountKeys(ctx, cc)
	if err != nil || n != 6 {
		t.Fatalf("cluster holds %d keys (%v), want 6", n, err)
	}
	used := 0
	for _, node := range c.Nodes {
		if node.Client().DBSize(ctx).Val() > 0 {
			used++
		}
	}
	if used < 2 {
		t.Fatalf("keys landed on %d masters; slots are not spread", used)
	}
}

func TestNewUsesExistingServerWithNamespace(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ctx := context.Background()
	t.Setenv("REDIS_ADDR", srv.Addr)
	other := srv.Client()
	other.Set(ctx, "someone-else", "keep", 0)
	var ns string
	t.Run("inner", func(t *testing.T) {
		c, n := redistest.New(t)
		ns = n
		c.Set(ctx, ns+":x", "1", 0)
		c.Set(ctx, "fq:{"+ns+"}:y", "1", 0)
	})
	if n := other.DBSize(ctx).Val(); n != 1 {
		t.Fatalf("after cleanup %d keys remain, want only someone-else's", n)
	}
	if other.Get(ctx, "someone-else").Val() != "keep" || ns == "" {
		t.Fatal("cleanup touched a key outside the namespace")
	}
	_ = os.Unsetenv("REDIS_ADDR")
}
