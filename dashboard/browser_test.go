package dashboard_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/jobs"
)

// chromiumPath is where Debian's chromium package puts the browser. The
// test never downloads one.
const chromiumPath = "/usr/bin/chromium"

// needChromium returns the browser's path, or fails (under CI) or skips the
// test, naming the package to install.
func needChromium(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err == nil {
		return chromiumPath
	}
	msg := fmt.Sprintf("headless Chromium is not installed at %s; install it with `apt-get install -y chromium` (Debian package chromium)", chromiumPath)
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	fmt.Fprintln(os.Stderr, "SKIPPING the real-browser dashboard test: "+msg)
	t.Skip("SKIPPING: " + msg)
	return ""
}

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
}

func (w *pageWatch) add(s string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.problems = append(w.problems, s)
}

func (w *pageWatch) list() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.problems...)
}

func watchPage(ctx context.Context, w *pageWatch) {
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	exceptions := chromedp.Events(ctx, runtime.ExceptionThrown)
	console := chromedp.Events(ctx, runtime.ConsoleAPICalled)
	logs := chromedp.Events(ctx, cdplog.EntryAdded)
	go func() {
		for ev, err := range dialogs {
			if err != nil {
				return
			}
			w.add("dialog opened: " + string(ev.Type) + " " + ev.Message)
			_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
		}
	}()
	go func() {
		for ev, err := range exceptions {
			if err != nil {
				return
			}
			d := ev.ExceptionDetails
			msg := d.Text
			if d.Exception != nil {
				msg += " " + d.Exception.Description
			}
			w.add("exception: " + msg)
		}
	}()
	go func() {
		for ev, err := range console {
			if err != nil {
				return
			}
			if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeAssert {
				b, _ := json.Marshal(ev.Args)
				w.add("console." + string(ev.Type) + ": " + string(b))
			}
		}
	}()
	go func() {
		for ev, err := range logs {
			if err != nil {
				return
			}
			e := ev.Entry
			// Failed loads the test causes on purpose are not problems; the
			// browser's own favicon probe outside the mount is not either.
			if e.Level == cdplog.EntryLevelError && !strings.Contains(e.URL, "favicon.ico") {
				w.add("log " + string(e.Source) + ": " + e.Text + " " + e.URL)
			}
		}
	}()
}

// waitJS evaluates expr until it is true (Runtime.evaluate is not subject
// to the page's CSP, unlike a predicate compiled inside the page).
func waitJS(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById('main').textContent`))
			t.Fatalf("waiting for %s: %v (%s); page text: %.2000s", what, err, expr, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func evalJS[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
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

// openBrowser starts headless Chromium for one test and returns a context
// for it, with a watch on what must never happen on a page. Every request
// carries the operator's basic-auth credentials, as after signing in
// through api/login.
func openBrowser(t *testing.T, exe string) (context.Context, *pageWatch) {
	t.Helper()
	profile := t.TempDir()
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(exe),
		chromedp.UserDataDir(profile),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("no-proxy-server", true),
		chromedp.WindowSize(1280, 1000),
	)
	t.Cleanup(cancelAlloc) // stops the browser before the profile directory is removed (cleanups run last-in first-out)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil { // starts the browser, with no timeout
		t.Fatalf("start %s: %v", exe, err)
	}
	ctx, cancelRun := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(cancelRun)

	watch := &pageWatch{}
	watchPage(ctx, watch)
	// Every request of the page carries the operator's basic-auth
	// credentials, as after signing in through api/login.
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
	_, err := chromedp.Call(ctx, network.Enable, network.EnableParams{})
	must(t, err)
	_, err = chromedp.Call(ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Authorization": auth}})
	must(t, err)
	_, err = chromedp.Call(ctx, cdplog.Enable, cdp.Empty{})
	must(t, err)

	return ctx, watch
}

// TestBrowser drives the dashboard in headless Chromium: the overview with
// real jobs, a job whose args and error hold a <script> payload (shown as
// text, never run), and an operator resolving a review job.
func TestBrowser(t *testing.T) {
	exe := needChromium(t)
	f := newFixture(t).seed()
	h := f.handler(dashboard.Options{Username: user, Password: pass})
	mux := http.NewServeMux()
	mux.Handle("/ops/", http.StripPrefix("/ops", h))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	ctx, watch := openBrowser(t, exe)

	// Overview: counts render from the ledger.
	must(t, chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/ops/")))
	count := func(q, s string) string {
		return `document.querySelector('#queues td.count[data-queue=` + jsString(q) + `][data-state=` + jsString(s) + `]')`
	}
	waitJS(t, ctx, "the overview counts", `(() => { const c = `+count("default", "succeeded")+`; return !!c && c.textContent === '1'; })()`)
	for s, want := range map[string]string{"pending": "1", "uncertain": "1", "review": "1", "dead": "1", "running": "0", "cancelled": "1"} {
		if got := evalJS[string](t, ctx, count("default", s)+`.textContent`); got != want {
			t.Errorf("overview %s = %q, want %q", s, got, want)
		}
	}
	if got := evalJS[string](t, ctx, count("slow", "running")+`.textContent`); got != "2" {
		t.Errorf("overview slow running = %q", got)
	}
	// The paused queue is marked in its row and named above the table.
	if n := evalJS[int](t, ctx, `document.querySelectorAll('#queues .badge.paused').length`); n != 1 ||
		!evalJS[bool](t, ctx, `!!document.querySelector('#queues tr[data-queue="slow"] .badge.paused')`) {
		t.Errorf("%d paused badges, or not on queue slow", n)
	}
	if txt := evalJS[string](t, ctx, `document.getElementById('paused').textContent`); !strings.Contains(txt, "slow by operator:bob") ||
		!strings.Contains(txt, "gateway maintenance") {
		t.Errorf("paused line: %q", txt)
	}
	if txt := evalJS[string](t, ctx, `document.getElementById('reconciler').textContent`); !strings.Contains(txt, "no leader") {
		t.Errorf("reconciler line: %q", txt)
	}
	if txt := evalJS[string](t, ctx, `document.getElementById('session').textContent`); txt != "signed in as "+user {
		t.Errorf("session: %q", txt)
	}
	screenshot(t, ctx, "overview.png")

	// Open the uncertain job from its count, then from the list.
	must(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#queues td.count[data-queue="default"][data-state="uncertain"] a`))))
	waitJS(t, ctx, "the uncertain list", `!!document.querySelector('#jobs a[data-job=`+jsString(f.uncertain)+`]')`)
	must(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#jobs a[data-job="`+f.uncertain+`"]`))))
	waitJS(t, ctx, "the job page", `document.getElementById('main').dataset.view === 'job' && !!document.getElementById('job-error')`)

	// The payload is text: the literal markup is in the DOM's text, no
	// element came from it, nothing ran.
	if txt := evalJS[string](t, ctx, `document.getElementById('job-error').textContent`); !strings.Contains(txt, xss) {
		t.Errorf("error text %q lacks the literal payload", txt)
	}
	if txt := evalJS[string](t, ctx, `document.getElementById('job-args').textContent`); !strings.Contains(txt, `"memo": "`+xss+`"`) ||
		!strings.Contains(txt, `"card": "`+jobs.Redacted+`"`) || strings.Contains(txt, secret) {
		t.Errorf("args text: %q", txt)
	}
	if n := evalJS[int](t, ctx, `document.querySelectorAll('main script, main img, main iframe').length`); n != 0 {
		t.Errorf("%d elements were created from payload text", n)
	}
	if txt := evalJS[string](t, ctx, `document.querySelector('#attempts tbody').textContent`); !strings.Contains(txt, "uncertain") || !strings.Contains(txt, xss) {
		t.Errorf("attempts: %q", txt)
	}
	if evalJS[bool](t, ctx, `document.documentElement.outerHTML.includes('<script>alert(1)')`) {
		t.Error("the payload is in the document as markup")
	}
	screenshot(t, ctx, "job.png")

	// The running job an operator asked to stop says so.
	must(t, chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`location.hash = `+jsString("#/job/slow/"+f.healthy))))
	waitJS(t, ctx, "the job asked to stop", `document.getElementById('main').dataset.view === 'job' && !!document.getElementById('job-cancel')`)
	if txt := evalJS[string](t, ctx, `document.getElementById('job-cancel').textContent`); !strings.Contains(txt, "operator:alice") {
		t.Errorf("cancel request: %q", txt)
	}
	// Operator actions are listed with who and why.
	must(t, chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`location.hash = '#/events/operator'`)))
	waitJS(t, ctx, "the operator actions", `document.getElementById('main').dataset.view === 'events' && document.querySelectorAll('#events tbody tr').length === 3`)
	if txt := evalJS[string](t, ctx, `document.querySelector('#events tbody').textContent`); !strings.Contains(txt, "operator:bob: gateway maintenance") ||
		!strings.Contains(txt, "cancel") {
		t.Errorf("operator actions: %q", txt)
	}

	// Search by operation id finds the review job.
	must(t, chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.ID("search-q"), "op-charge-2"),
		chromedp.Click(chromedp.CSS(`#search button`)),
	))
	waitJS(t, ctx, "search results", `!!document.querySelector('#results a[data-job=`+jsString(f.review)+`]')`)

	// Resolve the review job from the "uncertain & review" page.
	must(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`nav a[data-nav="attention"]`))))
	btn := `div.resolve[data-resolve="` + f.review + `"] button[data-decision="succeeded"]`
	waitJS(t, ctx, "the resolve buttons", `!!document.querySelector(`+jsString(btn)+`)`)
	if txt := evalJS[string](t, ctx, `document.getElementById('uncertain').textContent`); !strings.Contains(txt, xss) {
		t.Errorf("the uncertain card does not show its error as text: %q", txt)
	}
	screenshot(t, ctx, "attention.png")
	must(t, chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.CSS(`div.resolve[data-resolve="`+f.review+`"] input.note`), "confirmed in the gateway's report"),
		chromedp.Click(chromedp.CSS(btn)),
	))
	deadline := time.Now().Add(15 * time.Second)
	for f.state("default", f.review) != jobs.Succeeded {
		if time.Now().After(deadline) {
			status := evalJS[string](t, ctx, `(document.querySelector('div.resolve .status') || {}).textContent || ''`)
			t.Fatalf("the click did not resolve the job (state %s, status %q)", f.state("default", f.review), status)
		}
		time.Sleep(50 * time.Millisecond)
	}
	hist, err := f.ledger.History(context.Background(), "default", f.review)
	must(t, err)
	if last := hist[len(hist)-1]; last.Actor != "operator:"+user || last.Decision != "succeeded" || last.Note != "confirmed in the gateway's report" {
		t.Fatalf("resolution in the ledger: %+v", last)
	}
	// The page re-renders without it; its own page shows the new state.
	waitJS(t, ctx, "the review list to empty", `!document.querySelector(`+jsString(btn)+`) && document.getElementById('review').textContent.includes('(0)')`)
	must(t, chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`location.hash = `+jsString("#/job/default/"+f.review))))
	waitJS(t, ctx, "the resolved job", `document.getElementById('main').dataset.view === 'job' && document.querySelector('h1 .badge').textContent === 'succeeded'`)
	if txt := evalJS[string](t, ctx, `document.querySelector('table.history').textContent`); !strings.Contains(txt, "actor=operator:"+user) {
		t.Errorf("history on the page: %q", txt)
	}
	screenshot(t, ctx, "resolved.png")
	if evalJS[bool](t, ctx, `[...document.getElementById('main').childNodes].some((n) => n.nodeType === Node.TEXT_NODE)`) {
		t.Error("stray text (a null or undefined rendered as text) at the top of the page")
	}

	if p := watch.list(); len(p) > 0 {
		t.Fatalf("the page misbehaved:\n%s", strings.Join(p, "\n"))
	}
}
