package browser

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// page is one headless Chromium tab of a test, with the steps both
// browser tests take: run actions under a per-step deadline (a failure
// leaves a screenshot, the location and the body), read a text, save a
// screenshot into the test's artifacts.
type page struct {
	t   *testing.T
	ctx context.Context
	dir string
}

// openPage starts the browser and its tab on a context of its own (a
// step's shorter deadline must not be the browser's); the test's cleanup
// closes it.
func openPage(t *testing.T, ctx context.Context, browser string, timeout time.Duration) *page {
	t.Helper()
	bctx, cancel := chromedp.NewContext(ctx, chromedp.WithAllocatorOptions(
		chromedp.ExecPath(browser), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.WindowSize(1280, 900)))
	t.Cleanup(cancel)
	bctx, cancelTimeout := context.WithTimeout(bctx, timeout)
	t.Cleanup(cancelTimeout)
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start %s: %v", browser, err)
	}
	return &page{t: t, ctx: bctx, dir: artifactsDir(t)}
}

func (p *page) shot(name string) {
	p.t.Helper()
	buf, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		p.t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(p.dir, name+".png")
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		p.t.Fatal(err)
	}
	p.t.Logf("screenshot %s", path)
}

func (p *page) step(what string, actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	sctx, cancel := context.WithTimeout(p.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(sctx, actions...); err != nil {
		if buf, serr := chromedp.Run(p.ctx, chromedp.FullScreenshot(100)); serr == nil {
			_ = os.WriteFile(filepath.Join(p.dir, "failure.png"), buf, 0o644)
		}
		loc, _ := chromedp.Run(p.ctx, chromedp.Location())
		html, _ := chromedp.Run(p.ctx, chromedp.OuterHTML(chromedp.CSS("body")))
		p.t.Fatalf("%s: %v (at %s)\n%s", what, err, loc, html)
	}
}

// post submits a form built in the page (the console's CSP allows no
// fetch, and a form is what a forged or hand-made page would send) and
// answers the status of the page that answers it.
func (p *page) post(path, fields string) int {
	p.t.Helper()
	js := `(() => { const f = document.createElement("form"); f.method = "post"; f.action = ` + strconv.Quote(path) + `;
		for (const [k, v] of new URLSearchParams(` + strconv.Quote(fields) + `)) { const i = document.createElement("input");
		i.type = "hidden"; i.name = k; i.value = v; f.appendChild(i); }
		document.body.appendChild(f); f.submit(); return true; })()`
	sctx, cancel := context.WithTimeout(p.ctx, 20*time.Second)
	defer cancel()
	resp, err := chromedp.RunResponse(sctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := chromedp.Evaluate[bool](js)(ctx, tg)
		return err
	}))
	if err != nil || resp == nil {
		p.t.Fatalf("POST %s: %v", path, err)
	}
	return int(resp.Status)
}

func (p *page) text(sel string) string {
	p.t.Helper()
	s, err := chromedp.Run(p.ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		p.t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

func (p *page) location() string {
	p.t.Helper()
	l, err := chromedp.Run(p.ctx, chromedp.Location())
	if err != nil {
		p.t.Fatal(err)
	}
	return l
}

// loaded waits until the page's document and its subresources (the
// stylesheet) have loaded: a query that matches once the HTML is parsed can
// run before the styles apply.
func loaded() chromedp.Action[chromedp.Void] {
	return chromedp.Poll[chromedp.Void](`document.readyState === "complete"`)
}

// requireBrowser finds Chromium or Chrome; without one the test fails
// under CI=true and skips loudly elsewhere.
func requireBrowser(t *testing.T) string {
	t.Helper()
	browser := findBrowser()
	if browser == "" {
		msg := "no Chromium or Chrome found (install the Debian package chromium, or set CHROME_PATH)"
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true: " + msg)
		}
		t.Skip("SKIPPING the browser test " + t.Name() + ": " + msg)
	}
	return browser
}
