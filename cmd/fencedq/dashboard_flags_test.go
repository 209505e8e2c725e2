package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// urlWriter is a command's stdout that hands over the first URL printed.
type urlWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	once sync.Once
	url  chan string
}

func (w *urlWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if i := strings.Index(w.buf.String(), "http://"); i >= 0 && strings.Contains(w.buf.String()[i:], "\n") {
		u := strings.TrimSpace(w.buf.String()[i:])
		u = u[:strings.Index(u+"\n", "\n")]
		w.once.Do(func() { w.url <- u })
	}
	return len(p), nil
}

// startDashboard runs fencedq dashboard on a free port until the test ends
// and returns its URL.
func (e *operatorEnv) startDashboard(args ...string) string {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := &urlWriter{url: make(chan string, 1)}
	var errOut syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"dashboard", "--addr", "127.0.0.1:0", "--redis", e.url, "--namespace", e.ns, "--log-level", "error"}, args...), out, &errOut)
	}()
	e.t.Cleanup(func() { cancel(); <-done })
	select {
	case u := <-out.url:
		return u
	case code := <-done:
		done <- code // for the cleanup
		e.t.Fatalf("dashboard exited %d: %s", code, errOut.String())
		return ""
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestDashboardSecurityFlags: --protect-reads guards pages, --secure-cookie
// marks the CSRF cookie, --dashboard-token lets scripts act, replicas given
// the same --csrf-key accept each other's CSRF tokens (and with another key
// they refuse them), and --trusted-origins admits a proxy's origin.
func TestDashboardSecurityFlags(t *testing.T) {
	e := newOperatorEnv(t)
	e.enqueue() // the default queue exists
	key := strings.Repeat("0123456789abcdef", 2)
	creds := []string{"--dashboard-user", "ops", "--dashboard-password", "pw", "--unfenced"}
	a := e.startDashboard(append(creds, "--protect-reads", "--secure-cookie", "--csrf-key", key,
		"--dashboard-token", "script-token", "--trusted-origins", "https://ops.example.com")...)
	b := e.startDashboard(append(creds, "--csrf-key", key)...)
	other := e.startDashboard(append(creds, "--csrf-key", strings.Repeat("x", 32))...)

	do := func(method, url string, hdr map[string]string, cookie *http.Cookie) *http.Response {
		t.Helper()
		var body *strings.Reader
		if method == http.MethodPost {
			body = strings.NewReader(`{"note":"flag test"}`)
		} else {
			body = strings.NewReader("")
		}
		req, err := http.NewRequest(method, url, body)
		if err != nil {
			t.Fatal(err)
		}
		if method == http.MethodPost {
			req.Header.Set("Content-Type", "application/json")
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		if cookie != nil {
			req.AddCookie(cookie)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	auth := func(h map[string]string) map[string]string {
		req, _ := http.NewRequest(http.MethodGet, "/", nil)
		req.SetBasicAuth("ops", "pw")
		h["Authorization"] = req.Header.Get("Authorization")
		return h
	}

	if resp := do(http.MethodGet, a+"api/overview", map[string]string{}, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a read without credentials under --protect-reads: %s", resp.Status)
	}
	if resp := do(http.MethodGet, b+"api/overview", map[string]string{}, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("a read without --protect-reads: %s", resp.Status)
	}
	resp := do(http.MethodGet, a+"api/csrf", auth(map[string]string{}), nil)
	var csrf struct{ Token string }
	if err := json.NewDecoder(resp.Body).Decode(&csrf); err != nil || csrf.Token == "" {
		t.Fatalf("api/csrf: %s %v", resp.Status, err)
	}
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "fencedq_csrf" {
			cookie = c
		}
	}
	if cookie == nil || !cookie.Secure {
		t.Fatalf("CSRF cookie %+v: want it marked Secure under --secure-cookie", cookie)
	}

	pause := func(base string, hdr map[string]string) int {
		t.Helper()
		return do(http.MethodPost, base+"api/queues/default/pause", hdr, cookie).StatusCode
	}
	withCSRF := func() map[string]string { return auth(map[string]string{"X-CSRF-Token": csrf.Token}) }
	if code := pause(b, withCSRF()); code != http.StatusOK {
		t.Fatalf("a replica with the same --csrf-key refused the other's CSRF token: %d", code)
	}
	if code := pause(other, withCSRF()); code != http.StatusForbidden {
		t.Fatalf("a dashboard with another --csrf-key accepted the token: %d", code)
	}
	if code := do(http.MethodPost, a+"api/queues/default/resume", map[string]string{"Authorization": "Bearer script-token"}, nil).StatusCode; code != http.StatusOK {
		t.Fatalf("an action with --dashboard-token: %d", code)
	}
	proxied := withCSRF()
	proxied["Origin"] = "https://ops.example.com"
	if code := pause(a, proxied); code != http.StatusOK {
		t.Fatalf("an action from a --trusted-origins origin: %d", code)
	}
	proxied = withCSRF()
	proxied["Origin"] = "https://ops.example.com"
	if code := pause(b, proxied); code != http.StatusForbidden {
		t.Fatalf("an action from an untrusted origin: %d", code)
	}
}
