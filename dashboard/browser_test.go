package dashboard_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/internal/browser"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
)

// artifactDir keeps the test's screenshots after it ends (overwritten by
// the next run): $FENCEDQ_ARTIFACTS, or a fixed directory under the
// system's temporary directory.
func artifactDir(t *testing.T) string {
	dir := os.Getenv("FENCEDQ_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "fencedq-dashboard-artifacts")
	}
	must(t, os.MkdirAll(dir, 0o755))
	return dir
}

// pageWatch records what must never happen on a page: dialogs (an injected
// alert), uncaught exceptions, console errors and CSP violations.
type pageWatch struct {
	mu       sync.Mutex
	problems []string
	expected []string           // URLs whose failed loads the test causes
	changes  testsignal.Changes // notified after each problem recorded
}

// expectFailure says a load of url fails on purpose (an action refused).
func (w *pageWatch) expectFailure(url string) {
	w.mu.Lock()
	w.expected = append(w.expected, url)
	w.mu.Unlock()
}

func (w *pageWatch) failureExpected(url string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Contains(w.expected, url)
}

func (w *pageWatch) add(s string) {
	w.mu.Lock()
	w.problems = append(w.problems, s)
	w.mu.Unlock()
	w.changes.Notify()
}

func (w *pageWatch) list() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.problems...)
}

// watchPage records on w what must never happen on the page: a dialog
// (dismissed at once), an uncaught exception, console.error or
// console.assert, and an error in the browser's log (a CSP violation, a
// failed load).
func watchPage(tb *tab, w *pageWatch) {
	decode := func(event string, params json.RawMessage, v any) bool {
		if err := json.Unmarshal(params, v); err != nil {
			w.add(event + ": undecodable " + string(params) + ": " + err.Error())
			return false
		}
		return true
	}
	tb.page.On("Page.javascriptDialogOpening", func(params json.RawMessage) {
		var ev struct{ Type, Message string }
		if decode("dialog", params, &ev) {
			w.add("dialog opened: " + ev.Type + " " + ev.Message)
		}
		_ = tb.page.Call(tb.ctx, "Page.handleJavaScriptDialog", map[string]any{"accept": false}, nil)
	})
	tb.page.On("Runtime.exceptionThrown", func(params json.RawMessage) {
		var ev struct {
			ExceptionDetails struct {
				Text      string
				Exception *struct{ Description string }
			}
		}
		if !decode("exception", params, &ev) {
			return
		}
		d := ev.ExceptionDetails
		msg := d.Text
		if d.Exception != nil {
			msg += " " + d.Exception.Description
		}
		w.add("exception: " + msg)
	})
	tb.page.On("Runtime.consoleAPICalled", func(params json.RawMessage) {
		var ev struct {
			Type string
			Args json.RawMessage
		}
		if decode("console", params, &ev) && (ev.Type == "error" || ev.Type == "assert") {
			w.add("console." + ev.Type + ": " + string(ev.Args))
		}
	})
	tb.page.On("Log.entryAdded", func(params json.RawMessage) {
		var ev struct {
			Entry struct{ Source, Level, Text, URL string }
		}
		if !decode("log", params, &ev) {
			return
		}
		e := ev.Entry
		// Failed loads the test causes on purpose are not problems; the
		// browser's own favicon probe outside the mount is not either.
		if e.Level == "error" && !strings.Contains(e.URL, "favicon.ico") && !w.failureExpected(e.URL) {
			w.add("log " + e.Source + ": " + e.Text + " " + e.URL)
		}
	})
}

// waitSeq numbers the waits of waitJS, so that a wait that timed out can
// be found in the page and stopped.
var waitSeq atomic.Int64

// waitScript returns the in-page side of waitJS, wait number id on expr:
// a promise that evaluates expr now and again after every mutation of the
// document, and resolves with true once it is true. Until then it keeps
// expr's last value (or what it threw) where stopWait can read it. expr is
// part of the evaluated script, never compiled inside the page
// (Runtime.evaluate is not subject to the page's CSP; eval would be).
func waitScript(id int64, expr string) string {
	n := strconv.FormatInt(id, 10)
	return `new Promise((resolve) => {
	const waits = (window.__fencedqWaits ||= {});
	const w = {last: 'not evaluated'};
	const obs = new MutationObserver(() => check());
	const done = (ok) => { obs.disconnect(); delete waits[` + n + `]; resolve(ok); };
	w.stop = () => done(false);
	const check = () => {
		let v;
		try {
			v = (` + expr + `);
		} catch (e) {
			w.last = 'threw ' + e;
			return;
		}
		try { w.last = JSON.stringify(v) ?? String(v); } catch (e) { w.last = String(v); }
		if (v === true) done(true);
	};
	waits[` + n + `] = w;
	obs.observe(document, {subtree: true, childList: true, attributes: true, characterData: true});
	check();
})`
}

// stopWait ends wait number id in the page, if it is still there, and
// returns the last value of its expression.
func stopWait(tb *tab, id int64) string {
	last := "unknown: the wait is no longer in the page"
	_ = tb.page.Eval(tb.ctx, `(() => { const w = (window.__fencedqWaits || {})[`+strconv.FormatInt(id, 10)+`];
		if (!w) return `+jsString(last)+`; w.stop(); return w.last; })()`, &last)
	return last
}

// waitJS waits until the JavaScript expression expr is true in the page:
// one in-page promise evaluates it at once and again after each DOM
// mutation. That is enough for every expression these tests wait on: each
// reads the DOM (the app renders into it, its countdowns write their text
// into it, its state is in data- attributes) and at most location.hash,
// which changes before the render it causes. The wait is bounded by testsignal.Timeout;
// a failure names what was awaited and the last value of expr.
func waitJS(t *testing.T, tb *tab, what, expr string) {
	t.Helper()
	id := waitSeq.Add(1)
	bound := testsignal.Timeout()
	ctx, cancel := context.WithTimeout(tb.ctx, bound)
	defer cancel()
	var ok bool
	err := tb.page.Eval(ctx, waitScript(id, expr), &ok)
	if err == nil && ok {
		return
	}
	last := stopWait(tb, id)
	var body string
	_ = tb.page.Eval(tb.ctx, `(document.getElementById('main') || document.body || {}).textContent || ''`, &body)
	if err == nil {
		err = errors.New("the wait ended without the expression being true")
	}
	t.Fatalf("waited %v for %s: %v\nexpression: %s\nits last value: %s\npage text: %.2000s", bound, what, err, expr, last, body)
}

func evalJS[T any](t *testing.T, tb *tab, expr string) T {
	t.Helper()
	var v T
	if err := tb.page.Eval(tb.ctx, expr, &v); err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func screenshot(t *testing.T, tb *tab, name string) {
	t.Helper()
	png, err := tb.page.Screenshot(tb.ctx)
	must(t, err)
	if len(png) < 1000 || string(png[1:4]) != "PNG" {
		t.Fatalf("screenshot %s: %d bytes, not a PNG", name, len(png))
	}
	path := filepath.Join(artifactDir(t), name)
	must(t, os.WriteFile(path, png, 0o644))
	if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
		t.Fatalf("screenshot %s not kept: %v", path, err)
	}
	t.Logf("screenshot: %s (%d bytes)", path, len(png))
}

// tab is the page a browser test drives, with the deadline of all its
// calls.
type tab struct {
	ctx  context.Context
	page *browser.Page
}

// openBrowser starts headless Chromium for one test and opens a page in
// it, with a watch on what must never happen on a page. Every request
// carries the operator's basic-auth credentials, as after signing in
// through api/login.
func openBrowser(t *testing.T, exe string) (*tab, *pageWatch) {
	t.Helper()
	b, err := browser.Launch(context.Background(), exe, browser.Options{Width: 1280, Height: 1000}) // no timeout on the start
	if err != nil {
		t.Fatalf("start %s: %v", exe, err)
	}
	t.Cleanup(func() { // stops the browser and removes its profile
		if err := b.Close(); err != nil {
			t.Errorf("stop %s: %v", exe, err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	p, err := b.NewPage(ctx)
	if err != nil {
		t.Fatalf("open a page in %s: %v", exe, err)
	}
	tb := &tab{ctx: ctx, page: p}

	watch := &pageWatch{}
	watch.changes.Init(t, "the problems recorded on the page")
	watchPage(tb, watch)
	// Every request of the page carries the operator's basic-auth
	// credentials, as after signing in through api/login.
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
	must(t, p.Call(ctx, "Network.enable", map[string]any{}, nil))
	must(t, p.Call(ctx, "Network.setExtraHTTPHeaders", map[string]any{"headers": map[string]string{"Authorization": auth}}, nil))
	must(t, p.Call(ctx, "Log.enable", nil, nil))

	return tb, watch
}

// TestBrowser drives the dashboard in headless Chromium: the overview with
// real jobs, a job whose args and error hold a <script> payload (shown as
// text, never run), and an operator resolving a review job.
func TestBrowser(t *testing.T) {
	exe := browser.NeedChromium(t)
	f := newFixture(t).seed()
	h := f.handler(dashboard.Options{Username: user, Password: pass})
	mux := http.NewServeMux()
	mux.Handle("/ops/", http.StripPrefix("/ops", h))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	tb, watch := openBrowser(t, exe)

	// Overview: counts render from the ledger.
	must(t, tb.page.Navigate(tb.ctx, srv.URL+"/ops/"))
	count := func(q, s string) string {
		return `document.querySelector('#queues td.count[data-queue=` + jsString(q) + `][data-state=` + jsString(s) + `]')`
	}
	waitJS(t, tb, "the overview counts", `(() => { const c = `+count("default", "succeeded")+`; return !!c && c.textContent === '1'; })()`)
	for s, want := range map[string]string{"pending": "1", "uncertain": "1", "review": "1", "dead": "1", "running": "0", "cancelled": "1"} {
		if got := evalJS[string](t, tb, count("default", s)+`.textContent`); got != want {
			t.Errorf("overview %s = %q, want %q", s, got, want)
		}
	}
	if got := evalJS[string](t, tb, count("slow", "running")+`.textContent`); got != "2" {
		t.Errorf("overview slow running = %q", got)
	}
	// The paused queue is marked in its row and named above the table.
	if n := evalJS[int](t, tb, `document.querySelectorAll('#queues .badge.paused').length`); n != 1 ||
		!evalJS[bool](t, tb, `!!document.querySelector('#queues tr[data-queue="slow"] .badge.paused')`) {
		t.Errorf("%d paused badges, or not on queue slow", n)
	}
	if txt := evalJS[string](t, tb, `document.getElementById('paused').textContent`); !strings.Contains(txt, "slow by operator:bob") ||
		!strings.Contains(txt, "gateway maintenance") {
		t.Errorf("paused line: %q", txt)
	}
	if txt := evalJS[string](t, tb, `document.getElementById('maintenance-leader').textContent`); !strings.Contains(txt, "no leader") {
		t.Errorf("maintenance leader line: %q", txt)
	}
	if txt := evalJS[string](t, tb, `document.getElementById('session').textContent`); txt != "signed in as "+user {
		t.Errorf("session: %q", txt)
	}
	screenshot(t, tb, "overview.png")

	// Open the uncertain job from its count, then from the list.
	must(t, tb.page.Click(tb.ctx, `#queues td.count[data-queue="default"][data-state="uncertain"] a`))
	waitJS(t, tb, "the uncertain list", `!!document.querySelector('#jobs a[data-job=`+jsString(f.uncertain)+`]')`)
	must(t, tb.page.Click(tb.ctx, `#jobs a[data-job="`+f.uncertain+`"]`))
	waitJS(t, tb, "the job page", `document.getElementById('main').dataset.view === 'job' && !!document.getElementById('job-error')`)

	// The payload is text: the literal markup is in the DOM's text, no
	// element came from it, nothing ran.
	if txt := evalJS[string](t, tb, `document.getElementById('job-error').textContent`); !strings.Contains(txt, xss) {
		t.Errorf("error text %q lacks the literal payload", txt)
	}
	if txt := evalJS[string](t, tb, `document.getElementById('job-args').textContent`); !strings.Contains(txt, `"memo": "`+xss+`"`) ||
		!strings.Contains(txt, `"card": "`+jobs.Redacted+`"`) || strings.Contains(txt, secret) {
		t.Errorf("args text: %q", txt)
	}
	if txt := evalJS[string](t, tb, `document.getElementById('job-headers').textContent`); txt != "region=eu, tenant="+xss {
		t.Errorf("headers text: %q", txt)
	}
	if n := evalJS[int](t, tb, `document.querySelectorAll('main script, main img, main iframe').length`); n != 0 {
		t.Errorf("%d elements were created from payload text", n)
	}
	if txt := evalJS[string](t, tb, `document.querySelector('#attempts tbody').textContent`); !strings.Contains(txt, "uncertain") || !strings.Contains(txt, xss) {
		t.Errorf("attempts: %q", txt)
	}
	if evalJS[bool](t, tb, `document.documentElement.outerHTML.includes('<script>alert(1)')`) {
		t.Error("the payload is in the document as markup")
	}
	screenshot(t, tb, "job.png")

	// The running job an operator asked to stop says so.
	must(t, tb.page.Eval(tb.ctx, `location.hash = `+jsString("#/job/slow/"+f.healthy), nil))
	waitJS(t, tb, "the job asked to stop", `document.getElementById('main').dataset.view === 'job' && !!document.getElementById('job-cancel')`)
	if txt := evalJS[string](t, tb, `document.getElementById('job-cancel').textContent`); !strings.Contains(txt, "operator:alice") {
		t.Errorf("cancel request: %q", txt)
	}
	// Its progress shows live: a report made while the page is open appears
	// without a reload.
	if txt := evalJS[string](t, tb, `document.getElementById('job-progress').textContent`); txt != "none reported" {
		t.Errorf("progress before any report: %q", txt)
	}
	running, err := f.ledger.Get(context.Background(), "slow", f.healthy)
	must(t, err)
	must(t, f.ledger.ReportProgress(context.Background(), "slow", f.healthy, running.Token, 3, 10, "batch 3 of 10"))
	waitJS(t, tb, "the live progress", `(document.getElementById('job-progress-text') || {}).textContent === '3 of 10 (30%)'`)
	if txt := evalJS[string](t, tb, `document.getElementById('job-progress').textContent`); !strings.Contains(txt, "batch 3 of 10") || !strings.Contains(txt, "attempt 1") {
		t.Errorf("progress: %q", txt)
	}
	// The page shows the attempt's token, never beside its owner (the
	// worker id): together they are the attempt's credential.
	if txt := evalJS[string](t, tb, `document.getElementById('main').textContent`); !strings.Contains(txt, running.Token.String()) || strings.Contains(txt, "live-worker") {
		t.Errorf("the job page shows the token %s beside its owner live-worker, or not the token:\n%s", running.Token, txt)
	}
	// Operator actions are listed with who and why.
	must(t, tb.page.Eval(tb.ctx, `location.hash = '#/events/operator'`, nil))
	waitJS(t, tb, "the operator actions", `document.getElementById('main').dataset.view === 'events' && document.querySelectorAll('#events tbody tr').length === 3`)
	if txt := evalJS[string](t, tb, `document.querySelector('#events tbody').textContent`); !strings.Contains(txt, "operator:bob: gateway maintenance") ||
		!strings.Contains(txt, "cancel") {
		t.Errorf("operator actions: %q", txt)
	}

	// Search by operation id finds the review job.
	must(t, tb.page.Type(tb.ctx, "#search-q", "op-charge-2"))
	must(t, tb.page.Click(tb.ctx, `#search button`))
	waitJS(t, tb, "search results", `!!document.querySelector('#results a[data-job=`+jsString(f.review)+`]')`)

	// Resolve the review job from the "uncertain & review" page.
	must(t, tb.page.Click(tb.ctx, `nav a[data-nav="attention"]`))
	btn := `div.resolve[data-resolve="` + f.review + `"] button[data-decision="succeeded"]`
	waitJS(t, tb, "the resolve buttons", `!!document.querySelector(`+jsString(btn)+`)`)
	if txt := evalJS[string](t, tb, `document.getElementById('uncertain').textContent`); !strings.Contains(txt, xss) {
		t.Errorf("the uncertain card does not show its error as text: %q", txt)
	}
	screenshot(t, tb, "attention.png")
	must(t, tb.page.Type(tb.ctx, `div.resolve[data-resolve="`+f.review+`"] input.note`, "confirmed in the gateway's report"))
	must(t, tb.page.Click(tb.ctx, btn))
	if err := redistest.Wait(f.rdb, f.ledger.JobKey("default", f.review), testsignal.DefaultTimeout, func() bool {
		return f.state("default", f.review) == jobs.Succeeded
	}); err != nil {
		status := evalJS[string](t, tb, `(document.querySelector('div.resolve .status') || {}).textContent || ''`)
		t.Fatalf("the click did not resolve the job: %v (state %s, status %q)", err, f.state("default", f.review), status)
	}
	hist, err := f.ledger.History(context.Background(), "default", f.review)
	must(t, err)
	if last := hist[len(hist)-1]; last.Actor != "operator:"+user || last.Decision != "succeeded" || last.Note != "confirmed in the gateway's report" {
		t.Fatalf("resolution in the ledger: %+v", last)
	}
	// The page re-renders without it; its own page shows the new state.
	waitJS(t, tb, "the review list to empty", `!document.querySelector(`+jsString(btn)+`) && document.getElementById('review').textContent.includes('(0)')`)
	must(t, tb.page.Eval(tb.ctx, `location.hash = `+jsString("#/job/default/"+f.review), nil))
	waitJS(t, tb, "the resolved job", `document.getElementById('main').dataset.view === 'job' && document.querySelector('h1 .badge').textContent === 'succeeded'`)
	if txt := evalJS[string](t, tb, `document.querySelector('table.history').textContent`); !strings.Contains(txt, "actor=operator:"+user) {
		t.Errorf("history on the page: %q", txt)
	}
	screenshot(t, tb, "resolved.png")
	if evalJS[bool](t, tb, `[...document.getElementById('main').childNodes].some((n) => n.nodeType === Node.TEXT_NODE)`) {
		t.Error("stray text (a null or undefined rendered as text) at the top of the page")
	}

	if p := watch.list(); len(p) > 0 {
		t.Fatalf("the page misbehaved:\n%s", strings.Join(p, "\n"))
	}
}

// TestBrowserWatch checks the watch the browser tests rely on: a page that
// opens a dialog, throws, logs console errors and breaks its content
// security policy has each recorded.
func TestBrowserWatch(t *testing.T) {
	exe := browser.NeedChromium(t)
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "script-src 'self'")
		fmt.Fprint(w, `<!doctype html><title>bad</title><script>document.title = 'inline ran'</script><script src="/bad.js"></script>`)
	})
	mux.HandleFunc("/bad.js", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		fmt.Fprint(w, `alert('injected'); console.error('console says no'); console.assert(false, 'assert says no');
setTimeout(() => { throw new Error('thrown later') }, 0);`)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	tb, watch := openBrowser(t, exe)
	must(t, tb.page.Navigate(tb.ctx, srv.URL+"/"))
	want := []string{"dialog opened: alert injected", "console.error: ", "console says no", "console.assert: ", "assert says no",
		"exception: Uncaught Error: thrown later", "log security: ", "Content Security Policy"}
	all, missing := "", ""
	t.Cleanup(func() {
		if t.Failed() && missing != "" {
			t.Logf("the watch missed %q; it recorded:\n%s", missing, all)
		}
	})
	watch.changes.Await("every problem recorded", func() bool {
		all, missing = strings.Join(watch.list(), "\n"), ""
		for _, w := range want {
			if !strings.Contains(all, w) {
				missing = w
				return false
			}
		}
		return true
	})
	if title := evalJS[string](t, tb, `document.title`); title != "bad" {
		t.Errorf("the inline script ran despite the policy: title %q", title)
	}
}
