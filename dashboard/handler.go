package dashboard

import (
	"crypto/rand"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/fencedq/fencedq/jobs"
)

// Sentinel errors returned by New.
var (
	// ErrNoInspector means New got neither an inspector nor a client.
	ErrNoInspector = errors.New("dashboard: an inspector or a client is required")
	// ErrOptions means Options are inconsistent (see the message).
	ErrOptions = errors.New("dashboard: invalid options")
)

// Options configures the dashboard. The zero value serves a read-only
// dashboard.
type Options struct {
	// Username and Password enable actions for people: the browser sends
	// them with HTTP basic auth. Set both or neither. The username is the
	// actor recorded with each decision: 1-200 bytes of UTF-8 without ':'
	// or control characters (jobs.MaxActorLen; New refuses others).
	Username string
	// Password is the basic-auth password that goes with Username.
	Password string
	// Token enables actions for scripts: "Authorization: Bearer <Token>"
	// (without surrounding white space or control characters, which no
	// header carries: New refuses them). Such requests need no CSRF token
	// (browsers never send it on their own).
	Token string
	// TokenActor is the actor recorded for decisions made with Token
	// (default "token"; the same rules as Username).
	TokenActor string
	// ProtectReads makes every request, pages and reads included, require
	// the credentials (only useful with Username and Password set, since a
	// browser cannot send the bearer token for page loads).
	ProtectReads bool
	// CSRFKey signs CSRF tokens. Give every replica behind one load balancer
	// the same key (at least 32 random bytes; New refuses a shorter one);
	// default: random per process.
	CSRFKey []byte
	// TrustedOrigins are origins ("https://ops.example.com") allowed to send
	// actions although they differ from the request's Host, for proxies that
	// rewrite Host.
	TrustedOrigins []string
	// SecureCookie sets the Secure flag on the CSRF cookie even when the
	// request did not arrive over TLS (behind a TLS-terminating proxy).
	SecureCookie bool
	// StuckMargin is how close to its lease deadline a running job counts
	// as stuck (default 3s; a healthy attempt renews every third of its
	// lease TTL, so it stays well above this with the default 10s TTL).
	StuckMargin time.Duration
	// Timeout bounds the Redis work of one request (default 10s).
	Timeout time.Duration
	// Logger receives operator actions and refused requests
	// (default slog.Default()).
	Logger *slog.Logger
}

// minCSRFKey is the shortest Options.CSRFKey New accepts, in bytes.
const minCSRFKey = 32

// Handler is the dashboard. It implements http.Handler; mount it under any
// prefix with http.StripPrefix.
type Handler struct {
	insp    *jobs.Inspector
	client  *jobs.Client
	opts    Options
	log     *slog.Logger
	mux     *http.ServeMux
	cop     *http.CrossOriginProtection
	csrfKey []byte
	rates   *sampler
}

//go:embed assets
var assets embed.FS

// New returns the dashboard reading through insp. client performs operator
// actions; it may be nil for a read-only dashboard, and insp may be nil when
// client is given (its inspector is used). Credentials in opts need a client.
func New(insp *jobs.Inspector, client *jobs.Client, opts Options) (*Handler, error) {
	if insp == nil && client == nil {
		return nil, ErrNoInspector
	}
	if insp == nil {
		insp = client.Inspector()
	}
	if client != nil && client.Inspector().Namespace() != insp.Namespace() {
		return nil, fmt.Errorf("%w: client namespace %q differs from inspector namespace %q",
			ErrOptions, client.Inspector().Namespace(), insp.Namespace())
	}
	if (opts.Username == "") != (opts.Password == "") {
		return nil, fmt.Errorf("%w: set both Username and Password, or neither", ErrOptions)
	}
	if strings.ContainsAny(opts.Username, ":\r\n") {
		return nil, fmt.Errorf("%w: a basic-auth username cannot hold ':' or line breaks", ErrOptions)
	}
	if opts.Username != "" {
		if err := jobs.ValidateActor(opts.Username); err != nil {
			return nil, fmt.Errorf("%w: Username: %w", ErrOptions, err)
		}
	}
	if opts.TokenActor != "" {
		if err := jobs.ValidateActor(opts.TokenActor); err != nil {
			return nil, fmt.Errorf("%w: TokenActor: %w", ErrOptions, err)
		}
	}
	if opts.Token != "" && (opts.Token != strings.TrimSpace(opts.Token) ||
		strings.ContainsFunc(opts.Token, func(r rune) bool { return r < 0x20 || r == 0x7f })) {
		return nil, fmt.Errorf("%w: a Token with surrounding white space or control characters never matches a bearer header", ErrOptions)
	}
	if n := len(opts.CSRFKey); n > 0 && n < minCSRFKey {
		return nil, fmt.Errorf("%w: CSRFKey has %d bytes: give at least %d random bytes", ErrOptions, n, minCSRFKey)
	}
	if opts.ProtectReads && opts.Username == "" {
		return nil, fmt.Errorf("%w: ProtectReads needs Username and Password", ErrOptions)
	}
	enabled := opts.Username != "" || opts.Token != ""
	if enabled && client == nil {
		return nil, fmt.Errorf("%w: credentials are set but there is no client to act with", ErrOptions)
	}
	if opts.TokenActor == "" {
		opts.TokenActor = "token"
	}
	if opts.StuckMargin <= 0 {
		opts.StuckMargin = 3 * time.Second
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	key := opts.CSRFKey
	if len(key) == 0 {
		key = make([]byte, 32)
		_, _ = rand.Read(key)
	}
	h := &Handler{
		insp: insp, client: client, opts: opts,
		log:     opts.Logger.With("component", "dashboard", "namespace", insp.Namespace()),
		cop:     http.NewCrossOriginProtection(),
		csrfKey: key,
		rates:   newSampler(time.Minute),
	}
	for _, o := range opts.TrustedOrigins {
		if err := h.cop.AddTrustedOrigin(o); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrOptions, err)
		}
	}
	h.routes()
	return h, nil
}

// ActionsEnabled reports whether credentials are configured, so operator
// actions can be taken.
func (h *Handler) ActionsEnabled() bool { return h.opts.Username != "" || h.opts.Token != "" }

func (h *Handler) routes() {
	static, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	files := http.FileServerFS(static)
	m := http.NewServeMux()
	m.HandleFunc("GET /{$}", h.index)
	m.Handle("GET /assets/", http.StripPrefix("/assets", noDirs(files)))

	m.HandleFunc("GET /api/overview", h.apiOverview)
	m.HandleFunc("GET /api/jobs", h.apiJobs)
	m.HandleFunc("GET /api/jobs/{queue}/{id}", h.apiJob)
	m.HandleFunc("POST /api/jobs/{queue}/{id}/resolve", h.apiResolve)
	m.HandleFunc("POST /api/jobs/{queue}/{id}/cancel", h.apiCancel())
	m.HandleFunc("POST /api/jobs/{queue}/{id}/run-now", h.apiRunNow())
	m.HandleFunc("POST /api/queues/{queue}/pause", h.apiPause(true))
	m.HandleFunc("POST /api/queues/{queue}/resume", h.apiPause(false))
	m.HandleFunc("POST /api/bulk", h.apiBulk)
	m.HandleFunc("GET /api/pools", h.apiPools)
	m.HandleFunc("GET /api/series", h.apiSeries)
	m.HandleFunc("GET /api/schedules", h.apiSchedules)
	m.HandleFunc("GET /api/workflows", h.apiWorkflows)
	m.HandleFunc("GET /api/limits", h.apiLimits)
	m.HandleFunc("GET /api/search", h.apiSearch)
	m.HandleFunc("GET /api/events", h.apiEvents)
	m.HandleFunc("GET /api/stuck", h.apiStuck)
	m.HandleFunc("GET /api/rewinds", h.apiRewinds)
	m.HandleFunc("GET /api/session", h.apiSession)
	m.HandleFunc("GET /api/csrf", h.apiCSRF)
	m.HandleFunc("GET /api/login", h.apiLogin)
	m.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		if allow := h.allowed(r); allow != "" {
			w.Header().Set("Allow", allow)
			writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", r.Method+" is not allowed here: use "+allow)
			return
		}
		writeError(w, http.StatusNotFound, "not_found", "no such API endpoint")
	})
	h.mux = m
}

// allowed lists the methods an API endpoint serves at r's path ("" for no
// endpoint there), for the catch-all to answer a wrong method with 405.
func (h *Handler) allowed(r *http.Request) string {
	var allow []string
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		r2 := new(http.Request)
		*r2 = *r
		r2.Method = method
		if _, pattern := h.mux.Handler(r2); pattern != "" && pattern != "/api/" {
			allow = append(allow, method)
			if method == http.MethodGet {
				allow = append(allow, http.MethodHead)
			}
		}
	}
	return strings.Join(allow, ", ")
}

// contentSecurityPolicy allows only the dashboard's own files: no inline
// script or style, no framing, no plugins, no foreign connections.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; " +
	"frame-ancestors 'none'"

// ServeHTTP serves the pages, their assets and the JSON API.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", contentSecurityPolicy)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Cross-Origin-Opener-Policy", "same-origin")
	hd.Set("Cross-Origin-Resource-Policy", "same-origin")
	hd.Set("Cache-Control", "no-store")

	p := r.URL.Path
	if p == "" {
		// Mounted with http.StripPrefix: "" is the mount point itself, with or
		// without its trailing slash. Without it, relative URLs would resolve
		// one level up, so redirect to the slash form.
		orig := originalPath(r)
		if !strings.HasSuffix(orig, "/") {
			// A relative Location (http.Redirect would make it absolute
			// against the stripped path, losing the prefix).
			hd.Set("Location", path.Base(orig)+"/")
			w.WriteHeader(http.StatusMovedPermanently)
			return
		}
		p = "/"
	}
	if !strings.HasPrefix(p, "/") {
		p = "/" + p // http.StripPrefix("/ops/", h) leaves "api/..."
	}
	if p != r.URL.Path {
		r2 := new(http.Request)
		*r2 = *r
		u := *r.URL
		u.Path = p
		if u.RawPath != "" && !strings.HasPrefix(u.RawPath, "/") {
			u.RawPath = "/" + u.RawPath
		}
		r2.URL = &u
		r = r2
	}
	if ep := r.URL.EscapedPath(); !cleanPath(ep) && strings.HasPrefix(path.Clean(ep)+"/", "/api/") {
		// The mux would redirect to the cleaned path with an HTML body, and
		// under a bare http.StripPrefix to a Location outside the mount:
		// no API endpoint has such a path.
		writeError(w, http.StatusNotFound, "not_found", "no such API endpoint: the path has empty, . or .. segments")
		return
	} else if ep == "/api" {
		// Likewise the mux's redirect to "/api/" (an absolute Location).
		writeError(w, http.StatusNotFound, "not_found", "no such API endpoint")
		return
	}
	if h.opts.ProtectReads {
		if _, ok := h.authenticate(r); !ok {
			h.challenge(w, r, "sign in to view the dashboard")
			return
		}
	}
	if strings.HasPrefix(r.URL.Path, "/api/") {
		if msg := badQuery(r.URL.RawQuery); msg != "" {
			writeError(w, http.StatusBadRequest, "invalid", msg)
			return
		}
	}
	h.mux.ServeHTTP(w, r)
}

// badQuery says what is wrong with an API request's query, "" when
// nothing is: a parameter Go's parser drops (a bad %-escape, a ';'
// separator) or one given twice, of which the endpoints would read only
// the first, is refused rather than read as absent or as one of its
// values, so queue=%zz never lists every queue (nor selects every queue's
// jobs for a bulk action).
func badQuery(raw string) string {
	v, err := url.ParseQuery(raw)
	if err != nil {
		return "the query is malformed (a bad %-escape or a ';'): " + err.Error()
	}
	for k, vs := range v {
		if len(vs) > 1 {
			return "query parameter " + strconv.Quote(k) + " is given " + strconv.Itoa(len(vs)) + " times: give each once"
		}
	}
	return ""
}

// cleanPath reports whether p (rooted, escaped: an encoded slash is no
// separator) has no empty, "." or ".." segment but a trailing slash.
func cleanPath(p string) bool {
	c := path.Clean(p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	return c == p
}

// originalPath is the request's path before any prefix was stripped.
func originalPath(r *http.Request) string {
	if r.RequestURI != "" {
		if u, err := url.ParseRequestURI(r.RequestURI); err == nil && u.Path != "" {
			return u.Path
		}
	}
	if r.URL.Path == "" {
		return "/"
	}
	return r.URL.Path
}

func (h *Handler) index(w http.ResponseWriter, r *http.Request) {
	b, err := assets.ReadFile("assets/index.html")
	if err != nil {
		http.Error(w, "index missing", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(b)
}

// noDirs answers 404 for directory listings of the embedded assets.
func noDirs(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/") {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Cache-Control", "no-cache")
		next.ServeHTTP(w, r)
	})
}
