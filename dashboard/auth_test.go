package dashboard_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/jobs"
)

const (
	user  = "admin"
	pass  = "correct horse battery"
	token = "script-token-0123456789"
)

// csrf fetches a CSRF token and its cookie from h.
func csrf(t *testing.T, h http.Handler) (string, *http.Cookie) {
	t.Helper()
	res, body := call(t, h, httptest.NewRequest(http.MethodGet, "/api/csrf", nil))
	if res.StatusCode != http.StatusOK {
		t.Fatalf("csrf: %d %s", res.StatusCode, body)
	}
	var v struct{ Token string }
	must(t, json.Unmarshal(body, &v))
	for _, c := range res.Cookies() {
		if c.Name == "fencedq_csrf" {
			if c.Value != v.Token || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" {
				t.Fatalf("csrf cookie %+v, token %q", c, v.Token)
			}
			return v.Token, c
		}
	}
	t.Fatal("no csrf cookie")
	return "", nil
}

type reqOpt func(*http.Request)

func basic(u, p string) reqOpt { return func(r *http.Request) { r.SetBasicAuth(u, p) } }
func bearer(tok string) reqOpt {
	return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok) }
}
func withCookie(c *http.Cookie) reqOpt { return func(r *http.Request) { r.AddCookie(c) } }
func header(k, v string) reqOpt        { return func(r *http.Request) { r.Header.Set(k, v) } }

func resolveReq(queue, id, body string, opts ...reqOpt) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/api/jobs/"+queue+"/"+id+"/resolve", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	for _, o := range opts {
		o(r)
	}
	return r
}

func errCode(t *testing.T, body []byte) string {
	t.Helper()
	var e struct{ Code string }
	_ = json.Unmarshal(body, &e)
	return e.Code
}

func TestResolveReadOnlyWithoutCredentials(t *testing.T) {
	f := newFixture(t)
	id := f.reviewJob("default", echoArgs{N: 1}, "op-ro")
	h := f.handler(dashboard.Options{})
	tok, c := csrf(t, h)
	res, body := call(t, h, resolveReq("default", id, `{"decision":"succeeded"}`,
		basic(user, pass), withCookie(c), header("X-CSRF-Token", tok)))
	if res.StatusCode != http.StatusForbidden || errCode(t, body) != "read_only" {
		t.Fatalf("read-only resolve: %d %s", res.StatusCode, body)
	}
	if s := f.state("default", id); s != jobs.Review {
		t.Fatalf("job moved to %s", s)
	}
	var sess struct {
		ActionsEnabled bool `json:"actions_enabled"`
		Authenticated  bool `json:"authenticated"`
	}
	getJSON(t, h, "/api/session", &sess)
	if sess.ActionsEnabled || sess.Authenticated {
		t.Fatalf("session %+v", sess)
	}
	if res, _ := call(t, h, httptest.NewRequest(http.MethodGet, "/api/login", nil)); res.StatusCode != http.StatusForbidden {
		t.Fatalf("login without credentials configured: %d", res.StatusCode)
	}
}

func TestResolveNeedsAuthAndCSRF(t *testing.T) {
	f := newFixture(t)
	id := f.reviewJob("default", echoArgs{N: 1, Secret: secret, Note: "visible"}, "op-review")
	dead := f.deadJob("default", "op-dead")
	h := f.handler(dashboard.Options{Username: user, Password: pass, Token: token})
	tok, c := csrf(t, h)
	other, err := dashboard.New(f.insp, f.client, dashboard.Options{Username: user, Password: pass})
	must(t, err)
	forged, forgedCookie := csrf(t, other) // well-formed, signed with another key

	body := `{"decision":"succeeded","note":"confirmed with the bank"}`
	refused := []struct {
		name   string
		req    *http.Request
		status int
		code   string
	}{
		{"no credentials", resolveReq("default", id, body, withCookie(c), header("X-CSRF-Token", tok)), 401, "unauthorized"},
		{"wrong password", resolveReq("default", id, body, basic(user, "guess"), withCookie(c), header("X-CSRF-Token", tok)), 401, "unauthorized"},
		{"wrong user", resolveReq("default", id, body, basic("root", pass), withCookie(c), header("X-CSRF-Token", tok)), 401, "unauthorized"},
		{"wrong token", resolveReq("default", id, body, bearer("nope")), 401, "unauthorized"},
		{"no csrf token", resolveReq("default", id, body, basic(user, pass)), 403, "csrf"},
		{"csrf header without cookie", resolveReq("default", id, body, basic(user, pass), header("X-CSRF-Token", tok)), 403, "csrf"},
		{"csrf cookie without header", resolveReq("default", id, body, basic(user, pass), withCookie(c)), 403, "csrf"},
		{"csrf mismatch", resolveReq("default", id, body, basic(user, pass), withCookie(c), header("X-CSRF-Token", forged)), 403, "csrf"},
		{"csrf from another key", resolveReq("default", id, body, basic(user, pass), withCookie(forgedCookie), header("X-CSRF-Token", forged)), 403, "csrf"},
		{"cross-site fetch", resolveReq("default", id, body, basic(user, pass), withCookie(c), header("X-CSRF-Token", tok),
			header("Sec-Fetch-Site", "cross-site")), 403, "cross_origin"},
		{"foreign origin", resolveReq("default", id, body, basic(user, pass), withCookie(c), header("X-CSRF-Token", tok),
			header("Origin", "http://evil.example")), 403, "cross_origin"},
		{"bad decision", resolveReq("default", id, `{"decision":"review"}`, basic(user, pass), withCookie(c), header("X-CSRF-Token", tok)), 400, "invalid"},
		{"unknown field", resolveReq("default", id, `{"decision":"dead","actor":"someone else"}`, basic(user, pass), withCookie(c), header("X-CSRF-Token", tok)), 400, "invalid"},
		{"missing job", resolveReq("default", "no-such-job", body, basic(user, pass), withCookie(c), header("X-CSRF-Token", tok)), 404, "not_found"},
	}
	formReq := resolveReq("default", id, "decision=succeeded", basic(user, pass), withCookie(c), header("X-CSRF-Token", tok))
	formReq.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	refused = append(refused, struct {
		name   string
		req    *http.Request
		status int
		code   string
	}{"form body", formReq, 415, "invalid"})
	for _, tc := range refused {
		res, b := call(t, h, tc.req)
		if res.StatusCode != tc.status || errCode(t, b) != tc.code {
			t.Errorf("%s: %d %s, want %d %s", tc.name, res.StatusCode, b, tc.status, tc.code)
		}
		if tc.status == 401 && !strings.HasPrefix(res.Header.Get("WWW-Authenticate"), "Basic ") {
			t.Errorf("%s: WWW-Authenticate %q", tc.name, res.Header.Get("WWW-Authenticate"))
		}
		if s := f.state("default", id); s != jobs.Review {
			t.Fatalf("%s: the refused request moved the job to %s", tc.name, s)
		}
	}

	// Credentials and the CSRF token: the decision reaches the ledger.
	res, b := call(t, h, resolveReq("default", id, body, basic(user, pass), withCookie(c), header("X-CSRF-Token", tok),
		header("Sec-Fetch-Site", "same-origin"), header("Origin", "http://example.com")))
	if res.StatusCode != http.StatusOK {
		t.Fatalf("resolve: %d %s", res.StatusCode, b)
	}
	var out struct{ Job jobJSON }
	must(t, json.Unmarshal(b, &out))
	if out.Job.State != "succeeded" || f.state("default", id) != jobs.Succeeded {
		t.Fatalf("after resolve: %+v, ledger %s", out.Job, f.state("default", id))
	}
	hist, err := f.ledger.History(context.Background(), "default", id)
	must(t, err)
	last := hist[len(hist)-1]
	if last.Event != "resolve" || last.Decision != "succeeded" || last.Actor != "operator:"+user ||
		last.Note != "confirmed with the bank" || last.From != "review" {
		t.Fatalf("history: %+v", last)
	}
	// Deciding again finds the job in the wrong state.
	res, b = call(t, h, resolveReq("default", id, body, basic(user, pass), withCookie(c), header("X-CSRF-Token", tok)))
	if res.StatusCode != http.StatusConflict || errCode(t, b) != "wrong_state" {
		t.Fatalf("second resolve: %d %s", res.StatusCode, b)
	}

	// A script with the bearer token needs no CSRF token: re-run a dead job.
	res, b = call(t, h, resolveReq("default", dead, `{"decision":"rerun","note":"fixed the card"}`, bearer(token)))
	if res.StatusCode != http.StatusOK {
		t.Fatalf("token resolve: %d %s", res.StatusCode, b)
	}
	rec, err := f.ledger.Get(context.Background(), "default", dead)
	must(t, err)
	if rec.State != jobs.Pending || rec.Runs != 1 {
		t.Fatalf("re-run: %+v", rec)
	}
	hist, _ = f.ledger.History(context.Background(), "default", dead)
	if last := hist[len(hist)-1]; last.Actor != "operator:token" || last.Decision != "rerun" {
		t.Fatalf("re-run history: %+v", last)
	}

	// The operator's actions are logged with the job and the actor, never
	// the args; refused credentials are logged without them.
	logs := f.logs.String()
	for _, want := range []string{`"job_id":"` + id + `"`, `"actor":"admin"`, `"decision":"succeeded"`, `"job_id":"` + dead + `"`,
		"dashboard: rejected credentials", "dashboard: action without a valid CSRF token refused", "dashboard: cross-origin action refused"} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %s:\n%s", want, logs)
		}
	}
	for _, leak := range []string{secret, "visible", pass, "guess", token, tok} {
		if strings.Contains(logs, leak) {
			t.Errorf("logs contain %q:\n%s", leak, logs)
		}
	}
}

func TestSessionAndLogin(t *testing.T) {
	f := newFixture(t)
	h := f.handler(dashboard.Options{Username: user, Password: pass})
	type sess struct {
		ActionsEnabled bool   `json:"actions_enabled"`
		BasicAuth      bool   `json:"basic_auth"`
		Authenticated  bool   `json:"authenticated"`
		Actor          string `json:"actor"`
	}
	var s sess
	getJSON(t, h, "/api/session", &s)
	if !s.ActionsEnabled || !s.BasicAuth || s.Authenticated {
		t.Fatalf("anonymous session: %+v", s)
	}
	r := httptest.NewRequest(http.MethodGet, "/api/session", nil)
	r.SetBasicAuth(user, pass)
	res, body := call(t, h, r)
	must(t, json.Unmarshal(body, &s))
	if res.StatusCode != 200 || !s.Authenticated || s.Actor != user {
		t.Fatalf("signed-in session: %+v", s)
	}

	res, _ = call(t, h, httptest.NewRequest(http.MethodGet, "/api/login", nil))
	if res.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(res.Header.Get("WWW-Authenticate"), `Basic realm="fencedq dashboard"`) {
		t.Fatalf("login challenge: %d %q", res.StatusCode, res.Header.Get("WWW-Authenticate"))
	}
	r = httptest.NewRequest(http.MethodGet, "/api/login", nil)
	r.SetBasicAuth(user, pass)
	res, _ = call(t, h, r)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "../" {
		t.Fatalf("login: %d %q", res.StatusCode, res.Header.Get("Location"))
	}
}

func TestProtectReads(t *testing.T) {
	f := newFixture(t)
	h := f.handler(dashboard.Options{Username: user, Password: pass, ProtectReads: true})
	for _, p := range []string{"/", "/assets/app.js", "/api/overview", "/api/jobs?state=dead"} {
		res, _ := call(t, h, httptest.NewRequest(http.MethodGet, p, nil))
		if res.StatusCode != http.StatusUnauthorized || res.Header.Get("Content-Security-Policy") == "" {
			t.Errorf("%s without credentials: %d", p, res.StatusCode)
		}
		r := httptest.NewRequest(http.MethodGet, p, nil)
		r.SetBasicAuth(user, pass)
		if res, body := call(t, h, r); res.StatusCode != http.StatusOK {
			t.Errorf("%s with credentials: %d %s", p, res.StatusCode, body)
		}
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	f := newFixture(t)
	other := jobs.NewClient(f.rdb, jobs.Config{Namespace: f.ns + "-other"})
	t.Cleanup(func() { _ = other.Close() })
	cases := []struct {
		name   string
		insp   *jobs.Inspector
		client *jobs.Client
		opts   dashboard.Options
		want   error
	}{
		{"nothing", nil, nil, dashboard.Options{}, dashboard.ErrNoInspector},
		{"password without user", f.insp, f.client, dashboard.Options{Password: "x"}, dashboard.ErrOptions},
		{"user without password", f.insp, f.client, dashboard.Options{Username: "x"}, dashboard.ErrOptions},
		{"colon in user", f.insp, f.client, dashboard.Options{Username: "a:b", Password: "x"}, dashboard.ErrOptions},
		{"credentials without client", f.insp, nil, dashboard.Options{Token: "t"}, dashboard.ErrOptions},
		{"protect reads without user", f.insp, f.client, dashboard.Options{Token: "t", ProtectReads: true}, dashboard.ErrOptions},
		{"namespace mismatch", f.insp, other, dashboard.Options{}, dashboard.ErrOptions},
		{"bad trusted origin", f.insp, f.client, dashboard.Options{TrustedOrigins: []string{"not a url"}}, dashboard.ErrOptions},
		{"short CSRF key", f.insp, f.client, dashboard.Options{Token: "t", CSRFKey: []byte("secret")}, dashboard.ErrOptions},
		{"token with a trailing space", f.insp, f.client, dashboard.Options{Token: "t "}, dashboard.ErrOptions},
		{"token with a line break", f.insp, f.client, dashboard.Options{Token: "t\nu"}, dashboard.ErrOptions},
	}
	for _, tc := range cases {
		if _, err := dashboard.New(tc.insp, tc.client, tc.opts); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	// A read-only dashboard needs only a ledger; a client alone is enough too.
	if h, err := dashboard.New(f.insp, nil, dashboard.Options{}); err != nil || h.ActionsEnabled() {
		t.Fatalf("ledger only: %v", err)
	}
	if h, err := dashboard.New(nil, f.client, dashboard.Options{Token: "t"}); err != nil || !h.ActionsEnabled() {
		t.Fatalf("client only: %v", err)
	}
}

// The username and TokenActor are the operator names recorded with every
// action, which jobs.Client refuses unless they are 1-200 bytes of UTF-8
// without control characters: New refuses them too, rather than serving a
// dashboard whose every action then fails.
func TestNewRejectsOperatorNamesNoActionTakes(t *testing.T) {
	f := newFixture(t)
	id := f.reviewJob("default", echoArgs{N: 1}, "op-actor")
	long := strings.Repeat("a", jobs.MaxActorLen+1)
	for _, tc := range []struct {
		name string
		opts dashboard.Options
		req  func() *http.Request
	}{
		{"escape in user", dashboard.Options{Username: "ops\x1b[2J", Password: pass}, nil},
		{"blank user", dashboard.Options{Username: "   ", Password: pass}, nil},
		{"long user", dashboard.Options{Username: long, Password: pass}, nil},
		{"invalid UTF-8 user", dashboard.Options{Username: "ops\xff", Password: pass}, nil},
		{"bell in token actor", dashboard.Options{Token: token, TokenActor: "deploy-bot\a"}, nil},
		{"long token actor", dashboard.Options{Token: token, TokenActor: long}, nil},
	} {
		h, err := dashboard.New(f.insp, f.client, tc.opts)
		if errors.Is(err, dashboard.ErrOptions) {
			continue
		}
		t.Errorf("%s: New: %v, want ErrOptions", tc.name, err)
		if err != nil || tc.opts.Token == "" {
			continue
		}
		res, body := call(t, h, resolveReq("default", id, `{"decision":"dead","note":"x"}`, bearer(token)))
		t.Logf("%s: then every action answers %d %s", tc.name, res.StatusCode, body)
	}
	if s := f.state("default", id); s != jobs.Review {
		t.Fatalf("job moved to %s", s)
	}
}
