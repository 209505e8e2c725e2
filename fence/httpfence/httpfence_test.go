package httpfence_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fence/httpfence"
	"github.com/fencedq/fencedq/fence/pgfence"
	"github.com/fencedq/fencedq/fence/redisfence"
	"github.com/fencedq/fencedq/internal/pgtest"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/lease"
)

func fz(resource string, tok lease.Token, owner, op string) fence.Fence {
	return fence.Fence{Resource: resource, Token: tok, Owner: owner, OperationID: op}
}

func TestTransportSetsHeadersFromContext(t *testing.T) {
	var mu sync.Mutex
	var got []http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Clone())
		mu.Unlock()
	}))
	defer srv.Close()
	client := &http.Client{Transport: &httpfence.Transport{}}
	ctx := t.Context()

	f := fz("acct:42", 1_800_000_000_000_123, "worker-a", "job-7")
	req, _ := http.NewRequestWithContext(fence.NewContext(ctx, f), http.MethodPost, srv.URL, strings.NewReader("x"))
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if req.Header.Get(httpfence.HeaderToken) != "" {
		t.Fatal("Transport modified the caller's request")
	}
	req, _ = http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	resp, err = client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	h := got[0]
	for name, want := range map[string]string{
		httpfence.HeaderToken: "1800000000000123", httpfence.HeaderResource: "acct:42",
		httpfence.HeaderOwner: "worker-a", httpfence.HeaderIdempotencyKey: "job-7",
	} {
		if h.Get(name) != want {
			t.Errorf("%s = %q, want %q", name, h.Get(name), want)
		}
	}
	if got[1].Get(httpfence.HeaderToken) != "" {
		t.Error("request without a fence got fencing headers")
	}

	strict := &http.Client{Transport: &httpfence.Transport{Require: true}}
	req, _ = http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	if _, err := strict.Do(req); !errors.Is(err, httpfence.ErrMissing) {
		t.Fatalf("Require without fence: %v", err)
	}
	req, _ = http.NewRequestWithContext(fence.NewContext(ctx, fz("r", 0, "o", "op")), http.MethodGet, srv.URL, nil)
	if _, err := client.Do(req); !errors.Is(err, fence.ErrInvalid) {
		t.Fatalf("invalid fence in context: %v", err)
	}
	if len(got) != 2 {
		t.Fatalf("server saw %d requests, want 2", len(got))
	}
}

func TestSetHeadersRejectsInvalid(t *testing.T) {
	req := httptest.NewRequest(http.MethodPost, "/", nil)
	for _, f := range []fence.Fence{{}, fz("r\n", 1, "o", "op"), fz("r", 1, "o\x00", "op")} {
		if err := httpfence.SetHeaders(req, f); !errors.Is(err, fence.ErrInvalid) {
			t.Errorf("SetHeaders(%q) = %v, want ErrInvalid", f, err)
		}
	}
	if len(req.Header) != 0 {
		t.Fatalf("headers set by a rejected fence: %v", req.Header)
	}
}

// backend is a fenced service: its handler counts its runs and, with
// ?fail=1, answers 500.
type backend struct {
	guard httpfence.Guard
	// write performs the handler's durable write (through the guard's
	// transaction for Postgres); writes reports how many were kept.
	write  func(ctx context.Context) error
	writes func(ctx context.Context) int
	// failedKept is whether a failing handler's write survives: yes for
	// this test's in-memory counter behind the Redis guard, no for writes
	// in the Postgres guard's transaction.
	failedKept bool
}

func redisBackend(t *testing.T) backend {
	c := redistest.Start(t, redistest.Options{}).Client()
	s, err := redisfence.New(c, redisfence.Config{Namespace: redistest.Namespace(t)})
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int32
	return backend{
		guard:      s,
		write:      func(context.Context) error { n.Add(1); return nil },
		writes:     func(context.Context) int { return int(n.Load()) },
		failedKept: true,
	}
}

func pgBackend(t *testing.T) backend {
	pool := pgtest.New(t)
	ctx := t.Context()
	if err := pgfence.Migrate(ctx, pool, pgfence.Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE writes (id serial PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	s, err := pgfence.New(pool, pgfence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return backend{
		guard: s,
		write: func(ctx context.Context) error {
			tx, ok := pgfence.TxFromContext(ctx)
			if !ok {
				return errors.New("no transaction in the handler's context")
			}
			_, err := tx.Exec(ctx, `INSERT INTO writes DEFAULT VALUES`)
			return err
		},
		writes: func(ctx context.Context) int {
			var n int
			_ = pool.QueryRow(ctx, `SELECT count(*) FROM writes`).Scan(&n)
			return n
		},
	}
}

// fencedServer serves b's write behind the middleware: 201 when it is
// written, 500 when it fails.
func fencedServer(t *testing.T, b backend) *httptest.Server {
	srv := httptest.NewServer(httpfence.Middleware(b.guard, httpfence.Options{})(http.HandlerFunc(
		func(w http.ResponseWriter, r *http.Request) {
			if err := b.write(r.Context()); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			w.WriteHeader(http.StatusCreated)
		})))
	t.Cleanup(srv.Close)
	return srv
}

// reply is a fenced server's answer to postFenced.
type reply struct {
	status int
	body   httpfence.ErrorBody
	raw    string
	err    error // CheckResponse
}

// postFenced sends a write to url with the fence's headers set as given
// (raw strings, so a test can send what no lease mints).
func postFenced(t *testing.T, url, resource, token, owner, op string) reply {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url, nil)
	req.Header.Set(httpfence.HeaderToken, token)
	req.Header.Set(httpfence.HeaderResource, resource)
	req.Header.Set(httpfence.HeaderOwner, owner)
	req.Header.Set(httpfence.HeaderIdempotencyKey, op)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := reply{status: resp.StatusCode, err: httpfence.CheckResponse(resp)}
	raw, _ := io.ReadAll(resp.Body)
	r.raw = string(raw)
	_ = json.Unmarshal(raw, &r.body)
	return r
}

func TestMiddleware(t *testing.T) {
	for name, mk := range map[string]func(*testing.T) backend{"redis": redisBackend, "postgres": pgBackend} {
		t.Run(name, func(t *testing.T) { testMiddleware(t, mk(t)) })
	}
}

type answer struct {
	status int
	header http.Header
	body   httpfence.ErrorBody
	raw    string
	err    error // CheckResponse
}

func testMiddleware(t *testing.T, b backend) {
	ctx := t.Context()
	var calls atomic.Int32
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		f, ok := fence.FromContext(r.Context())
		if !ok {
			http.Error(w, "no fence in context", http.StatusInternalServerError)
			return
		}
		if r.URL.Query().Get("fail") == "1" {
			_ = b.write(r.Context()) // must be rolled back or not count
			http.Error(w, "failed", http.StatusInternalServerError)
			return
		}
		if err := b.write(r.Context()); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("X-Written", f.OperationID)
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "written by %d", f.Token)
	})
	srv := httptest.NewServer(httpfence.Middleware(b.guard, httpfence.Options{})(handler))
	defer srv.Close()
	open := httptest.NewServer(httpfence.Middleware(b.guard, httpfence.Options{AllowUnfenced: true})(handler))
	defer open.Close()
	client := &http.Client{Transport: &httpfence.Transport{}}

	send := func(url string, f *fence.Fence, hdr map[string]string) answer {
		t.Helper()
		rctx := ctx
		if f != nil {
			rctx = fence.NewContext(ctx, *f)
		}
		req, _ := http.NewRequestWithContext(rctx, http.MethodPost, url, strings.NewReader("payload"))
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		a := answer{status: resp.StatusCode, header: resp.Header, err: httpfence.CheckResponse(resp)}
		raw, _ := io.ReadAll(resp.Body)
		a.raw = string(raw)
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
			if err := json.Unmarshal(raw, &a.body); err != nil {
				t.Fatalf("bad JSON %q: %v", raw, err)
			}
		}
		return a
	}

	// Missing headers: 428, handler not run.
	if a := send(srv.URL, nil, nil); a.status != http.StatusPreconditionRequired || a.body.Error != "fence_required" {
		t.Fatalf("no headers: %d %q", a.status, a.raw)
	}
	if a := send(srv.URL, nil, map[string]string{httpfence.HeaderToken: "5", httpfence.HeaderResource: "r"}); a.status != http.StatusPreconditionRequired ||
		!strings.Contains(a.body.Message, httpfence.HeaderIdempotencyKey) {
		t.Fatalf("some headers: %d %q", a.status, a.raw)
	}
	if a := send(srv.URL, nil, map[string]string{httpfence.HeaderToken: "-5", httpfence.HeaderResource: "r",
		httpfence.HeaderOwner: "o", httpfence.HeaderIdempotencyKey: "k"}); a.status != http.StatusBadRequest || a.body.Error != "invalid_fence" {
		t.Fatalf("malformed token: %d %q", a.status, a.raw)
	}
	if calls.Load() != 0 {
		t.Fatalf("handler ran %d times for rejected requests", calls.Load())
	}
	// AllowUnfenced lets a request without headers through (the handler
	// then finds no fence in its context).
	if a := send(open.URL, nil, nil); a.status != http.StatusInternalServerError || calls.Load() != 1 {
		t.Fatalf("unfenced on open server: %d %q, calls %d", a.status, a.raw, calls.Load())
	}
	calls.Store(0)

	// Accepted.
	f10 := fz("acct:1", 10, "w-a", "op-1")
	a := send(srv.URL, &f10, nil)
	if a.status != http.StatusCreated || a.raw != "written by 10" || a.header.Get("X-Written") != "op-1" || a.err != nil {
		t.Fatalf("fenced write: %d %q %v", a.status, a.raw, a.err)
	}
	// Already applied: 200, header, handler not re-run.
	a = send(srv.URL, &f10, nil)
	if a.status != http.StatusOK || a.header.Get(httpfence.HeaderAlreadyApplied) != "true" ||
		a.body.Status != "already_applied" || a.body.StoredToken != "10" || calls.Load() != 1 {
		t.Fatalf("repeat: %d %q, calls %d", a.status, a.raw, calls.Load())
	}
	var ae *fence.AlreadyAppliedError
	if !errors.As(a.err, &ae) || ae.Record.Token != 10 || ae.Record.OperationID != "op-1" {
		t.Fatalf("CheckResponse(repeat) = %v", a.err)
	}
	if ae.Fence != f10 || ae.Elsewhere() {
		t.Fatalf("CheckResponse(repeat): refused fence %+v, want %+v", ae.Fence, f10)
	}
	// The same operation id on another resource: already applied, and the
	// answer names the resource and fence that applied it.
	other := fz("acct:2", 5, "w-b", "op-1")
	a = send(srv.URL, &other, nil)
	if a.status != http.StatusOK || a.body.StoredResource != "acct:1" || a.body.StoredOwner != "" || calls.Load() != 1 {
		t.Fatalf("same op id on another resource: %d %q, calls %d", a.status, a.raw, calls.Load())
	}
	first := fence.Effect{OperationID: "op-1", Resource: "acct:1", Token: 10}
	if !errors.As(a.err, &ae) || ae.Record != first || ae.Fence != other || !ae.Elsewhere() {
		t.Fatalf("CheckResponse(other resource) = %#v, want record %+v", a.err, first)
	}
	// Stale: 409 JSON, handler not run.
	f9 := fz("acct:1", 9, "w-old", "op-2")
	a = send(srv.URL, &f9, nil)
	if a.status != http.StatusConflict || a.body.Error != "stale_token" || a.body.StoredToken != "10" ||
		a.body.StoredOwner != "" || a.body.Token != "9" || calls.Load() != 1 {
		t.Fatalf("stale: %d %q, calls %d", a.status, a.raw, calls.Load())
	}
	var se *fence.StaleError
	if !errors.As(a.err, &se) || se.StoredToken != 10 || se.Fence.Token != 9 {
		t.Fatalf("CheckResponse(stale) = %v", a.err)
	}
	// Equal token, other owner: stale too.
	fx := fz("acct:1", 10, "impostor", "op-3")
	if a := send(srv.URL, &fx, nil); a.status != http.StatusConflict || a.body.Error != "stale_token" {
		t.Fatalf("impostor: %d %q", a.status, a.raw)
	}
	// A failing handler does not record the operation: the retry runs.
	f11 := fz("acct:1", 11, "w-b", "op-4")
	if a := send(srv.URL+"?fail=1", &f11, nil); a.status != http.StatusInternalServerError || calls.Load() != 2 {
		t.Fatalf("failing handler: %d %q", a.status, a.raw)
	}
	if a := send(srv.URL, &f11, nil); a.status != http.StatusCreated || calls.Load() != 3 {
		t.Fatalf("retry after failure: %d %q, calls %d", a.status, a.raw, calls.Load())
	}
	// The same operation sent concurrently runs once.
	f12 := fz("acct:1", 12, "w-c", "op-5")
	var wg sync.WaitGroup
	statuses := make(chan int, 20)
	for range 20 {
		wg.Go(func() { statuses <- send(srv.URL, &f12, nil).status })
	}
	wg.Wait()
	close(statuses)
	created := 0
	for st := range statuses {
		switch st {
		case http.StatusCreated:
			created++
		case http.StatusOK, http.StatusConflict: // already applied; in progress (Redis)
		default:
			t.Errorf("concurrent duplicate: status %d", st)
		}
	}
	if created != 1 || calls.Load() != 4 {
		t.Fatalf("concurrent duplicates: %d created, handler calls %d (want 1 and 4)", created, calls.Load())
	}
	// Durable writes: op-1, op-4 and op-5 once each, plus the failed
	// attempt's write where the guard cannot roll it back.
	want := 3
	if b.failedKept {
		want++
	}
	if n := b.writes(ctx); n != want {
		t.Fatalf("durable writes %d, want %d", n, want)
	}
}
