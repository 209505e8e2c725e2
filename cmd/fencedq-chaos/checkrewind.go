package main

import (
	"context"

	"github.com/fencedq/fencedq/jobs"
)

// checkRewinds reads the ledger rewinds clients and pools recorded (jobs.
// Inspector.Rewinds) into the failover summary of a fencedq run. On
// Cluster (--cluster with --failover) a lost acknowledged job must be
// visible: the run must have recorded at least one rewind whenever it
// lost a job, else a violation. (The Sentinel runs report the figures
// only: their tests erase jobs behind the ledger's back to prove the loss
// check, which no detector can see.)
func (e *runEnv) checkRewinds(ctx context.Context, rep *report) error {
	fs := rep.Failover
	if fs == nil || e.o.Baseline != "" {
		return nil
	}
	rws, err := jobs.NewInspector(e.rdb, jobs.Config{Namespace: namespace}).Rewinds(ctx)
	if err != nil {
		return err
	}
	fs.Rewinds = len(rws)
	for _, r := range rws {
		fs.RewindLostEnqueues += r.LostEnqueues
	}
	if e.cf == nil {
		return nil
	}
	c := rep.newCheck("lost jobs seen as rewinds",
		"on Cluster, a run that lost acknowledged jobs in a failover recorded the loss as a ledger rewind (Inspector.Rewinds)")
	if fs.LostJobs > 0 && fs.Rewinds == 0 {
		rep.fail(c, "%d acknowledged jobs lost, no rewind recorded", fs.LostJobs)
	}
	return nil
}
