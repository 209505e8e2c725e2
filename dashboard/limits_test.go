package dashboard_test

import (
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/jobs"
)

// TestLimitsViewAndJobWaitingFor: a key at its limit is listed with its
// holder and waiting count, a parked job's page says what it waits for,
// and a rate-limited job shows its rate.
func TestLimitsViewAndJobWaitingFor(t *testing.T) {
	f := newFixture(t)
	holder := f.enqueue(echoArgs{}, jobs.Limit("export:cust-42", 1))
	f.claimOne(jobs.DefaultQueue, holder, "w1", time.Minute)
	parked := f.enqueue(echoArgs{}, jobs.Limit("export:cust-42", 1))
	f.enqueue(echoArgs{}, jobs.Limit("export:cust-42", 1))
	f.enqueue(echoArgs{}, jobs.Rate("provider", 10, time.Second))
	h := f.handler(dashboard.Options{})

	var lim struct {
		Queues []struct {
			Queue  string `json:"queue"`
			Limits []struct {
				Key     string   `json:"key"`
				Max     int      `json:"max"`
				Held    int      `json:"held"`
				Waiting int      `json:"waiting"`
				Holders []string `json:"holders"`
				AtLimit bool     `json:"at_limit"`
			} `json:"limits"`
		} `json:"queues"`
	}
	getJSON(t, h, "/api/limits", &lim)
	if len(lim.Queues) != 1 || len(lim.Queues[0].Limits) != 1 {
		t.Fatalf("limits: %+v", lim)
	}
	l := lim.Queues[0].Limits[0]
	if l.Key != "export:cust-42" || l.Max != 1 || l.Held != 1 || l.Waiting != 2 || !l.AtLimit ||
		len(l.Holders) != 1 || l.Holders[0] != holder {
		t.Fatalf("limit: %+v (holder %s)", l, holder)
	}

	var job struct {
		Job struct {
			Limit      string `json:"limit"`
			WaitingFor string `json:"waiting_for"`
		} `json:"job"`
	}
	body := getJSON(t, h, "/api/jobs/default/"+parked, &job)
	if job.Job.WaitingFor != "limit export:cust-42, 1 of 1 held" || !strings.HasPrefix(job.Job.Limit, "export:cust-42, at most 1") {
		t.Fatalf("parked job: %s", body)
	}
}

// TestLimitsViewGroups: the limits view lists the fair groups with pending
// jobs, deepest first, with their head; a grouped job's page says its group
// and how many of it are ahead.
func TestLimitsViewGroups(t *testing.T) {
	f := newFixture(t)
	head := f.enqueue(echoArgs{}, jobs.Group("acme"))
	f.enqueue(echoArgs{}, jobs.Group("acme"))
	last := f.enqueue(echoArgs{}, jobs.Group("acme"), jobs.Delay(time.Minute))
	f.enqueue(echoArgs{}, jobs.Group("zeta"))
	h := f.handler(dashboard.Options{})
	var lim struct {
		Queues []struct {
			Queue  string `json:"queue"`
			Groups []struct {
				Name    string `json:"name"`
				Head    string `json:"head"`
				Pending int    `json:"pending"`
			} `json:"groups"`
		} `json:"queues"`
	}
	body := getJSON(t, h, "/api/limits", &lim)
	if len(lim.Queues) != 1 || len(lim.Queues[0].Groups) != 2 {
		t.Fatalf("limits: %s", body)
	}
	g := lim.Queues[0].Groups[0]
	if g.Name != "acme" || g.Pending != 3 || g.Head != head || lim.Queues[0].Groups[1].Name != "zeta" {
		t.Fatalf("groups: %s (head %s)", body, head)
	}
	var job struct {
		Job struct {
			Group      string `json:"group"`
			WaitingFor string `json:"waiting_for"`
		} `json:"job"`
	}
	body = getJSON(t, h, "/api/jobs/default/"+last, &job)
	if job.Job.Group != "acme" || job.Job.WaitingFor != "group acme, 2 ahead" {
		t.Fatalf("grouped job: %s", body)
	}
	// the pending list shows it too, with what it waits for
	var list struct {
		Jobs []struct {
			ID         string `json:"id"`
			WaitingFor string `json:"waiting_for"`
		} `json:"jobs"`
	}
	body = getJSON(t, h, "/api/jobs?state=pending&queue=default", &list)
	found := false
	for _, j := range list.Jobs {
		if j.ID == last {
			found = j.WaitingFor == "group acme, 2 ahead"
		}
	}
	if !found {
		t.Fatalf("pending list lacks %s waiting for its group: %s", last, body)
	}
}
