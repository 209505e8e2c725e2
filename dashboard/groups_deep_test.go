package dashboard_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/jobs"
)

// TestLimitsViewDeepestGroupsPastTheCap: with more fair groups than the
// view lists (1000), the deepest are the ones listed, whatever their
// names: a hot group named late in the alphabet is not hidden behind a
// thousand idle ones.
func TestLimitsViewDeepestGroupsPastTheCap(t *testing.T) {
	f := newFixture(t)
	var ps []jobs.Params
	for i := range 1000 {
		ps = append(ps, jobs.Params{Args: echoArgs{N: i}, Options: []jobs.Option{jobs.Group(fmt.Sprintf("a%04d", i))}})
	}
	for i := range 5 {
		ps = append(ps, jobs.Params{Args: echoArgs{N: i}, Options: []jobs.Option{jobs.Group("zz-hot")}})
	}
	_, err := f.client.EnqueueMany(context.Background(), ps)
	must(t, err)
	h := f.handler(dashboard.Options{})
	var lim struct {
		Queues []struct {
			Groups []struct {
				Name    string `json:"name"`
				Pending int    `json:"pending"`
			} `json:"groups"`
		} `json:"queues"`
	}
	getJSON(t, h, "/api/limits", &lim)
	if len(lim.Queues) != 1 || len(lim.Queues[0].Groups) != 1000 {
		t.Fatalf("limits: %d queues", len(lim.Queues))
	}
	if g := lim.Queues[0].Groups[0]; g.Name != "zz-hot" || g.Pending != 5 {
		t.Fatalf("deepest group listed first: %+v", g)
	}
}
