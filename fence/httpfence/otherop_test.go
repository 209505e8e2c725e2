package httpfence_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fence/httpfence"
)

// An already-applied answer says that the request's operation is done, so
// a caller counts its effect as made. An answer naming another operation
// id (a proxy that rewrote the Idempotency-Key, an answer cached for
// another request) proves nothing about this one: CheckResponse refuses it
// with ErrAnswerMismatch, which matches neither fence.ErrAlreadyApplied
// nor any other fence error, as it does an answer naming no operation id
// and a stale or in-progress answer naming another one. The service keeps
// the other operation's record and writes nothing for this one.
func TestCheckResponseRefusesAnotherOperationsAnswer(t *testing.T) {
	b := redisBackend(t)
	ctx := t.Context()
	svc := fencedServer(t, b)
	if r := postFenced(t, svc.URL, "acct:1", "1000", "w1", "theirs"); r.status != http.StatusCreated {
		t.Fatalf("the other operation's write: %d %q", r.status, r.raw)
	}
	// A proxy in front of the service that sends every write under one
	// operation id: the service answers, rightly, that "theirs" is applied.
	target, _ := url.Parse(svc.URL)
	front := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(target)
		r.Out.Header.Set(httpfence.HeaderIdempotencyKey, "theirs")
	}})
	t.Cleanup(front.Close)

	client := &http.Client{Transport: &httpfence.Transport{}}
	req, _ := http.NewRequestWithContext(fence.NewContext(ctx, fz("acct:1", 1001, "w2", "mine")), http.MethodPost, front.URL, nil)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get(httpfence.HeaderAlreadyApplied) != "true" {
		t.Fatalf("the proxied answer: %d %v, want the service's already-applied answer", resp.StatusCode, resp.Header)
	}
	err = httpfence.CheckResponse(resp)
	if !errors.Is(err, httpfence.ErrAnswerMismatch) {
		t.Fatalf("CheckResponse = %v, want ErrAnswerMismatch", err)
	}
	for _, sentinel := range []error{fence.ErrAlreadyApplied, fence.ErrStale, fence.ErrInProgress, fence.ErrInvalid} {
		if errors.Is(err, sentinel) {
			t.Errorf("CheckResponse = %v, matches %v", err, sentinel)
		}
	}
	if msg := err.Error(); !strings.Contains(msg, `"theirs"`) || !strings.Contains(msg, `"mine"`) {
		t.Errorf("error %q does not name both operation ids", msg)
	}
	if n := b.writes(ctx); n != 1 {
		t.Fatalf("%d writes, want only the other operation's", n)
	}

	// The same on answers whose request is at hand, built by hand.
	sent, _ := http.NewRequest(http.MethodPost, "http://svc/", nil)
	if err := httpfence.SetHeaders(sent, fz("acct:1", 5, "w", "mine")); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		status  int
		already bool
		body    string
	}{
		"applied, no operation id": {http.StatusOK, true, `{"status":"already_applied","stored_token":"5"}`},
		"stale, another operation": {http.StatusConflict, false, `{"error":"stale_token","operation_id":"theirs","stored_token":"9"}`},
		"in progress, another one": {http.StatusConflict, false, `{"error":"operation_in_progress","operation_id":"theirs"}`},
	} {
		h := http.Header{}
		if c.already {
			h.Set(httpfence.HeaderAlreadyApplied, "true")
		}
		r := &http.Response{StatusCode: c.status, Header: h, Body: io.NopCloser(strings.NewReader(c.body)), Request: sent}
		if err := httpfence.CheckResponse(r); !errors.Is(err, httpfence.ErrAnswerMismatch) || errors.Is(err, fence.ErrAlreadyApplied) {
			t.Errorf("%s: %v, want ErrAnswerMismatch", name, err)
		}
	}
}

// otherOpGuard is a guard whose effect log answers with another
// operation's record: a store that is broken, or a Guard of one's own
// that looks the record up by the wrong key.
type otherOpGuard struct{}

func (otherOpGuard) Guard(_ context.Context, f fence.Fence, _ func(context.Context) error) error {
	return &fence.AlreadyAppliedError{Record: fence.Effect{OperationID: "theirs", Resource: f.Resource, Token: f.Token}, Fence: f}
}

// The middleware answers "already applied" only for the request's own
// operation: a guard reporting another operation's record as applied is a
// store failure, logged, answered 500 fence_refused without running the
// handler, never the already-applied answer.
func TestMiddlewareRefusesGuardAnsweringAnotherOperation(t *testing.T) {
	var logs bytes.Buffer
	ran := false
	srv := httptest.NewServer(httpfence.Middleware(otherOpGuard{}, httpfence.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { ran = true })))
	t.Cleanup(srv.Close)
	r := postFenced(t, srv.URL, "acct:1", "1000", "w", "mine")
	if r.status != http.StatusInternalServerError || r.body.Error != "fence_refused" || r.body.Status != "" {
		t.Fatalf("answer %d %q, want 500 fence_refused", r.status, r.raw)
	}
	if errors.Is(r.err, fence.ErrAlreadyApplied) || ran {
		t.Fatalf("CheckResponse = %v, handler ran: %v", r.err, ran)
	}
	if !strings.Contains(logs.String(), "theirs") || !strings.Contains(logs.String(), "mine") {
		t.Errorf("log %q does not name both operation ids", logs.String())
	}
}
