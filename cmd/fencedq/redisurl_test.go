package main

import (
	"context"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/internal/redistest"
)

// TestPasswordWithAnUnencodedAt: an '@' typed as is in --redis's password
// is read as go-redis reads redis:// URLs (the last '@' ends the
// credentials): the command connects; a wrong password is refused by Redis
// without the command showing it.
func TestPasswordWithAnUnencodedAt(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	if err := srv.Client().ConfigSet(context.Background(), "requirepass", "p@ss@word").Err(); err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{"redis://:p@ss@word@" + srv.Addr, "redis://default:p@ss@word@" + srv.Addr + "/0", ":p@ss@word@" + srv.Addr} {
		if code, out, errOut := runCLI(t, "queues", "--redis", addr); code != 0 {
			t.Errorf("queues --redis %s: code %d, stdout %q, stderr %q (want 0)", strings.ReplaceAll(addr, "p@ss@word", "xxx"), code, out, errOut)
		}
	}
	code, _, errOut := runCLI(t, "queues", "--redis", "redis://:p@ss@"+srv.Addr)
	if code == 0 || !strings.Contains(errOut, "WRONGPASS") || strings.Contains(errOut, "p@ss") {
		t.Errorf("a wrong password: code %d, stderr %q (want refused, the password hidden)", code, errOut)
	}
}
