package httpfence_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fence/httpfence"
	"github.com/fencedq/fencedq/fence/redisfence"
	"github.com/fencedq/fencedq/internal/redistest"
)

// TestStoreRefusalBeforeTheHandler: a Redis guard that refuses before the
// handler runs (a store key of another type than it writes there) wrote
// nothing, and a retry fails the same way: the answer says so (500
// fence_refused), not 503 "outcome unknown, retry".
func TestStoreRefusalBeforeTheHandler(t *testing.T) {
	c := redistest.Start(t, redistest.Options{}).Client()
	ctx := t.Context()
	s, err := redisfence.New(c, redisfence.Config{Namespace: redistest.Namespace(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, s.HighWaterKey("acct:1"), "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	f := fence.Fence{Resource: "acct:1", Token: 5, Owner: "w", OperationID: "op-1"}
	if err := s.Guard(ctx, f, func(context.Context) error { return nil }); !errors.Is(err, fence.ErrRefused) || !errors.Is(err, redisfence.ErrMutation) {
		t.Fatalf("Guard: %v, want ErrRefused and ErrMutation", err)
	}
	ran := false
	h := httpfence.Middleware(s, httpfence.Options{})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ran = true
	}))
	for range 2 {
		req := httptest.NewRequest(http.MethodPost, "/", nil)
		if err := httpfence.SetHeaders(req, f); err != nil {
			t.Fatal(err)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		var body httpfence.ErrorBody
		_ = json.Unmarshal(w.Body.Bytes(), &body)
		if w.Code != http.StatusInternalServerError || body.Error != "fence_refused" || ran {
			t.Fatalf("answer %d %s (handler ran: %v), want 500 fence_refused", w.Code, w.Body, ran)
		}
	}
	if n, err := redistest.CountKeys(ctx, c); err != nil || n != 1 {
		t.Fatalf("%d keys (%v), want only the planted one", n, err)
	}
}
