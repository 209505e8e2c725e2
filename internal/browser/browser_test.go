//go:build unix

package browser

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const testPage = `<!doctype html>
<title>t</title>
<button id="b" style="margin-top: 2000px">press</button>
<p id="out">before</p>
<input id="in">
<p id="typed"></p>
<script>
document.getElementById('b').addEventListener('click', (e) => {
	document.getElementById('out').textContent = e.isTrusted ? 'clicked by a person' : 'clicked by a script';
});
document.getElementById('in').addEventListener('input', (e) => {
	document.getElementById('typed').textContent = e.target.value;
});
</script>`

func launch(t *testing.T) (context.Context, *Browser, *Page, *httptest.Server) {
	t.Helper()
	exe := NeedChromium(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, testPage)
	}))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	b, err := Launch(ctx, exe, Options{Width: 800, Height: 600})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	})
	p, err := b.NewPage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return ctx, b, p, srv
}

func eval[T any](t *testing.T, ctx context.Context, p *Page, expr string) T {
	t.Helper()
	var v T
	if err := p.Eval(ctx, expr, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestPage(t *testing.T) {
	ctx, _, p, srv := launch(t)
	exceptions := make(chan string, 10)
	p.On("Runtime.exceptionThrown", func(params json.RawMessage) {
		var ev struct {
			ExceptionDetails struct {
				Exception struct {
					Description string `json:"description"`
				} `json:"exception"`
			} `json:"exceptionDetails"`
		}
		if err := json.Unmarshal(params, &ev); err != nil {
			t.Error(err)
		}
		exceptions <- ev.ExceptionDetails.Exception.Description
	})
	dialogs := make(chan string, 10)
	p.On("Page.javascriptDialogOpening", func(params json.RawMessage) {
		var ev struct {
			Message string `json:"message"`
		}
		if err := json.Unmarshal(params, &ev); err != nil {
			t.Error(err)
		}
		// A handler may call the page: the dialog blocks the page until
		// it is answered.
		if err := p.Call(ctx, "Page.handleJavaScriptDialog", map[string]any{"accept": true}, nil); err != nil {
			t.Error(err)
		}
		dialogs <- ev.Message
	})

	if err := p.Navigate(ctx, srv.URL+"/"); err != nil {
		t.Fatal(err)
	}
	if got := eval[string](t, ctx, p, `document.readyState`); got != "complete" {
		t.Errorf("after Navigate the document is %q", got)
	}
	if w := eval[int](t, ctx, p, `innerWidth`); w != 800 {
		t.Errorf("window width %d, want 800", w)
	}
	if got := eval[[]int](t, ctx, p, `Promise.resolve([1, 2, 3])`); fmt.Sprint(got) != "[1 2 3]" {
		t.Errorf("awaited value %v", got)
	}
	if err := p.Eval(ctx, `undefined`, new(any)); err == nil {
		t.Error("an undefined value decoded without an error")
	}
	if err := p.Eval(ctx, `undefined`, nil); err != nil {
		t.Errorf("an undefined value, not decoded: %v", err)
	}
	if err := p.Eval(ctx, `(() => { throw new Error('boom in eval') })()`, nil); err == nil || !strings.Contains(err.Error(), "boom in eval") {
		t.Errorf("a thrown exception: %v", err)
	}

	// The button is below the fold: Click scrolls to it and the page sees
	// a trusted click.
	if err := p.Click(ctx, "#b"); err != nil {
		t.Fatal(err)
	}
	if got := eval[string](t, ctx, p, `document.getElementById('out').textContent`); got != "clicked by a person" {
		t.Errorf("after the click: %q", got)
	}
	if err := p.Type(ctx, "#in", "héllo wörld"); err != nil {
		t.Fatal(err)
	}
	if got := eval[string](t, ctx, p, `document.getElementById('typed').textContent`); got != "héllo wörld" {
		t.Errorf("typed: %q", got)
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err := p.Click(short, "#missing")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("clicking a missing element: %v", err)
	}

	// An uncaught exception and a dialog are delivered as events.
	if err := p.Eval(ctx, `setTimeout(() => { throw new Error('boom in a timer') }, 0); 1`, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-exceptions:
		if !strings.Contains(d, "boom in a timer") {
			t.Errorf("exception event: %q", d)
		}
	case <-ctx.Done():
		t.Fatal("no exception event")
	}
	if got := eval[bool](t, ctx, p, `confirm('sure?')`); !got {
		t.Error("the dialog was not accepted")
	}
	if d := <-dialogs; d != "sure?" {
		t.Errorf("dialog event: %q", d)
	}

	png, err := p.Screenshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(png) < 100 || string(png[:8]) != "\x89PNG\r\n\x1a\n" {
		t.Fatalf("screenshot: %d bytes, not a PNG", len(png))
	}
	// Full page: as tall as the document (the button is 2000px down), not
	// the 600px viewport.
	if h := int(png[20])<<24 | int(png[21])<<16 | int(png[22])<<8 | int(png[23]); h < 2000 {
		t.Errorf("screenshot height %d, want the whole page", h)
	}

	if err := p.Navigate(ctx, "http://127.0.0.1:1/"); err == nil {
		t.Error("navigating to a closed port succeeded")
	}
	if err := p.Call(ctx, "No.suchMethod", nil, nil); err == nil {
		t.Error("an unknown method succeeded")
	}
}

func alive(pid int) bool {
	return syscall.Kill(pid, 0) == nil
}

func TestClose(t *testing.T) {
	_, b, p, _ := launch(t)
	pid := b.cmd.Process.Pid
	if !alive(pid) {
		t.Fatal("chromium is not running")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if alive(pid) {
		t.Error("chromium still runs after Close")
	}
	if syscall.Kill(-pid, 0) == nil {
		out, _ := exec.Command("ps", "-o", "pid,ppid,pgid,stat,args", "-g", strconv.Itoa(pid)).CombinedOutput()
		t.Errorf("a helper process of chromium still runs after Close:\n%s", out)
	}
	if _, err := os.Stat(b.profile); !os.IsNotExist(err) {
		t.Errorf("the profile is still there: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := p.Eval(context.Background(), `1`, nil); err == nil {
		t.Error("a call after Close succeeded")
	}
}

func TestChromiumDies(t *testing.T) {
	_, b, p, _ := launch(t)
	// A call blocked on a dialog no one answers is pending when Chromium
	// dies; a later call comes after.
	opened := make(chan struct{})
	p.On("Page.javascriptDialogOpening", func(json.RawMessage) { close(opened) })
	pending := make(chan error, 1)
	go func() { pending <- p.Eval(context.Background(), `alert('wait')`, nil) }()
	select {
	case <-opened:
	case err := <-pending:
		t.Fatalf("the alert returned: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("no dialog")
	}
	if err := b.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	select {
	case err := <-pending:
		if err == nil || !strings.Contains(err.Error(), "chromium is gone") {
			t.Errorf("pending call: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a pending call still waits after chromium died")
	}
	err := p.Eval(context.Background(), `1`, nil)
	if err == nil || !strings.Contains(err.Error(), "signal: killed") || !strings.Contains(err.Error(), "output ends with") {
		t.Errorf("call after chromium died: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the calls took %v to fail", d)
	}
}
