package dashboard_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/internal/ledger"
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

// TestPendingListsShowParkedJobs: jobs parked on a full limit are pending,
// out of the due index: the pending list shows them (with what they wait
// for) and counts them, a selection for a bulk action holds them, and a
// bulk cancel ends them.
func TestPendingListsShowParkedJobs(t *testing.T) {
	f := newFixture(t)
	holder := f.enqueue(echoArgs{}, jobs.Limit("export:cust-42", 1))
	f.claimOne(jobs.DefaultQueue, holder, "w1", time.Minute)
	parked := []string{
		f.enqueue(echoArgs{N: 1}, jobs.Limit("export:cust-42", 1)),
		f.enqueue(echoArgs{N: 2}, jobs.Limit("export:cust-42", 1)),
	}
	due := f.enqueue(echoArgs{N: 3})
	h := f.handler(dashboard.Options{Username: user, Password: pass})

	var list struct {
		Total int64 `json:"total"`
		Jobs  []struct {
			ID         string `json:"id"`
			WaitingFor string `json:"waiting_for"`
		} `json:"jobs"`
		Selection []struct {
			Queue string `json:"queue"`
			ID    string `json:"id"`
		} `json:"selection"`
	}
	body := getJSON(t, h, "/api/jobs?state=pending&queue=default&select=1", &list)
	waiting := map[string]string{}
	for _, j := range list.Jobs {
		waiting[j.ID] = j.WaitingFor
	}
	if list.Total != 3 || len(list.Jobs) != 3 || len(list.Selection) != 3 {
		t.Fatalf("pending list of the due job and the 2 parked ones: %s", body)
	}
	for _, id := range parked {
		if waiting[id] != "limit export:cust-42, 1 of 1 held" {
			t.Fatalf("parked job %s listed as %q: %s", id, waiting[id], body)
		}
	}
	if w, ok := waiting[due]; !ok || w != "" {
		t.Fatalf("due job %s: %q in %s", due, w, body)
	}
	// the CLI's and applications' read: the inspector's list
	page, err := f.client.Inspector().List(context.Background(), jobs.ListParams{State: jobs.Pending, Queue: jobs.DefaultQueue})
	if err != nil || page.Total != 3 || len(page.Jobs) != 3 {
		t.Fatalf("inspector list: %+v, %v", page, err)
	}

	var sel []string
	for _, j := range list.Selection {
		if j.ID != due {
			sel = append(sel, `{"queue":"`+j.Queue+`","id":"`+j.ID+`"}`)
		}
	}
	res, body := act(t, h, "/api/bulk", `{"action":"cancel","note":"customer left","jobs":[`+strings.Join(sel, ",")+`]}`)
	if res.StatusCode != http.StatusOK || !strings.Contains(string(body), `"requested":2,"done":2,"failed":[]`) {
		t.Fatalf("bulk cancel of the parked jobs: %d %s", res.StatusCode, body)
	}
	for _, id := range parked {
		if s := f.state(jobs.DefaultQueue, id); s != jobs.Cancelled {
			t.Fatalf("parked job %s is %s after the bulk cancel", id, s)
		}
	}
}

// TestLimitsViewListsOnlyKeysHoldingJobsBack: a key whose parked job was
// woken, now below its limit with nothing parked, is not listed; a key at
// its limit, or with parked jobs, is.
func TestLimitsViewListsOnlyKeysHoldingJobsBack(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	// export:b (max 1): at its limit, one job parked
	b1 := f.enqueue(echoArgs{N: 4}, jobs.Limit("export:b", 1))
	f.claimOne(jobs.DefaultQueue, b1, "w1", time.Minute)
	f.enqueue(echoArgs{N: 5}, jobs.Limit("export:b", 1))
	// export:a (max 2): two holders, a third job parked, then both
	// holders end and the parked job is woken: 1 of 2 promised, nothing
	// parked (held and promised permits reaching the max would park the
	// key's next job: at its limit)
	a1 := f.enqueue(echoArgs{N: 1}, jobs.Limit("export:a", 2))
	a2 := f.enqueue(echoArgs{N: 2}, jobs.Limit("export:a", 2))
	r, err := f.ledger.Claim(ctx, jobs.DefaultQueue, "w1", time.Minute, 2)
	if err != nil || len(r.Jobs) != 2 || r.Jobs[0].ID != a1 && r.Jobs[0].ID != a2 {
		t.Fatalf("claim of %s and %s: %+v, %v", a1, a2, r, err)
	}
	f.enqueue(echoArgs{N: 3}, jobs.Limit("export:a", 2))
	if _, err := f.ledger.Complete(ctx, jobs.DefaultQueue, []ledger.Completion{
		{ID: r.Jobs[0].ID, Token: r.Jobs[0].Token, Outcome: ledger.Outcome{To: ledger.Succeeded}},
		{ID: r.Jobs[1].ID, Token: r.Jobs[1].Token, Outcome: ledger.Outcome{To: ledger.Succeeded}}}); err != nil {
		t.Fatal(err)
	}
	h := f.handler(dashboard.Options{})

	var lim struct {
		Queues []struct {
			Limits []struct {
				Key     string `json:"key"`
				Waiting int    `json:"waiting"`
				AtLimit bool   `json:"at_limit"`
			} `json:"limits"`
		} `json:"queues"`
	}
	body := getJSON(t, h, "/api/limits", &lim)
	if len(lim.Queues) != 1 || len(lim.Queues[0].Limits) != 1 {
		t.Fatalf("limits: %s; want export:b alone", body)
	}
	if l := lim.Queues[0].Limits[0]; l.Key != "export:b" || l.Waiting != 1 || !l.AtLimit {
		t.Fatalf("limits: %s; want export:b at its limit, 1 parked", body)
	}
}

// TestLimitsViewListsAKeyOnceAJobParks: the limits view lists the keys
// that hold jobs back; a key at its limit on which no job parked yet holds
// none back and is not listed (the claim records a key only when it parks
// a job, to add no write per admitted job); the next job of the key parks,
// and the key is listed at its limit, with its holder.
func TestLimitsViewListsAKeyOnceAJobParks(t *testing.T) {
	f := newFixture(t)
	lim := jobs.Limit("export:cust-9", 1)
	holder := f.enqueue(echoArgs{}, lim)
	f.claimOne(jobs.DefaultQueue, holder, "w1", time.Minute)
	h := f.handler(dashboard.Options{})
	var v struct {
		Queues []struct {
			Limits []struct {
				Key     string   `json:"key"`
				Waiting int      `json:"waiting"`
				Holders []string `json:"holders"`
				AtLimit bool     `json:"at_limit"`
			} `json:"limits"`
		} `json:"queues"`
	}
	body := getJSON(t, h, "/api/limits", &v)
	for _, q := range v.Queues {
		if len(q.Limits) != 0 {
			t.Fatalf("a key holding no job back is listed: %s", body)
		}
	}
	parked := f.enqueue(echoArgs{}, lim)
	body = getJSON(t, h, "/api/limits", &v)
	if len(v.Queues) != 1 || len(v.Queues[0].Limits) != 1 {
		t.Fatalf("limits after job %s parked: %s", parked, body)
	}
	if l := v.Queues[0].Limits[0]; l.Key != "export:cust-9" || l.Waiting != 1 || !l.AtLimit || len(l.Holders) != 1 || l.Holders[0] != holder {
		t.Fatalf("limit %+v, want export:cust-9 at its limit, held by %s, 1 waiting", l, holder)
	}
}
