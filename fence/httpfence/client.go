package httpfence

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/lease"
)

// Header names. A fenced request carries all four.
const (
	// HeaderToken carries the lease token in decimal.
	HeaderToken = "Fencing-Token"
	// HeaderResource names the fenced resource.
	HeaderResource = "Fencing-Resource"
	// HeaderOwner names the lease holder.
	HeaderOwner = "Fencing-Owner"
	// HeaderIdempotencyKey carries the operation id.
	HeaderIdempotencyKey = "Idempotency-Key"
	// HeaderAlreadyApplied is set to "true" on a response to an operation
	// that was applied before; the handler did not run again.
	HeaderAlreadyApplied = "Fencing-Already-Applied"
)

// ErrMissing means a request carried none, or only some, of the fencing
// headers. It matches fence.ErrInvalid.
var ErrMissing = fmt.Errorf("httpfence: missing fencing headers: %w", fence.ErrInvalid)

// ErrAnswerMismatch means a fencing answer is not about the request's
// operation: an already-applied answer naming another operation id, or
// none, or a stale or in-progress answer naming another one (a proxy that
// rewrote the Idempotency-Key, an answer cached for another request). It
// proves nothing about the request's effect, so it matches no fence error.
var ErrAnswerMismatch = errors.New("httpfence: the answer is about another operation")

// SetHeaders validates f and sets the fencing headers on req. An invalid
// fence, or one whose fields cannot be sent as header values (a control
// character; a leading or trailing space, which servers strip, so the
// service would see another resource, owner or operation id), returns an
// error matching fence.ErrInvalid and leaves req unchanged. net/http's
// client copies these headers to a redirect to any host; send the request
// through Transport, which keeps them off other hosts.
func SetHeaders(req *http.Request, f fence.Fence) error {
	if err := f.Validate(); err != nil {
		return err
	}
	for name, v := range map[string]string{"resource": f.Resource, "owner": f.Owner, "operation id": f.OperationID} {
		if !headerSafe(v) {
			return fmt.Errorf("%w: %s %q holds a control character or a leading or trailing space", fence.ErrInvalid, name, v)
		}
	}
	req.Header.Set(HeaderToken, f.Token.String())
	req.Header.Set(HeaderResource, f.Resource)
	req.Header.Set(HeaderOwner, f.Owner)
	req.Header.Set(HeaderIdempotencyKey, f.OperationID)
	return nil
}

// headerSafe reports whether s arrives unchanged as a header value: it
// holds no control character, and no leading or trailing space, which
// servers strip from header values.
func headerSafe(s string) bool {
	if strings.HasPrefix(s, " ") || strings.HasSuffix(s, " ") {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f {
			return false
		}
	}
	return true
}

// fenceHeaders are the headers a fenced request carries.
var fenceHeaders = []string{HeaderToken, HeaderResource, HeaderOwner, HeaderIdempotencyKey}

// FromRequest reads the fence from req's headers. ok is false when none of
// the four headers is present (a header sent with an empty value is
// present). When some are missing or empty the error matches ErrMissing; a malformed token, a token no lease mints (its time part lies
// more than a year past the clock: stored as a mark, 2^64-1 say, it
// would refuse every later holder of the resource for good), or a header
// sent more than once with different values (which of them would authorise
// the write?), or a fence fence.Fence.Validate refuses (an owner or
// resource longer than a lease's), matches fence.ErrInvalid.
func FromRequest(req *http.Request) (f fence.Fence, ok bool, err error) {
	tok := req.Header.Get(HeaderToken)
	f = fence.Fence{
		Resource:    req.Header.Get(HeaderResource),
		Owner:       req.Header.Get(HeaderOwner),
		OperationID: req.Header.Get(HeaderIdempotencyKey),
	}
	if !slices.ContainsFunc(fenceHeaders, func(name string) bool { return len(req.Header.Values(name)) > 0 }) {
		return fence.Fence{}, false, nil
	}
	for _, name := range fenceHeaders {
		if vs := req.Header.Values(name); len(vs) > 1 && slices.ContainsFunc(vs[1:], func(v string) bool { return v != vs[0] }) {
			return f, true, fmt.Errorf("%w: %s sent %d times with different values", fence.ErrInvalid, name, len(vs))
		}
	}
	var missing []string
	for _, h := range []struct{ name, v string }{
		{HeaderToken, tok}, {HeaderResource, f.Resource}, {HeaderOwner, f.Owner}, {HeaderIdempotencyKey, f.OperationID},
	} {
		if h.v == "" {
			missing = append(missing, h.name)
		}
	}
	if len(missing) > 0 {
		return f, true, fmt.Errorf("%w: %s", ErrMissing, strings.Join(missing, ", "))
	}
	t, err := lease.ParseToken(tok)
	if err != nil {
		return f, true, fmt.Errorf("%w: %s: %v", fence.ErrInvalid, HeaderToken, err)
	}
	f.Token = t
	if err := f.Validate(); err != nil {
		return f, true, err
	}
	return f, true, nil
}

// Transport is an http.RoundTripper that adds the fencing headers of the
// fence carried by each request's context (fence.FromContext). Requests
// without a fence pass unchanged unless Require is set. A redirect to
// another host than the first request's gets no fence, as net/http's
// client drops Authorization there: a fence authorises writes (the same
// token and owner are accepted again), so it goes only where the request
// was addressed. That holds too for fencing headers set on the request
// itself (SetHeaders), which the client copies to every redirect. The
// original request is never modified.
type Transport struct {
	// Base sends the requests (default http.DefaultTransport).
	Base http.RoundTripper
	// Require makes requests without a fence in their context, or
	// redirected to another host, fail with ErrMissing instead of being
	// sent unfenced.
	Require bool
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	f, ok := fence.FromContext(req.Context())
	if !sameHost(req) {
		if ok && t.Require {
			closeBody(req)
			return nil, fmt.Errorf("%w: redirected to %s, not the host the fenced request was addressed to", ErrMissing, req.URL.Host)
		}
		return base.RoundTrip(withoutFence(req))
	}
	if !ok {
		if t.Require {
			closeBody(req)
			return nil, fmt.Errorf("%w: no fence in the request context", ErrMissing)
		}
		return base.RoundTrip(req)
	}
	r := req.Clone(req.Context())
	if err := SetHeaders(r, f); err != nil {
		closeBody(req)
		return nil, err
	}
	return base.RoundTrip(r)
}

// withoutFence returns req, or a copy without the fencing headers when it
// carries any: net/http's client copies the first request's headers (set
// with SetHeaders, say) to its redirects, whatever their host.
func withoutFence(req *http.Request) *http.Request {
	h := req.Header
	if h.Get(HeaderToken) == "" && h.Get(HeaderResource) == "" && h.Get(HeaderOwner) == "" {
		return req
	}
	r := req.Clone(req.Context())
	for _, name := range fenceHeaders {
		r.Header.Del(name)
	}
	return r
}

// sameHost reports whether req goes to the host of the first request of
// its redirect chain (itself, when it is no redirect).
func sameHost(req *http.Request) bool {
	first := req
	for first.Response != nil && first.Response.Request != nil {
		first = first.Response.Request
	}
	return strings.EqualFold(first.URL.Host, req.URL.Host)
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// ErrorBody is the JSON body of the middleware's own responses: errors
// (409, 428, 400, 500, 503) and the already-applied answer (200).
type ErrorBody struct {
	// Error is a stable code: "stale_token", "operation_in_progress",
	// "fence_required", "invalid_fence", "fence_refused",
	// "fence_unavailable", or "" on the already-applied answer.
	Error string `json:"error,omitempty"`
	// Status is "already_applied" on that answer.
	Status string `json:"status,omitempty"`
	// Message explains the error to a human.
	Message string `json:"message,omitempty"`
	// Resource echoes the request's resource.
	Resource string `json:"resource,omitempty"`
	// OperationID echoes the request's Idempotency-Key.
	OperationID string `json:"operation_id,omitempty"`
	// Token is the request's token. Tokens are decimal strings, as JSON
	// numbers lose precision above 2^53.
	Token string `json:"token,omitempty"`
	// StoredToken is the resource's high-water token (on stale_token) or
	// the token that applied the operation (on already_applied).
	StoredToken string `json:"stored_token,omitempty"`
	// StoredOwner is, on already_applied, the owner of StoredToken when it
	// is the request's own owner; never another holder's (with StoredToken
	// it would let any client write as that holder).
	StoredOwner string `json:"stored_owner,omitempty"`
	// StoredResource is, on already_applied, the resource the operation was
	// applied on: an operation id names one effect across the store, so it
	// may differ from Resource.
	StoredResource string `json:"stored_resource,omitempty"`
}

// CheckResponse turns a fenced service's answer into the fence errors: a
// *fence.StaleError for 409 stale_token (its Fence is resp.Request's, or,
// without one, the resource, token and operation id the answer echoes), fence.ErrInProgress for 409
// operation_in_progress, and a *fence.AlreadyAppliedError when a 2xx
// answer carries the Fencing-Already-Applied header "true" (the
// middleware's already-applied answer is a 200; on an error status, from a
// proxy passing the header on or a failing service, it proves nothing, and
// reading it as "applied" would drop the effect). Any other response
// returns nil; judge its status yourself. It reads the start of the body
// only for a 409 or that answer, and replaces resp.Body with one that
// still yields all of it (closing it closes the original).
//
// When resp.Request carries a fence, an answer about another operation
// returns ErrAnswerMismatch instead: an already-applied answer whose
// operation_id is not the request's Idempotency-Key (or is missing), or a
// stale or in-progress answer naming another one. Such an answer proves
// nothing about the request's effect; taken as "applied", it would mark a
// job done by someone else's operation.
func CheckResponse(resp *http.Response) error {
	already := resp.StatusCode >= 200 && resp.StatusCode < 300 && resp.Header.Get(HeaderAlreadyApplied) == "true"
	if !already && resp.StatusCode != http.StatusConflict {
		return nil
	}
	// The middleware's answers are short; a longer body (a service's own
	// 409) is read no further, and the caller still reads all of it.
	orig := resp.Body
	raw, err := io.ReadAll(io.LimitReader(orig, 1<<16))
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(raw), orig), orig}
	if err != nil {
		return fmt.Errorf("httpfence: read response: %w", err)
	}
	var b ErrorBody
	_ = json.Unmarshal(raw, &b)
	var f fence.Fence
	if resp.Request != nil {
		f, _, _ = FromRequest(resp.Request)
	}
	if err := answersFor(f, b, already); err != nil {
		return err
	}
	stored, _ := lease.ParseToken(b.StoredToken)
	switch {
	case already:
		res := b.StoredResource
		if res == "" {
			res = b.Resource
		}
		if f.Token == 0 {
			f = fence.Fence{}
		}
		return &fence.AlreadyAppliedError{Record: fence.Effect{
			OperationID: b.OperationID, Resource: res, Token: stored, Owner: b.StoredOwner,
		}, Fence: f}
	case b.Error == "stale_token":
		if f.Token == 0 {
			// The request is not at hand, or carried no fence: take the
			// refused fence the answer echoes (it names no owner).
			tok, _ := lease.ParseToken(b.Token)
			f = fence.Fence{Resource: b.Resource, Token: tok, OperationID: b.OperationID}
		}
		return &fence.StaleError{Fence: f, StoredToken: stored, StoredOwner: b.StoredOwner}
	case b.Error == "operation_in_progress":
		return fmt.Errorf("%w: %s", fence.ErrInProgress, b.OperationID)
	}
	return nil
}

// answersFor returns ErrAnswerMismatch when b, a fencing answer to a
// request carrying f, is about another operation. An already-applied
// answer must name f's operation id; the others may omit it. Without a
// fence at hand (f zero) there is nothing to compare.
func answersFor(f fence.Fence, b ErrorBody, already bool) error {
	if f.OperationID == "" || b.OperationID == f.OperationID {
		return nil
	}
	switch {
	case already:
	case b.Error == "stale_token" || b.Error == "operation_in_progress":
		if b.OperationID == "" {
			return nil
		}
	default:
		return nil
	}
	kind := b.Error
	if already {
		kind = "already_applied"
	}
	return fmt.Errorf("%w: a %s answer naming operation %q to a request for %q on %q", ErrAnswerMismatch, kind, b.OperationID, f.OperationID, f.Resource)
}
