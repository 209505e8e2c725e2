package dashboard_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/internal/browser"
	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
)

// operations adds what the operator pages show to a seeded fixture: three
// dead jobs in queue "bulk", 55 scheduled jobs in queue "many", two live
// pools (pool-b is the maintenance leader), three minutes of history and two
// periodic schedules (see schedules).
func (f *fixture) operations() (bulk []string) {
	t := f.t
	ctx := context.Background()
	now, err := f.ledger.ServerTime(ctx)
	must(t, err)
	record := func(at time.Time) {
		qs, err := f.ledger.Queues(ctx)
		must(t, err)
		for _, q := range qs {
			must(t, f.ledger.RecordSeries(ctx, []string{q}, nil, at))
		}
	}
	must(t, f.ledger.RegisterQueues(ctx, "bulk")) // a queue's first bucket is the baseline its next ones count from
	for i := range 55 {
		f.enqueue(echoArgs{N: i, Note: strings.Repeat("long args ", 40)}, jobs.Queue("many"), jobs.Delay(time.Duration(i+1)*time.Minute))
	}
	record(now.Add(-3 * time.Minute))
	for i := range 3 {
		bulk = append(bulk, f.deadJob("bulk", fmt.Sprintf("op-bulk-%d", i)))
	}
	record(now.Add(-2 * time.Minute))
	f.reviewJob("bulk", chargeArgs{Account: "acct-9", Memo: "late"}, "op-bulk-review")
	record(now.Add(-time.Minute))
	for i, id := range []string{"pool-a", "pool-b"} {
		must(t, f.ledger.Heartbeat(ctx, jobs.PoolInfo{ID: id, Host: "host-" + id, PID: 100 + i, Queues: map[string]int{"default": 1, "bulk": 2},
			Concurrency: 10, Busy: 2 + i, Version: "v1.2.3", Started: now.Add(-time.Hour)}, time.Hour))
	}
	_, err = lease.NewManager(f.rdb, lease.Config{Namespace: f.ns}).Acquire(ctx, ledger.LeaderResource, "pool-b", time.Hour)
	must(t, err)
	f.schedules(now)
	return bulk
}

// schedules records two periodic schedules as a scheduler leader would:
// "hourly-echo" with three ticks (the newest produced f.tickJob, pending
// in queue "reports"; the one before was deduplicated into the same job;
// the oldest's job is past its retention) and "nightly-report", never
// ticked, whose time zone holds markup.
func (f *fixture) schedules(now time.Time) {
	t := f.t
	ctx := context.Background()
	const leader = lease.Token(42)
	_, err := f.ledger.RegisterSchedule(ctx, leader, jobs.ScheduleSpec{ID: "hourly-echo", Schedule: "@every 1h0m0s", TimeZone: "UTC",
		Kind: "echo", Queue: "reports", CatchUp: "latest"})
	must(t, err)
	_, err = f.ledger.RegisterSchedule(ctx, leader, jobs.ScheduleSpec{ID: "nightly-report", Schedule: "0 3 * * *", TimeZone: xss,
		Kind: "charge", Queue: "reports", CatchUp: "none"})
	must(t, err)
	hour := now.Truncate(time.Hour)
	f.tickJob = f.enqueue(echoArgs{N: 99, Note: "tick"}, jobs.Queue("reports"), jobs.Delay(time.Hour),
		jobs.OperationID(jobs.PeriodicOperationID("hourly-echo", hour)))
	must(t, f.ledger.RecordTicks(ctx, "hourly-echo", leader, ledger.TickRecord{Cursor: hour, Next: hour.Add(time.Hour), Ticks: []jobs.Tick{
		{Time: hour.Add(-2 * time.Hour), JobID: "job-past-retention", Queue: "reports"},
		{Time: hour.Add(-time.Hour), JobID: f.tickJob, Queue: "reports", Deduplicated: true},
		{Time: hour, JobID: f.tickJob, Queue: "reports"},
	}}))
}

// serveOps serves the dashboard with actions enabled under /ops/.
func (f *fixture) serveOps() *httptest.Server {
	h := f.handler(dashboard.Options{Username: user, Password: pass})
	mux := http.NewServeMux()
	mux.Handle("/ops/", http.StripPrefix("/ops", h))
	srv := httptest.NewServer(mux)
	f.t.Cleanup(srv.Close)
	return srv
}

func navigate(t *testing.T, tb *tab, hash string) {
	t.Helper()
	must(t, tb.page.Eval(tb.ctx, `location.hash = `+jsString(hash), nil))
}

// confirm opens the action box sel, types note and confirms (clicks are
// dispatched by the page's own click(), which does not wait for layout).
// It returns the confirmation's question, read before confirming: the view
// re-renders soon after an action and the box goes with it.
func confirm(t *testing.T, tb *tab, sel, note string) string {
	t.Helper()
	waitJS(t, tb, "the action "+sel, `!!document.querySelector(`+jsString(sel+` button.act`)+`)`)
	click(t, tb, sel+` button.act`)
	waitJS(t, tb, "the confirmation of "+sel, `!!document.querySelector(`+jsString(sel+` .confirm-box input.note`)+`)`)
	q := evalJS[string](t, tb, `document.querySelector(`+jsString(sel+` .confirm-box .question`)+`).textContent`)
	if note != "" {
		must(t, tb.page.Type(tb.ctx, sel+` .confirm-box input.note`, note))
	}
	click(t, tb, sel+` .confirm-box button.confirm`)
	return q
}

// recordStatuses makes the page keep every text an action's status shows
// (window.__statuses), so a test reads a result the view's re-render soon
// after throws away.
func recordStatuses(t *testing.T, tb *tab) {
	t.Helper()
	must(t, tb.page.Eval(tb.ctx, `window.__statuses = []; new MutationObserver(() => {
		for (const s of document.querySelectorAll('.action .status')) if (s.textContent) window.__statuses.push(s.textContent);
	}).observe(document.body, { subtree: true, childList: true, characterData: true }); true`, nil))
}

// waitStatus waits until an action's status has shown text (recordStatuses
// first).
func waitStatus(t *testing.T, tb *tab, what, text string) {
	t.Helper()
	waitJS(t, tb, what, `window.__statuses.includes(`+jsString(text)+`)`)
}

func click(t *testing.T, tb *tab, sel string) {
	t.Helper()
	if !evalJS[bool](t, tb, `(() => { const e = document.querySelector(`+jsString(sel)+`); if (!e) return false; e.click(); return true; })()`) {
		t.Fatalf("nothing to click at %s; main: %.3000s", sel, evalJS[string](t, tb, `document.getElementById('main').outerHTML`))
	}
}

func lastEntry(t *testing.T, f *fixture, q, id string) jobs.Entry {
	t.Helper()
	hist, err := f.ledger.History(context.Background(), q, id)
	must(t, err)
	return hist[len(hist)-1]
}

// TestBrowserOperations drives an operator's day in headless Chromium:
// pause and resume a queue, cancel a scheduled job, re-run a dead one,
// filter a list and page through it, re-run a filtered selection in bulk
// after a confirmation that counts it, and read the charts and the pools.
func TestBrowserOperations(t *testing.T) {
	exe := browser.NeedChromium(t)
	f := newFixture(t).seed()
	bulk := f.operations()
	srv := f.serveOps()
	tb, watch := openBrowser(t, exe)
	bg := context.Background()

	// Overview: the last hour's charts render on first load, with every
	// failure the scripts counted: the seeded dead job and the three in
	// queue bulk.
	must(t, tb.page.Navigate(tb.ctx, srv.URL+"/ops/"))
	waitJS(t, tb, "the overview charts", `!!document.querySelector('#chart-failures svg')`)
	if got := evalJS[string](t, tb, `document.getElementById('chart-failures').dataset.total`); got != "4" {
		t.Errorf("failures in the last hour: %s", got)
	}
	if n := evalJS[int](t, tb, `document.querySelectorAll('#chart-failures rect.bar').length`); n < 1 || n > 2 { // the seeding may straddle a minute
		t.Errorf("%d failure bars", n)
	}

	// Pause, then resume, queue default from its row.
	pause := `#queues .action[data-action="pause"][data-target="default"]`
	confirm(t, tb, pause, "deploying the gateway")
	redistest.Await(t, f.rdb, f.ns, "queue default paused", func() bool {
		p, err := f.ledger.Paused(bg, "default")
		return err == nil && p != nil && p.Actor == "operator:"+user && p.Note == "deploying the gateway"
	})
	resume := `#queues .action[data-action="resume"][data-target="default"]`
	confirm(t, tb, resume, "")
	redistest.Await(t, f.rdb, f.ns, "queue default resumed", func() bool {
		p, err := f.ledger.Paused(bg, "default")
		return err == nil && p == nil
	})

	// Another operator pauses the queue while this one confirms a pause:
	// the page says that pause stands and this note was not recorded
	// (the message is caught as it is shown: the view re-renders soon after).
	recordStatuses(t, tb)
	waitJS(t, tb, "the pause action", `!!document.querySelector(`+jsString(pause+` button.act`)+`)`)
	click(t, tb, pause+` button.act`)
	waitJS(t, tb, "the pause confirmation", `!!document.querySelector(`+jsString(pause+` .confirm-box input.note`)+`)`)
	if _, err := f.client.Pause(bg, "default", "bob", "gateway maintenance"); err != nil {
		t.Fatal(err)
	}
	must(t, tb.page.Type(tb.ctx, pause+` .confirm-box input.note`, "my own reason"))
	click(t, tb, pause+` .confirm-box button.confirm`)
	waitJS(t, tb, "the message that bob's pause stands", `window.__statuses.some((s) => s.includes('already paused by operator:bob') && s.includes('not recorded'))`)
	if p, err := f.ledger.Paused(bg, "default"); err != nil || p == nil || p.Actor != "operator:bob" {
		t.Fatalf("pause after the race: %+v %v, want bob's", p, err)
	}
	if _, err := f.client.Resume(bg, "default", "bob", ""); err != nil {
		t.Fatal(err)
	}

	// Cancel the scheduled job from its page: the page shows when it runs.
	navigate(t, tb, "#/job/default/"+f.pending)
	waitJS(t, tb, "the scheduled job", `document.getElementById('main').dataset.view === 'job' && !!document.getElementById('job-run-at')`)
	if txt := evalJS[string](t, tb, `document.getElementById('job-run-at').textContent`); !strings.Contains(txt, "(in ") {
		t.Errorf("run at: %q", txt)
	}
	waitJS(t, tb, "the run-now button on a scheduled job", `!!document.querySelector('.action[data-action="run-now"]')`)
	confirm(t, tb, `.action[data-action="cancel"]`, "customer withdrew the order")
	jobstest.WaitState(t, f.ledger, "default", f.pending, jobs.Cancelled)
	if e := lastEntry(t, f, "default", f.pending); e.Actor != "operator:"+user || e.Note != "customer withdrew the order" {
		t.Errorf("cancel entry: %+v", e)
	}

	// Run now on a scheduled job that started since its page showed it:
	// refused, the page says so, and the running attempt is untouched.
	waitJS(t, tb, "the cancelled job's page shown again", `document.getElementById('main').dataset.view === 'job' && !document.querySelector('.action[data-action="cancel"]')`)
	late := f.enqueue(echoArgs{N: 99}, jobs.Queue("late"), jobs.Delay(time.Hour))
	navigate(t, tb, "#/job/late/"+late)
	runNow := `.action[data-action="run-now"][data-target="` + late + `"]`
	waitJS(t, tb, "the run-now button on the late job", `!!document.querySelector(`+jsString(runNow+` button.act`)+`)`)
	cl, err := f.ledger.ClaimJob(bg, "late", late, "w1", time.Minute)
	must(t, err)
	watch.expectFailure(srv.URL + "/ops/api/jobs/late/" + late + "/run-now") // 409
	confirm(t, tb, runNow, "")
	waitJS(t, tb, "the refusal", `/seen pending .*now running/.test(document.querySelector(`+jsString(runNow+` .status`)+`).textContent)`)
	if rec, err := f.ledger.Get(bg, "late", late); err != nil || rec.State != jobs.Running || rec.Token != cl.Token || lastEntry(t, f, "late", late).Event != "attempt" {
		t.Errorf("the stale run-now landed: %+v, %v", rec, err)
	}

	// The stuck job is marked overdue; the healthy one counts its lease down.
	navigate(t, tb, "#/job/slow/"+f.stuck)
	waitJS(t, tb, "the overdue marker", `document.getElementById('main').dataset.view === 'job' && !!document.getElementById('job-overdue')`)
	navigate(t, tb, "#/job/slow/"+f.healthy)
	waitJS(t, tb, "the lease countdown", `/\(in \d+m\d+s\)/.test((document.getElementById('job-lease') || {}).textContent || '')`)

	// Re-run the dead job from its page.
	navigate(t, tb, "#/job/default/"+f.dead)
	btn := `div.resolve[data-resolve="` + f.dead + `"] button[data-decision="rerun"]`
	waitJS(t, tb, "the re-run button", `!!document.querySelector(`+jsString(btn)+`)`)
	must(t, tb.page.Type(tb.ctx, `div.resolve input.note`, "card gateway fixed"))
	must(t, tb.page.Click(tb.ctx, btn))
	jobstest.WaitState(t, f.ledger, "default", f.dead, jobs.Pending)

	// Filter with the form: dead jobs of queue bulk.
	navigate(t, tb, "#/jobs?state=pending")
	waitJS(t, tb, "the filter form", `!!document.querySelector('#filters select[name=queue] option[value=bulk]')`)
	must(t, tb.page.Eval(tb.ctx,
		`document.querySelector('#filters select[name=state]').value = 'dead'; document.querySelector('#filters select[name=queue]').value = 'bulk'`, nil))
	click(t, tb, `#filters button[type=submit]`)
	waitJS(t, tb, "the filtered list", `location.hash.includes('queue=bulk') && document.querySelectorAll('#jobs tbody a[data-job]').length === 3`)
	screenshotIf(t, tb, "jobs-filtered.png")

	// Re-run them all: the confirmation counts the selection first.
	if q := confirm(t, tb, `#bulk .action[data-action="bulk-rerun"]`, "gateway back up"); !strings.HasPrefix(q, "Re-run 3 jobs (dead in queue bulk)") {
		t.Errorf("confirmation: %q", q)
	}
	for _, id := range bulk { // the bulk re-run
		jobstest.WaitState(t, f.ledger, "bulk", id, jobs.Pending)
	}
	if e := lastEntry(t, f, "bulk", bulk[2]); e.Actor != "operator:"+user || e.Note != "gateway back up" || e.Decision != "rerun" {
		t.Errorf("bulk entry: %+v", e)
	}
	waitStatus(t, tb, "the bulk result", "Done: 3 of 3 jobs.")

	// Pages: labels follow the order shown.
	navigate(t, tb, "#/jobs?state=pending&queue=many")
	waitJS(t, tb, "page 1, oldest first", `document.querySelectorAll('#jobs tbody a[data-job]').length === 50 && !!document.querySelector('#pager a[rel=next]')`)
	waitJS(t, tb, "the bulk run-now and cancel buttons on scheduled jobs",
		`!!document.querySelector('#bulk .action[data-action="bulk-run_now"]') && !!document.querySelector('#bulk .action[data-action="bulk-cancel"]')`)
	if txt := evalJS[string](t, tb, `document.querySelector('#pager a[rel=next]').textContent`); txt != "newer →" {
		t.Errorf("next page, oldest first: %q", txt)
	}
	firstPageLast := evalJS[string](t, tb, `[...document.querySelectorAll('#jobs tbody tr')].at(-1).children[5].textContent`)
	click(t, tb, `#pager a[rel=next]`)
	waitJS(t, tb, "page 2", `document.querySelectorAll('#jobs tbody a[data-job]').length === 5`)
	if first := evalJS[string](t, tb, `document.querySelector('#jobs tbody tr').children[5].textContent`); first <= firstPageLast {
		t.Errorf("page 2 starts at %s, not after page 1's %s", first, firstPageLast)
	}
	navigate(t, tb, "#/jobs?state=pending&queue=many&sort=desc")
	waitJS(t, tb, "page 1, newest first", `!!document.querySelector('#pager a[rel=next]') && document.getElementById('pager').textContent.includes('newest first')`)
	if txt := evalJS[string](t, tb, `document.querySelector('#pager a[rel=next]').textContent`); txt != "older →" {
		t.Errorf("next page, newest first: %q", txt)
	}

	// Pools: both live pools, the leader marked.
	navigate(t, tb, "#/pools")
	waitJS(t, tb, "the pools", `document.querySelectorAll('#pools tbody tr[data-pool]').length === 2`)
	if !evalJS[bool](t, tb, `!!document.querySelector('#pools tr[data-pool="pool-b"] .badge.leader') && !document.querySelector('#pools tr[data-pool="pool-a"] .badge.leader')`) {
		t.Error("the maintenance leader is not marked on pool-b alone")
	}
	if txt := evalJS[string](t, tb, `document.querySelector('#pools tr[data-pool="pool-a"]').textContent`); !strings.Contains(txt, "host-pool-a") ||
		!strings.Contains(txt, "2 / 10") || !strings.Contains(txt, "v1.2.3") || !strings.Contains(txt, "bulk=2") {
		t.Errorf("pool row: %q", txt)
	}

	// Schedules: both, the last tick's job linked with its state; one
	// schedule's ticks, newest first; markup in a schedule shown as text;
	// a removed schedule listed with who removed it and why.
	_, err = f.ledger.RegisterSchedule(bg, 42, jobs.ScheduleSpec{ID: "retired", Schedule: "@every 1h0m0s", Kind: "echo", Queue: "reports"})
	must(t, err)
	if ok, err := f.client.RemoveSchedule(bg, "retired", "carol", xss); !ok || err != nil {
		t.Fatalf("RemoveSchedule: %v %v", ok, err)
	}
	navigate(t, tb, "#/schedules")
	waitJS(t, tb, "the schedules", `document.getElementById('main').dataset.view === 'schedules' && document.querySelectorAll('#schedules tbody tr[data-schedule]').length === 2`)
	if txt := evalJS[string](t, tb, `document.querySelector('#schedules tr[data-schedule="hourly-echo"]').textContent`); !strings.Contains(txt, f.tickJob) ||
		!strings.Contains(txt, "pending") || !strings.Contains(txt, "@every 1h0m0s") || !strings.Contains(txt, "latest") {
		t.Errorf("schedule row: %q", txt)
	}
	if txt := evalJS[string](t, tb, `document.querySelector('#schedules tr[data-schedule="nightly-report"]').textContent`); !strings.Contains(txt, xss) {
		t.Errorf("markup in a schedule is not shown as text: %q", txt)
	}
	if txt := evalJS[string](t, tb, `document.querySelector('#removed-schedules tr[data-removed="retired"]').textContent`); !strings.Contains(txt, "operator:carol") ||
		!strings.Contains(txt, xss) || !strings.Contains(txt, "reports") {
		t.Errorf("removed schedule row: %q", txt)
	}
	click(t, tb, `#schedules tr[data-schedule="hourly-echo"] a[href="#/schedules/hourly-echo"]`)
	waitJS(t, tb, "the schedule's ticks", `document.getElementById('main').dataset.view === 'schedule' && document.querySelectorAll('#ticks tbody tr[data-tick]').length === 3`)
	states := evalJS[[]string](t, tb, `[...document.querySelectorAll('#ticks tbody tr')].map((r) => r.children[2].textContent)`)
	if strings.Join(states, ",") != "pending,pending,gone" {
		t.Errorf("tick states, newest first: %v", states)
	}
	if !evalJS[bool](t, tb, `document.querySelector('#ticks tbody tr').textContent.includes('periodic:hourly-echo:') && document.querySelectorAll('#ticks a[data-job]')[1].textContent.length > 0 && document.querySelectorAll('#ticks tbody tr')[1].textContent.includes('deduplicated')`) {
		t.Error("tick rows lack the operation id, the job link or the deduplicated note")
	}
	click(t, tb, `#ticks tbody tr a[data-job]`)
	waitJS(t, tb, "the tick's job", `document.getElementById('main').dataset.view === 'job' && location.hash === `+jsString("#/job/reports/"+f.tickJob))

	// A schedule two pools define differently: both pools, the losing
	// definition's digest; markup in a pool's name shown as text.
	t0 := time.Date(2030, 1, 7, 8, 0, 0, 0, time.UTC)
	split := jobs.ScheduleSpec{ID: "split", Schedule: "@every 5m0s", TimeZone: "UTC", Kind: "echo", Queue: "reports", Digest: "d-new"}
	_, err = f.ledger.RegisterScheduleAt(bg, 43, split, jobs.ScheduleOwner{Pool: "pool-v2", Started: t0.Add(time.Minute)}, time.Time{})
	must(t, err)
	split.Schedule, split.Digest = "@every 1h0m0s", "d-old"
	if _, err := f.ledger.RegisterScheduleAt(bg, 44, split, jobs.ScheduleOwner{Pool: xss, Started: t0}, time.Time{}); !errors.Is(err, jobs.ErrScheduleConflict) {
		t.Fatalf("the older pool's registration: %v", err)
	}
	navigate(t, tb, "#/schedules/split")
	waitJS(t, tb, "the schedule's conflict", `document.getElementById('main').dataset.view === 'schedule' && !!document.querySelector('#conflicts tr[data-conflict="split"]')`)
	if txt := evalJS[string](t, tb, `document.querySelector('#conflicts tr[data-conflict="split"]').textContent`); !strings.Contains(txt, "pool-v2 (started 2030-01-07 08:01:00Z)") ||
		!strings.Contains(txt, xss+" (started 2030-01-07 08:00:00Z)") || !strings.Contains(txt, "d-old") {
		t.Errorf("conflict row: %q", txt)
	}

	// History: the day's charts.
	navigate(t, tb, "#/history?window=24h")
	waitJS(t, tb, "the day's charts", `document.getElementById('main').dataset.view === 'history' && document.querySelectorAll('figure.chart').length === 6`)
	if got := evalJS[string](t, tb, `document.getElementById('chart-review').textContent`); !strings.Contains(got, "now 2") { // one in default, one in bulk
		t.Errorf("review chart: %q", got)
	}

	if p := watch.list(); len(p) > 0 {
		t.Fatalf("the page misbehaved:\n%s", strings.Join(p, "\n"))
	}
}

// screenshotIf keeps a screenshot only when FENCEDQ_SCREENSHOTS names a
// directory (TestScreenshots takes the full set).
func screenshotIf(t *testing.T, tb *tab, name string) {
	t.Helper()
	if os.Getenv("FENCEDQ_SCREENSHOTS") != "" {
		shoot(t, tb, os.Getenv("FENCEDQ_SCREENSHOTS"), name)
	}
}

func shoot(t *testing.T, tb *tab, dir, name string) {
	t.Helper()
	png, err := tb.page.Screenshot(tb.ctx)
	must(t, err)
	if len(png) < 1000 || string(png[1:4]) != "PNG" {
		t.Fatalf("screenshot %s: %d bytes, not a PNG", name, len(png))
	}
	must(t, os.MkdirAll(dir, 0o755))
	path := filepath.Join(dir, name)
	must(t, os.WriteFile(path, png, 0o644))
	t.Logf("screenshot: %s (%d bytes)", path, len(png))
}

// TestScreenshots takes a screenshot of every page for the README:
//
//	FENCEDQ_SCREENSHOTS=docs/screenshots go test ./dashboard -run TestScreenshots
//
// Without FENCEDQ_SCREENSHOTS they go to the test's temporary directory
// (removed afterwards), so the test still checks that every page renders.
func TestScreenshots(t *testing.T) {
	exe := browser.NeedChromium(t)
	dir := os.Getenv("FENCEDQ_SCREENSHOTS")
	if dir == "" {
		dir = t.TempDir()
	} else if !filepath.IsAbs(dir) {
		// go test runs in the package directory: resolve against the
		// module root, where the command was most likely typed.
		if root, err := filepath.Abs(".."); err == nil {
			dir = filepath.Join(root, dir)
		}
	}
	f := newFixture(t).seed()
	f.operations()
	srv := f.serveOps()
	tb, watch := openBrowser(t, exe)
	must(t, tb.page.Navigate(tb.ctx, srv.URL+"/ops/"))
	pages := []struct{ hash, view, name, ready string }{
		{"#/", "overview", "overview.png", `!!document.querySelector('#chart-throughput')`},
		{"#/jobs?state=pending&queue=many&sort=desc", "jobs", "jobs.png", `!!document.querySelector('#jobs a[data-job]')`},
		{"#/job/default/" + f.uncertain, "job", "job.png", `!!document.getElementById('job-error')`},
		{"#/job/slow/" + f.healthy, "job", "job-running.png", `!!document.getElementById('job-lease')`},
		{"#/job/default/" + f.pending, "job", "job-scheduled.png", `!!document.getElementById('job-run-at')`},
		{"#/stuck", "stuck", "stuck.png", `!!document.querySelector('#stuck a[data-job]')`},
		{"#/attention", "attention", "attention.png", `!!document.querySelector('div.resolve')`},
		{"#/history", "history", "history.png", `document.querySelectorAll('figure.chart').length === 6`},
		{"#/history?window=24h", "history", "history-day.png", `document.querySelectorAll('figure.chart').length === 6`},
		{"#/pools", "pools", "pools.png", `!!document.querySelector('#pools tr[data-pool]')`},
		{"#/schedules", "schedules", "schedules.png", `!!document.querySelector('#schedules tr[data-schedule]')`},
		{"#/schedules/hourly-echo", "schedule", "schedule.png", `!!document.querySelector('#ticks tr[data-tick]')`},
		{"#/events/fenced", "events", "events-fenced.png", `!!document.querySelector('#events tbody tr')`},
		{"#/events/operator", "events", "events-operator.png", `!!document.querySelector('#events tbody tr')`},
		{"#/search/op-charge", "search", "search.png", `!!document.querySelector('#results a[data-job]')`},
	}
	for _, p := range pages {
		navigate(t, tb, p.hash)
		waitJS(t, tb, p.name, `document.getElementById('main').dataset.view === `+jsString(p.view)+
			` && document.getElementById('main').dataset.ready === '1' && `+p.ready)
		shoot(t, tb, dir, p.name)
	}
	// The bulk confirmation, open.
	navigate(t, tb, "#/jobs?state=dead&queue=bulk")
	waitJS(t, tb, "the bulk action", `!!document.querySelector('#bulk button.act')`)
	click(t, tb, `#bulk button.act`)
	waitJS(t, tb, "the confirmation", `!!document.querySelector('#bulk .confirm-box')`)
	shoot(t, tb, dir, "bulk-confirm.png")
	if p := watch.list(); len(p) > 0 {
		t.Fatalf("the page misbehaved:\n%s", strings.Join(p, "\n"))
	}
	t.Logf("screenshots in %s", dir)
}
