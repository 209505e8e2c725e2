package worker_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/internal/redistest"
)

// TestPoolStartWithTheClockMastersDownNamesIt: on a Redis Cluster whose
// master holding the namespace's clock record is down (the other masters,
// the registry's and the queue's included, up), Run cannot start: every
// pool's start time and the maintenance leader's passes are on that
// record's time. Its error names the cause: that master's address, the
// record's key and that it is one master of a cluster (not "is Redis
// running?"), and it still matches net.Error.
func TestPoolStartWithTheClockMastersDownNamesIt(t *testing.T) {
	cl := redistest.StartCluster(t)
	rdb, master := cl.Degradable()
	var ns, home string
	for i := 0; ns == ""; i++ {
		ns = fmt.Sprintf("%s-%d", redistest.Namespace(t), i)
		home = master(ns + ":epoch")
		if master(ns+":queues") == home || master(ns+":partitions") == home || master(ns+":{default}:pending") == home {
			ns = ""
		}
	}
	e := newEnvOn(t, rdb, ns)
	p := e.pool(e.config())
	for _, n := range cl.Nodes {
		if n.Addr == home {
			n.Kill()
		}
	}
	err := p.Run(context.Background())
	var ne net.Error
	if err == nil || !errors.As(err, &ne) {
		t.Fatalf("Run with the clock record's master down: %v, want an error matching net.Error", err)
	}
	for _, want := range []string{home, ns + ":epoch", "Redis Cluster master", "namespace's clock record"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Run's error %q does not say %q", err, want)
		}
	}
}
