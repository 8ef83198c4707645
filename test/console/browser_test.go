package console_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Environment variables the tests read.
const (
	// envBrowser, set (as CI sets it), makes a missing browser fail the
	// tests rather than skip them.
	envBrowser = "WOPHOST_TEST_BROWSER"
	// envScreenshots names the directory the screenshots are written
	// into; without it they go into a new directory under os.TempDir().
	envScreenshots = "WOPHOST_CONSOLE_SCREENSHOTS"
)

// browserNames are the commands a Chromium is found as, in order.
var browserNames = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}

// findBrowser returns the path of a Chromium, skipping t without one
// unless envBrowser is set.
func findBrowser(t *testing.T) string {
	t.Helper()
	for _, name := range browserNames {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := fmt.Sprintf("no Chromium found (looked for %s)", strings.Join(browserNames, ", "))
	if os.Getenv(envBrowser) != "" {
		t.Fatalf("%s, and %s is set", msg, envBrowser)
	}
	t.Skip(msg)
	return ""
}

// Window sizes: a desktop's, which the screenshots have, and a phone's.
const (
	desktopWidth, desktopHeight = 1280, 900
	phoneWidth, phoneHeight     = 390, 844
)

// waitTimeout bounds each wait for a page to show something, and
// actionTimeout each action on the browser: an element that never shows
// fails the test instead of holding it until go test's timeout.
const (
	waitTimeout   = 30 * time.Second
	actionTimeout = 30 * time.Second
)

// tab is one browser tab on a console, with what the page has written to
// its console since the tab opened.
type tab struct {
	ctx  context.Context
	base string
	// shots is where screenshots are written.
	shots string
	// allowed says which failing messages the test expects (nil: none).
	allowed func(chromedp.ConsoleMessage) bool

	mu       sync.Mutex
	messages []chromedp.ConsoleMessage
	// seen is how many messages checkMessages has looked at.
	seen int
}

// newTab starts a headless Chromium with a profile of its own and opens
// a tab on the console at base (such as "http://127.0.0.1:7427"). Every
// console message, uncaught exception and browser log entry of the tab
// is kept for checkMessages, which the end of the test runs once more;
// the browser ends with the test.
func newTab(t *testing.T, exe, base, shots string, allowed func(chromedp.ConsoleMessage) bool) *tab {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.Headless,
		// CI runs as root, where Chromium's sandbox cannot start.
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.WindowSize(desktopWidth, desktopHeight),
		chromedp.UserDataDir(t.TempDir()),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	// The first action starts the browser: with no deadline, which would
	// end the browser with it.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start %s: %v", exe, err)
	}
	tb := &tab{ctx: ctx, base: base, shots: shots, allowed: allowed}
	messages := chromedp.Console(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range messages {
			if err != nil {
				return
			}
			tb.mu.Lock()
			tb.messages = append(tb.messages, m)
			tb.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	t.Cleanup(func() { tb.checkMessages(t) })
	return tb
}

// failure reports whether a console message is one the tests fail on: an
// uncaught exception, a console.error call, or an error of the browser's
// log, where a Content-Security-Policy violation and a failed load land.
func failure(m chromedp.ConsoleMessage) bool {
	return m.IsException() || m.Type == chromedp.ConsoleError
}

// checkMessages fails t for each failing console message since the last
// check, except those tb.allowed says are expected; it returns how many
// were allowed.
func (tb *tab) checkMessages(t *testing.T) int {
	t.Helper()
	// The events of the last actions may still be on their way.
	tb.do(t, "a round trip", chromedp.Evaluate[chromedp.Void](`0`))
	time.Sleep(100 * time.Millisecond)
	tb.mu.Lock()
	fresh := tb.messages[tb.seen:]
	tb.seen = len(tb.messages)
	tb.mu.Unlock()
	n := 0
	for _, m := range fresh {
		switch {
		case !failure(m):
		case tb.allowed != nil && tb.allowed(m):
			n++
		default:
			t.Errorf("the page wrote %s (at %s:%d, source %q)", m, m.URL, m.Line, m.Source)
		}
	}
	return n
}

// open navigates to the console path and waits until the element ready
// (a CSS selector) is in the page.
func (tb *tab) open(t *testing.T, path, ready string) {
	t.Helper()
	tb.do(t, "open "+path, chromedp.Navigate(tb.base+path))
	tb.waitFor(t, fmt.Sprintf("document.querySelector(%q) !== null", ready), "%s to show %s", path, ready)
}

// waitFor evaluates the JavaScript expression cond until it is true, and
// fails t after waitTimeout with what the page shows. The page's policy
// forbids eval, so the polling is done from here, one evaluation at a
// time.
func (tb *tab) waitFor(t *testing.T, cond, format string, args ...any) {
	t.Helper()
	tb.waitWithin(t, waitTimeout, cond, format, args...)
}

// waitWithin is waitFor with a timeout of its own.
func (tb *tab) waitWithin(t *testing.T, timeout time.Duration, cond, format string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if run(t, tb, cond, chromedp.Evaluate[bool](cond)) {
			return
		}
		if time.Now().After(deadline) {
			shown := evaluate[string](t, tb, `document.body.innerText`)
			t.Fatalf("waited %v for "+format+"; the page shows:\n%s", append([]any{timeout}, append(args, shown)...)...)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// evaluate returns the value of a JavaScript expression in the page.
func evaluate[T any](t *testing.T, tb *tab, expr string) T {
	t.Helper()
	return run(t, tb, expr, chromedp.Evaluate[T](expr))
}

// run runs an action in the tab within actionTimeout and returns its
// value; what names it when it fails.
func run[T any](t *testing.T, tb *tab, what string, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, actionTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// do runs actions in the tab, in order, within actionTimeout.
func (tb *tab) do(t *testing.T, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, actionTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// shoot writes a full-page PNG of the page as name.png.
func (tb *tab) shoot(t *testing.T, name string) {
	t.Helper()
	png := run(t, tb, "screenshot "+name, chromedp.FullScreenshot(100))
	if err := os.WriteFile(filepath.Join(tb.shots, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// screenshotDir returns the directory the screenshots go into, made if
// need be.
func screenshotDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv(envScreenshots)
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "wophost-console-screenshots-"); err != nil {
			t.Fatal(err)
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots in %s", dir)
	return dir
}
