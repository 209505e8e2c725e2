package browser

import (
	"fmt"
	"os"
	"testing"
)

// ChromiumPath is where Debian's chromium package puts the browser.
const ChromiumPath = "/usr/bin/chromium"

// NeedChromium returns the browser's path for a test, or fails it (under CI,
// where the environment variable CI is set) or skips it loudly, naming the
// package to install. Nothing is ever downloaded.
func NeedChromium(tb testing.TB) string {
	tb.Helper()
	if _, err := os.Stat(ChromiumPath); err == nil {
		return ChromiumPath
	}
	msg := fmt.Sprintf("headless Chromium is not installed at %s; install it with `apt-get install -y chromium` (Debian package chromium)", ChromiumPath)
	if os.Getenv("CI") != "" {
		tb.Fatal(msg)
	}
	fmt.Fprintln(os.Stderr, "SKIPPING the real-browser test "+tb.Name()+": "+msg)
	tb.Skip("SKIPPING: " + msg)
	return ""
}
