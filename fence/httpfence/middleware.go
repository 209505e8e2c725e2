package httpfence

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/internal/argtype"
)

// Guard checks a fence and runs a callback at most once per operation id.
// Both *pgfence.Store and *redisfence.Store implement it.
//
// Guard must return a *fence.StaleError (matching fence.ErrStale) without
// calling run when storage holds a higher token, or the same token of
// another owner; an error matching fence.ErrAlreadyApplied (ideally a
// *fence.AlreadyAppliedError) without calling run when the operation id was
// recorded; fence.ErrInProgress when another call with the same operation
// id is running. Otherwise it calls run, and records the operation id as
// applied only if run returns nil, so a failed handler never leaves an
// operation marked applied without its effect.
type Guard interface {
	Guard(ctx context.Context, f fence.Fence, run func(ctx context.Context) error) error
}

// Options configures Middleware. The zero value rejects unfenced requests.
type Options struct {
	// AllowUnfenced lets requests without any fencing header through to the
	// handler, unguarded. A request with only some of the headers, or with
	// one sent empty, is always rejected.
	AllowUnfenced bool
	// Logger, if set, receives storage errors (the fence, never header
	// values beyond it, and never bodies). Nil logs nothing.
	Logger *slog.Logger
}

var errHandlerFailed = errors.New("httpfence: handler answered with an error status")

// staleMessage explains a stale_token answer. It names no owner: a store's
// refusal text may name the holder's.
const staleMessage = "storage holds a higher token for the resource, or this token of another owner"

// Middleware protects a handler that is itself protected storage: every
// request must carry a fence (see SetHeaders), which g checks against the
// resource's high-water mark and the operation id's effect record.
//
// Answers produced by the middleware itself, each with a JSON ErrorBody:
//
//   - 428 Precondition Required, error "fence_required": no fencing headers
//     (unless Options.AllowUnfenced), or only some of them.
//   - 400 Bad Request, error "invalid_fence": a malformed token, a token no
//     lease mints (its time part more than a year ahead: see FromRequest),
//     a fencing header sent more than once with different values, or a
//     fence the store rejects as invalid.
//   - 409 Conflict, error "stale_token": storage has seen a higher token for
//     the resource (or the same token of another owner). The handler did not
//     run. stored_token says what storage holds; its owner is never told, as
//     its token and owner together would let any client write as the holder.
//   - 409 Conflict, error "operation_in_progress", with Retry-After: another
//     request with the same Idempotency-Key is running (Redis guard).
//   - 200 OK with header Fencing-Already-Applied: true and body
//     {"status":"already_applied",...}: the operation id was applied before.
//     The handler did not run again; its original response is not replayed.
//     stored_owner is given only when it is the request's own owner.
//   - 500 Internal Server Error, error "fence_refused": the store refused
//     before the handler ran for a reason a retry does not fix
//     (fence.ErrRefused: its own data needs repair), or reported another
//     operation's record as the request's (logged); nothing was written.
//   - 503 Service Unavailable, error "fence_unavailable": the store failed.
//     With the Postgres guard the handler's writes rolled back; with the
//     Redis guard the handler may have run and a retry may run it again.
//
// Ordering: the handler runs only after the fence was accepted, and its
// operation id is recorded only if it answers with a status below 400; on
// 4xx/5xx (or a panic) the record is rolled back so a retry can run. To
// decide before anything reaches the client, the handler's response is
// buffered and sent after the record is committed, so handlers cannot
// stream or hijack; its final status decides (an informational 1xx, such
// as 103 Early Hints, is dropped, not sent). With the Postgres guard (pgfence.Store.Guard) the
// handler should write through pgfence.TxFromContext(r.Context()): its
// writes then commit atomically with the fence. The request context also
// carries the fence (fence.FromContext). Wrap only the routes that write;
// reads need no fence. A nil g panics here, when the middleware is built.
func Middleware(g Guard, opts Options) func(http.Handler) http.Handler {
	if argtype.IsNil(g) {
		panic("httpfence: Middleware was given a nil Guard")
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			f, ok, err := FromRequest(r)
			switch {
			case !ok && opts.AllowUnfenced:
				next.ServeHTTP(w, r)
				return
			case !ok:
				writeJSON(w, http.StatusPreconditionRequired, ErrorBody{Error: "fence_required",
					Message: "send " + HeaderToken + ", " + HeaderResource + ", " + HeaderOwner + " and " + HeaderIdempotencyKey})
				return
			case errors.Is(err, ErrMissing):
				writeJSON(w, http.StatusPreconditionRequired, ErrorBody{Error: "fence_required", Message: err.Error()})
				return
			case err != nil:
				writeJSON(w, http.StatusBadRequest, ErrorBody{Error: "invalid_fence", Message: err.Error()})
				return
			}
			rec := &recorder{header: make(http.Header)}
			ran := false
			err = g.Guard(r.Context(), f, func(ctx context.Context) error {
				ran = true
				next.ServeHTTP(rec, r.WithContext(fence.NewContext(ctx, f)))
				if rec.code() >= 400 {
					return errHandlerFailed
				}
				return nil
			})
			body := ErrorBody{Resource: f.Resource, OperationID: f.OperationID, Token: f.Token.String()}
			var stale *fence.StaleError
			var already *fence.AlreadyAppliedError
			switch {
			case err == nil || errors.Is(err, errHandlerFailed):
				rec.send(w)
			case errors.As(err, &stale):
				body.Error, body.Message = "stale_token", staleMessage
				body.StoredToken = stale.StoredToken.String()
				writeJSON(w, http.StatusConflict, body)
			case errors.Is(err, fence.ErrStale):
				body.Error, body.Message = "stale_token", staleMessage
				writeJSON(w, http.StatusConflict, body)
			case errors.As(err, &already) && already.Record.OperationID != f.OperationID:
				// The guard found another operation's record: no answer
				// about this one, whose effect nothing shows was made.
				if opts.Logger != nil {
					opts.Logger.ErrorContext(r.Context(), "httpfence: fence store answered with another operation's record",
						"resource", f.Resource, "operation_id", f.OperationID, "token", f.Token.String(),
						"record_operation_id", already.Record.OperationID, "error", err)
				}
				body.Error, body.Message = "fence_refused", "the fence store answered with another operation's record; nothing was written"
				writeJSON(w, http.StatusInternalServerError, body)
			case errors.Is(err, fence.ErrAlreadyApplied):
				body.Status = "already_applied"
				if errors.As(err, &already) {
					body.StoredToken, body.StoredResource = already.Record.Token.String(), already.Record.Resource
					if already.Record.Owner == f.Owner {
						body.StoredOwner = f.Owner
					}
				}
				w.Header().Set(HeaderAlreadyApplied, "true")
				writeJSON(w, http.StatusOK, body)
			case errors.Is(err, fence.ErrInProgress):
				body.Error, body.Message = "operation_in_progress", "another request with this "+HeaderIdempotencyKey+" is running"
				w.Header().Set("Retry-After", "1")
				writeJSON(w, http.StatusConflict, body)
			case errors.Is(err, fence.ErrInvalid):
				body.Error, body.Message = "invalid_fence", err.Error()
				writeJSON(w, http.StatusBadRequest, body)
			case errors.Is(err, fence.ErrRefused) && !ran:
				if opts.Logger != nil {
					opts.Logger.ErrorContext(r.Context(), "httpfence: fence store refused the write",
						"resource", f.Resource, "operation_id", f.OperationID, "token", f.Token.String(), "error", err)
				}
				body.Error, body.Message = "fence_refused", "the fence store refused the write; nothing was written, and a retry fails the same way until its data is repaired"
				writeJSON(w, http.StatusInternalServerError, body)
			default:
				if opts.Logger != nil {
					opts.Logger.ErrorContext(r.Context(), "httpfence: fence store failed",
						"resource", f.Resource, "operation_id", f.OperationID, "token", f.Token.String(),
						"handler_ran", ran, "error", err)
				}
				body.Error, body.Message = "fence_unavailable", "the fence store failed; the outcome is unknown, retry with the same "+HeaderIdempotencyKey
				writeJSON(w, http.StatusServiceUnavailable, body)
			}
		})
	}
}

func writeJSON(w http.ResponseWriter, status int, body ErrorBody) {
	b, _ := json.Marshal(body)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// recorder buffers a handler's response until the guard has decided.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

// WriteHeader keeps the first final status. An informational one (1xx but
// 101, as net/http treats them) is dropped: it is not the handler's answer,
// and a buffered response cannot send it ahead of the final one. A status
// outside 100-999 panics, as net/http's WriteHeader does, while the guard
// can still roll the operation back.
func (r *recorder) WriteHeader(status int) {
	if status < 100 || status > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", status))
	}
	if status >= 100 && status < 200 && status != http.StatusSwitchingProtocols {
		return
	}
	if r.status == 0 {
		r.status = status
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(p)
}

func (r *recorder) code() int {
	if r.status == 0 {
		return http.StatusOK
	}
	return r.status
}

func (r *recorder) send(w http.ResponseWriter) {
	for k, v := range r.header {
		w.Header()[k] = v
	}
	w.WriteHeader(r.code())
	_, _ = w.Write(r.body.Bytes())
}
