package httpfence_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fence/httpfence"
	"github.com/fencedq/fencedq/lease"
)

// guardFunc is a Guard that records whether it was asked.
type guardFunc func(ctx context.Context, f fence.Fence, run func(ctx context.Context) error) error

func (g guardFunc) Guard(ctx context.Context, f fence.Fence, run func(ctx context.Context) error) error {
	return g(ctx, f, run)
}

// An owner or resource longer than a lease can have is refused on both
// sides: SetHeaders sends nothing, and FromRequest (so the middleware,
// whatever Guard it wraps) answers 400 invalid_fence without asking the
// guard or running the handler.
func TestOverlongOwnerAndResourceRefused(t *testing.T) {
	tok := lease.Token(1) // a token whose time part is in the past
	for _, f := range []fence.Fence{
		fz("acct:1", tok, strings.Repeat("o", lease.MaxOwnerLen+1), "op"),
		fz(strings.Repeat("r", lease.MaxResourceLen+1), tok, "w", "op"),
	} {
		req := httptest.NewRequest(http.MethodPost, "/", nil)
		if err := httpfence.SetHeaders(req, f); !errors.Is(err, fence.ErrInvalid) {
			t.Errorf("SetHeaders: %v, want ErrInvalid", err)
		}
		if len(req.Header) != 0 {
			t.Errorf("SetHeaders set %v on a refused fence", req.Header)
		}
		req.Header.Set(httpfence.HeaderToken, f.Token.String())
		req.Header.Set(httpfence.HeaderResource, f.Resource)
		req.Header.Set(httpfence.HeaderOwner, f.Owner)
		req.Header.Set(httpfence.HeaderIdempotencyKey, f.OperationID)
		if _, ok, err := httpfence.FromRequest(req); !ok || !errors.Is(err, fence.ErrInvalid) {
			t.Errorf("FromRequest: %v, %v, want ErrInvalid", ok, err)
		}
		asked := false
		h := httpfence.Middleware(guardFunc(func(ctx context.Context, f fence.Fence, run func(context.Context) error) error {
			asked = true
			return run(ctx)
		}), httpfence.Options{})(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
			t.Error("the handler ran")
		}))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "invalid_fence") || asked {
			t.Errorf("middleware: %d %s (guard asked: %v), want 400 invalid_fence without asking", w.Code, w.Body, asked)
		}
	}
}
