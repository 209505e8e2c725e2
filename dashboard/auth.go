package dashboard

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"strings"
)

// csrfCookie holds the CSRF token; csrfHeader must repeat it on actions.
const (
	csrfCookie = "fencedq_csrf"
	csrfHeader = "X-CSRF-Token"
	realm      = `Basic realm="fencedq dashboard", charset="UTF-8"`
)

// identity is who made a request.
type identity struct {
	actor  string
	bearer bool // authenticated by the bearer token (exempt from the CSRF token)
}

// equal compares secrets in constant time, whatever their lengths.
func equal(a, b string) bool {
	ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
}

// authenticate checks the request's credentials against the configured
// ones. It reports false when none are configured.
func (h *Handler) authenticate(r *http.Request) (identity, bool) {
	authz := r.Header.Get("Authorization")
	if scheme, tok, ok := strings.Cut(authz, " "); ok && strings.EqualFold(scheme, "Bearer") {
		if h.opts.Token != "" && equal(strings.TrimSpace(tok), h.opts.Token) {
			return identity{actor: h.opts.TokenActor, bearer: true}, true
		}
		return identity{}, false
	}
	if h.opts.Username == "" {
		return identity{}, false
	}
	user, pass, ok := r.BasicAuth()
	if !ok {
		return identity{}, false
	}
	// Evaluate both comparisons so timing does not tell which one failed.
	userOK, passOK := equal(user, h.opts.Username), equal(pass, h.opts.Password)
	if !userOK || !passOK {
		return identity{}, false
	}
	return identity{actor: h.opts.Username}, true
}

// challenge answers 401, asking for basic auth when it is configured.
func (h *Handler) challenge(w http.ResponseWriter, r *http.Request, msg string) {
	if h.opts.Username != "" {
		w.Header().Set("WWW-Authenticate", realm)
	}
	h.logRejected(r)
	writeError(w, http.StatusUnauthorized, "unauthorized", msg)
}

// logRejected logs a request whose credentials were rejected (not one that
// sent none), so guessing shows in the log.
func (h *Handler) logRejected(r *http.Request) {
	if r.Header.Get("Authorization") != "" {
		h.log.WarnContext(r.Context(), "dashboard: rejected credentials", "path", r.URL.Path, "remote", r.RemoteAddr)
	}
}

// authorizeAction decides whether r may perform an action. It writes the
// refusal and returns false when not: 403 when actions are disabled or the
// request is cross-origin or lacks the CSRF token, 401 without valid
// credentials.
func (h *Handler) authorizeAction(w http.ResponseWriter, r *http.Request) (identity, bool) {
	if !h.ActionsEnabled() {
		writeError(w, http.StatusForbidden, "read_only", "the dashboard is read-only: no credentials are configured")
		return identity{}, false
	}
	if err := h.cop.Check(r); err != nil {
		h.log.WarnContext(r.Context(), "dashboard: cross-origin action refused", "path", r.URL.Path,
			"origin", r.Header.Get("Origin"), "sec_fetch_site", r.Header.Get("Sec-Fetch-Site"), "remote", r.RemoteAddr)
		writeError(w, http.StatusForbidden, "cross_origin", "cross-origin request refused")
		return identity{}, false
	}
	id, ok := h.authenticate(r)
	if !ok {
		h.challenge(w, r, "this action needs credentials")
		return identity{}, false
	}
	if !id.bearer && !h.checkCSRF(r) {
		h.log.WarnContext(r.Context(), "dashboard: action without a valid CSRF token refused", "path", r.URL.Path,
			"actor", id.actor, "remote", r.RemoteAddr)
		writeError(w, http.StatusForbidden, "csrf", "missing or invalid CSRF token: GET api/csrf and send it in "+csrfHeader)
		return identity{}, false
	}
	return id, true
}

// newCSRFToken returns nonce.signature, both base64url.
func (h *Handler) newCSRFToken() string {
	nonce := make([]byte, 24)
	_, _ = rand.Read(nonce)
	return h.signCSRF(base64.RawURLEncoding.EncodeToString(nonce))
}

func (h *Handler) signCSRF(nonce string) string {
	m := hmac.New(sha256.New, h.csrfKey)
	m.Write([]byte("fencedq-csrf:" + nonce))
	return nonce + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// validCSRF reports whether tok was signed with this handler's key.
func (h *Handler) validCSRF(tok string) bool {
	nonce, _, ok := strings.Cut(tok, ".")
	if !ok || nonce == "" || len(tok) > 200 {
		return false
	}
	return hmac.Equal([]byte(h.signCSRF(nonce)), []byte(tok))
}

// checkCSRF requires the header token to equal the cookie token, and the
// token to carry this handler's signature (so a cookie planted by a
// sibling subdomain does not help an attacker).
func (h *Handler) checkCSRF(r *http.Request) bool {
	c, err := r.Cookie(csrfCookie)
	if err != nil {
		return false
	}
	hdr := r.Header.Get(csrfHeader)
	if hdr == "" || !equal(hdr, c.Value) {
		return false
	}
	return h.validCSRF(hdr)
}

// csrfToken returns the request's valid cookie token, or sets a new one.
func (h *Handler) csrfToken(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(csrfCookie); err == nil && h.validCSRF(c.Value) {
		return c.Value
	}
	tok := h.newCSRFToken()
	http.SetCookie(w, &http.Cookie{
		Name:     csrfCookie,
		Value:    tok,
		Path:     mountPath(r),
		HttpOnly: true,
		Secure:   r.TLS != nil || h.opts.SecureCookie,
		SameSite: http.SameSiteStrictMode,
	})
	return tok
}

// mountPath is the path the dashboard is mounted at, from the original
// request path of an api/... request (the cookie stays within it).
func mountPath(r *http.Request) string {
	orig := originalPath(r)
	if i := strings.LastIndex(orig, "/api/"); i >= 0 {
		return orig[:i+1]
	}
	return "/"
}
