package dashboard_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/jobs"
)

func TestSecurityHeaders(t *testing.T) {
	f := newFixture(t)
	h := f.handler(dashboard.Options{Username: user, Password: pass})
	for _, tc := range []struct{ method, path string }{
		{"GET", "/"}, {"GET", "/assets/app.js"}, {"GET", "/assets/style.css"}, {"GET", "/api/overview"},
		{"GET", "/api/nope"}, {"GET", "/nope"}, {"GET", "/assets/"}, {"POST", "/api/jobs/default/x/resolve"},
	} {
		res, _ := call(t, h, httptest.NewRequest(tc.method, tc.path, nil))
		csp := res.Header.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'self'", "script-src 'self'", "frame-ancestors 'none'", "object-src 'none'", "base-uri 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("%s %s: CSP %q lacks %s", tc.method, tc.path, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") || strings.Contains(csp, "*") {
			t.Errorf("%s %s: permissive CSP %q", tc.method, tc.path, csp)
		}
		if res.Header.Get("X-Content-Type-Options") != "nosniff" || res.Header.Get("Referrer-Policy") != "no-referrer" ||
			res.Header.Get("X-Frame-Options") != "DENY" {
			t.Errorf("%s %s: headers %v", tc.method, tc.path, res.Header)
		}
	}
	if res, _ := call(t, h, httptest.NewRequest("GET", "/assets/", nil)); res.StatusCode != http.StatusNotFound {
		t.Errorf("asset directory listing: %d", res.StatusCode)
	}
	res, _ := call(t, h, httptest.NewRequest("GET", "/assets/app.js", nil))
	if ct := res.Header.Get("Content-Type"); !strings.Contains(ct, "javascript") {
		t.Errorf("app.js content type %q", ct)
	}
}

// TestAssetsBuildDOMSafely guards the page code: no markup from strings,
// no inline script or style the CSP would have to allow, no foreign URLs.
func TestAssetsBuildDOMSafely(t *testing.T) {
	raw, err := os.ReadFile("assets/app.js")
	must(t, err)
	// The SVG namespace is a name, not a URL the page loads.
	js := strings.ReplaceAll(string(raw), `'http://www.w3.org/2000/svg'`, "")
	for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function",
		"createContextualFragment", "DOMParser", "http://", "https://", "fetch('/", "srcdoc"} {
		if strings.Contains(js, bad) {
			t.Errorf("app.js uses %s", bad)
		}
	}
	html, err := os.ReadFile("assets/index.html")
	must(t, err)
	page := string(html)
	for _, m := range regexp.MustCompile(`<script[^>]*>`).FindAllString(page, -1) {
		if !strings.Contains(m, ` src="assets/`) {
			t.Errorf("inline or foreign script: %s", m)
		}
	}
	if regexp.MustCompile(`(?i)<style|\sstyle=|\son[a-z]+=|javascript:`).MatchString(page) {
		t.Error("index.html has inline style, an event handler attribute or a javascript: URL")
	}
	for _, m := range regexp.MustCompile(`(?:src|href)="([^"]*)"`).FindAllStringSubmatch(page, -1) {
		if strings.HasPrefix(m[1], "/") || strings.Contains(m[1], "//") {
			t.Errorf("absolute URL %q breaks mounting under a prefix", m[1])
		}
	}
}

// TestMountedUnderPrefix serves the dashboard below path prefixes over a
// real HTTP server and acts through it with a cookie jar, as a browser does.
func TestMountedUnderPrefix(t *testing.T) {
	f := newFixture(t)
	id := f.reviewJob("default", echoArgs{N: 1}, "op-prefixed")
	h := f.handler(dashboard.Options{Username: user, Password: pass})
	mux := http.NewServeMux()
	mux.Handle("/ops/", http.StripPrefix("/ops", h))
	mux.Handle("/team/a/dash/", http.StripPrefix("/team/a/dash/", h)) // trailing-slash prefix
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	for _, base := range []string{"/ops", "/team/a/dash"} {
		// The mount point without its slash redirects, relatively, to it.
		res, err := noRedirect.Get(srv.URL + base)
		must(t, err)
		res.Body.Close()
		// (http.ServeMux itself redirects a subtree pattern's bare path.)
		if res.StatusCode/100 != 3 || !strings.HasSuffix(res.Header.Get("Location"), base+"/") {
			t.Errorf("%s: %d %q", base, res.StatusCode, res.Header.Get("Location"))
		}
		page := get(t, srv.URL+base+"/", http.StatusOK, "text/html")
		for _, m := range regexp.MustCompile(`(?:src|href)="(assets/[^"]+)"`).FindAllStringSubmatch(page, -1) {
			get(t, srv.URL+base+"/"+m[1], http.StatusOK, "")
		}
		var ov struct {
			Queues []struct{ Name string } `json:"queues"`
		}
		must(t, json.Unmarshal([]byte(get(t, srv.URL+base+"/api/overview", http.StatusOK, "application/json")), &ov))
		if len(ov.Queues) != 1 || ov.Queues[0].Name != "default" {
			t.Fatalf("%s overview: %+v", base, ov)
		}
		get(t, srv.URL+base+"/api/jobs/default/"+id, http.StatusOK, "application/json")
	}
	// The direct mux also redirects /ops; the handler's own redirect is relative.
	rr := httptest.NewRecorder()
	r := httptest.NewRequest("GET", "/ops", nil)
	http.StripPrefix("/ops", h).ServeHTTP(rr, r)
	if rr.Code != http.StatusMovedPermanently || rr.Header().Get("Location") != "ops/" {
		t.Fatalf("bare mount point: %d %q", rr.Code, rr.Header().Get("Location"))
	}

	// Act under the prefix: the CSRF cookie is scoped to it and comes back.
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	res, err := c.Get(srv.URL + "/ops/api/csrf")
	must(t, err)
	var tok struct{ Token string }
	must(t, json.NewDecoder(res.Body).Decode(&tok))
	res.Body.Close()
	var cookiePath string
	for _, ck := range res.Cookies() {
		if ck.Name == "fencedq_csrf" {
			cookiePath = ck.Path
		}
	}
	if cookiePath != "/ops/" {
		t.Fatalf("csrf cookie path %q", cookiePath)
	}
	req, _ := http.NewRequest("POST", srv.URL+"/ops/api/jobs/default/"+id+"/resolve", strings.NewReader(`{"decision":"dead","note":"duplicate charge"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-CSRF-Token", tok.Token)
	req.SetBasicAuth(user, pass)
	res, err = c.Do(req)
	must(t, err)
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || f.state("default", id) != jobs.Dead {
		t.Fatalf("resolve under prefix: %d %s", res.StatusCode, b)
	}
}

func get(t *testing.T, url string, status int, ctype string) string {
	t.Helper()
	res, err := http.Get(url)
	must(t, err)
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != status || !strings.HasPrefix(res.Header.Get("Content-Type"), ctype) {
		t.Fatalf("GET %s: %d %q %s", url, res.StatusCode, res.Header.Get("Content-Type"), b)
	}
	return string(b)
}
