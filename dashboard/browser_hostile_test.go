package dashboard_test

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/internal/browser"
	"github.com/fencedq/fencedq/jobs"
)

type hostileArgs struct{}

func (hostileArgs) Kind() string {
	return `"><img/src=x/onerror=window.__pwned=1>javascript:` + "\u202e" + `'<b>`
}

// TestBrowserHostileNamesAreInert: a queue named like a javascript: URL,
// as long as a queue may be, and a kind holding quotes, angle brackets, a
// javascript: string and a right-to-left override are shown as text on
// every page that names them: no element is built from them, no link
// leads anywhere but the dashboard's own pages, no attribute a reader
// sees (title, aria-label, placeholder, alt) nor text holds the override
// as it is, and nothing pushes the page wider than the window.
func TestBrowserHostileNamesAreInert(t *testing.T) {
	exe := browser.NeedChromium(t)
	f := newFixture(t)
	q := "javascript:alert.1-" + strings.Repeat("x", 81)
	id := f.enqueue(hostileArgs{}, jobs.Queue(q))
	f.claimOne(q, id, "w", time.Millisecond) // stuck at once
	f.enqueue(hostileArgs{}, jobs.Queue(q))
	srv := httptest.NewServer(f.handler(dashboard.Options{}))
	t.Cleanup(srv.Close)
	tb, _ := openBrowser(t, exe)
	const check = `(() => {
		const main = document.getElementById('main');
		if (window.__pwned) return 'a handler ran';
		if (main.querySelector('img, b, script, iframe')) return 'an element was built from a name';
		for (const a of document.querySelectorAll('a[href]')) {
			const h = a.getAttribute('href');
			if (!(h.startsWith('#/') || h === 'api/login' || h.startsWith('api/'))) return 'a link to ' + h;
		}
		const seen = [main.innerText];
		for (const e of document.querySelectorAll('*')) {
			for (const k of ['title', 'aria-label', 'placeholder', 'alt']) if (e.hasAttribute(k)) seen.push(e.getAttribute(k));
		}
		if (/[\p{Cc}\p{Cf}]/u.test(seen.join('').replace(/[\t\n]/g, ''))) return 'a format character shown as it is';
		if (document.documentElement.scrollWidth > document.documentElement.clientWidth) return 'the page is wider than the window';
		return '';
	})()`
	for _, pg := range []struct{ hash, ready string }{
		{"#/", `!!document.querySelector('#queues')`},
		{"#/jobs?state=pending", `!!document.querySelector('#jobs a[data-job]')`},
		{"#/jobs?queue=" + q, `!!document.querySelector('#jobs a[data-job]')`},
		{"#/stuck", `!!document.querySelector('#stuck a[data-job=` + jsString(id) + `]')`},
		{"#/job/" + q + "/" + id, `document.getElementById('main').dataset.view === 'job' && document.getElementById('main').dataset.ready === '1'`},
		{"#/history", `document.getElementById('main').dataset.view === 'history' && document.getElementById('main').dataset.ready === '1'`},
	} {
		must(t, tb.page.Navigate(tb.ctx, srv.URL+"/"+pg.hash))
		waitJS(t, tb, pg.hash, pg.ready)
		if got := evalJS[string](t, tb, check); got != "" {
			t.Errorf("%s: %s: %q", pg.hash, got, evalJS[string](t, tb, `document.getElementById('main').innerText`))
		}
		if !strings.Contains(evalJS[string](t, tb, `document.getElementById('main').innerText`), `\u202e`) && strings.HasPrefix(pg.hash, "#/job/") {
			t.Errorf("%s: the kind's override is not shown escaped", pg.hash)
		}
	}
}
