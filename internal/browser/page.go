package browser

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
)

// Page is a tab with a flat session attached: its commands and events
// carry the session's id.
type Page struct {
	b       *Browser
	target  string
	session string
}

// NewPage opens a blank tab, attaches to it and enables the Page and
// Runtime domains (load, dialog, exception and console events).
func (b *Browser) NewPage(ctx context.Context) (*Page, error) {
	var target struct {
		TargetID string `json:"targetId"`
	}
	if err := b.Call(ctx, "Target.createTarget", map[string]any{"url": "about:blank"}, &target); err != nil {
		return nil, err
	}
	var attached struct {
		SessionID string `json:"sessionId"`
	}
	if err := b.Call(ctx, "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &attached); err != nil {
		return nil, err
	}
	p := &Page{b: b, target: target.TargetID, session: attached.SessionID}
	for _, domain := range []string{"Page.enable", "Runtime.enable"} {
		if err := p.Call(ctx, domain, nil, nil); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// Call sends a command to the page's session and decodes its result into
// result unless result is nil.
func (p *Page) Call(ctx context.Context, method string, params, result any) error {
	return p.b.call(ctx, p.session, method, params, result)
}

// On calls fn with the params of every later event named method (such as
// "Runtime.exceptionThrown") of the page. Handlers run one at a time, in
// the order the events came, on a goroutine of their own: they may call
// the page, but a handler that blocks holds up the next events.
func (p *Page) On(method string, fn func(params json.RawMessage)) {
	p.b.on(p.session, method, fn)
}

// Navigate loads url and waits for its load event. A navigation within
// the document (a new #fragment) loads nothing and returns at once.
func (p *Page) Navigate(ctx context.Context, url string) error {
	loaded, stop := p.b.waitEvent(p.session, "Page.loadEventFired")
	defer stop()
	var r struct {
		LoaderID  string `json:"loaderId"`
		ErrorText string `json:"errorText"`
	}
	if err := p.Call(ctx, "Page.navigate", map[string]any{"url": url}, &r); err != nil {
		return err
	}
	if r.ErrorText != "" {
		return fmt.Errorf("browser: navigate to %s: %s", url, r.ErrorText)
	}
	if r.LoaderID == "" {
		return nil
	}
	select {
	case <-loaded:
		return nil
	case <-p.b.done:
		return p.b.goneErr("Page.navigate")
	case <-ctx.Done():
		return fmt.Errorf("browser: waiting for %s to load: %w", url, context.Cause(ctx))
	}
}

// Eval evaluates the JavaScript expression expr in the page (awaiting it
// if it is a promise) and decodes its value, as JSON, into out unless out
// is nil. A thrown exception is an error, and so is an undefined value
// when out is not nil. The page's content security policy does not apply.
func (p *Page) Eval(ctx context.Context, expr string, out any) error {
	var r struct {
		Result struct {
			Type  string          `json:"type"`
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text      string `json:"text"`
			Exception *struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	params := map[string]any{"expression": expr, "returnByValue": true, "awaitPromise": true}
	if err := p.Call(ctx, "Runtime.evaluate", params, &r); err != nil {
		return err
	}
	if d := r.ExceptionDetails; d != nil {
		msg := d.Text
		if d.Exception != nil {
			msg += " " + d.Exception.Description
		}
		return fmt.Errorf("browser: evaluate %.200s: %s", expr, msg)
	}
	if out == nil {
		return nil
	}
	if r.Result.Type == "undefined" || r.Result.Value == nil {
		return fmt.Errorf("browser: evaluate %.200s: the value is %s, not JSON", expr, r.Result.Type)
	}
	if err := json.Unmarshal(r.Result.Value, out); err != nil {
		return fmt.Errorf("browser: evaluate %.200s: %w", expr, err)
	}
	return nil
}

// visible waits until the first element matching the CSS selector is
// rendered, scrolls it into view and returns the centre of its visible
// part, in the viewport's CSS pixels. The wait is one promise in the page
// that checks at once and again after every DOM mutation, so it wakes when
// the page changes rather than on a timer; ctx bounds it.
func (p *Page) visible(ctx context.Context, selector string) (x, y float64, err error) {
	sel, _ := json.Marshal(selector)
	expr := `((sel) => new Promise((resolve) => {
		const centre = () => {
			const e = document.querySelector(sel);
			if (!e || !e.isConnected) return null;
			e.scrollIntoView({block: 'center', inline: 'center', behavior: 'instant'});
			// an inline element wrapped over lines: the centre of its
			// bounding box may fall between its boxes, so aim at its first
			const r = e.getClientRects()[0] || e.getBoundingClientRect();
			if (r.width === 0 || r.height === 0 || getComputedStyle(e).visibility === 'hidden') return null;
			const left = Math.max(r.left, 0), right = Math.min(r.right, innerWidth);
			const top = Math.max(r.top, 0), bottom = Math.min(r.bottom, innerHeight);
			if (right <= left || bottom <= top) return null;
			return {x: (left + right) / 2, y: (top + bottom) / 2};
		};
		const now = centre();
		if (now) return resolve(now);
		const obs = new MutationObserver(() => {
			const pt = centre();
			if (pt) { obs.disconnect(); resolve(pt); }
		});
		obs.observe(document, {subtree: true, childList: true, attributes: true, characterData: true});
	}))(` + string(sel) + `)`
	var pt struct{ X, Y float64 }
	if err := p.Eval(ctx, expr, &pt); err != nil {
		if ctx.Err() != nil {
			return 0, 0, fmt.Errorf("browser: waiting for %s to be visible: %w", selector, context.Cause(ctx))
		}
		return 0, 0, err
	}
	return pt.X, pt.Y, nil
}

// Click waits until the first element matching the CSS selector is
// visible, scrolls it into view and clicks its centre with real mouse
// events (move, press, release), as a person would: whatever is on top
// at that point gets the click.
func (p *Page) Click(ctx context.Context, selector string) error {
	x, y, err := p.visible(ctx, selector)
	if err != nil {
		return err
	}
	for _, ev := range []map[string]any{
		{"type": "mouseMoved", "x": x, "y": y},
		{"type": "mousePressed", "x": x, "y": y, "button": "left", "buttons": 1, "clickCount": 1},
		{"type": "mouseReleased", "x": x, "y": y, "button": "left", "clickCount": 1},
	} {
		if err := p.Call(ctx, "Input.dispatchMouseEvent", ev, nil); err != nil {
			return fmt.Errorf("click %s: %w", selector, err)
		}
	}
	return nil
}

// Type waits until the first element matching the CSS selector is
// visible, focuses it and inserts text as typed input (the element gets
// its input events, as from a keyboard).
func (p *Page) Type(ctx context.Context, selector, text string) error {
	if _, _, err := p.visible(ctx, selector); err != nil {
		return err
	}
	sel, _ := json.Marshal(selector)
	var focused bool
	if err := p.Eval(ctx, `((sel) => { const e = document.querySelector(sel); e.focus(); return document.activeElement === e; })(`+string(sel)+`)`, &focused); err != nil {
		return err
	}
	if !focused {
		return errors.New("browser: type into " + selector + ": it does not take the focus")
	}
	return p.Call(ctx, "Input.insertText", map[string]any{"text": text}, nil)
}

// Screenshot returns a PNG of the whole page, beyond the viewport too.
func (p *Page) Screenshot(ctx context.Context) ([]byte, error) {
	var m struct {
		CSSContentSize struct {
			Width  float64 `json:"width"`
			Height float64 `json:"height"`
		} `json:"cssContentSize"`
	}
	if err := p.Call(ctx, "Page.getLayoutMetrics", nil, &m); err != nil {
		return nil, err
	}
	var shot struct {
		Data []byte `json:"data"` // base64 in the JSON
	}
	params := map[string]any{
		"format":                "png",
		"captureBeyondViewport": true,
		"fromSurface":           true,
		"clip": map[string]any{
			"x": 0, "y": 0, "scale": 1,
			"width":  math.Ceil(m.CSSContentSize.Width),
			"height": math.Ceil(m.CSSContentSize.Height),
		},
	}
	if err := p.Call(ctx, "Page.captureScreenshot", params, &shot); err != nil {
		return nil, err
	}
	return shot.Data, nil
}
