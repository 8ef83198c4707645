package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"net/url"
	"strings"
	"time"

	"github.com/wophost/wophost/sdk/wop"
)

// funcs are the templates' helpers. Each returns text, which the
// templates escape; none returns markup.
func funcs() template.FuncMap {
	return template.FuncMap{
		"dur":    formatDuration,
		"when":   formatTime,
		"pretty": prettyJSON,
		"short":  shortDigest,
		"join":   func(s []string) string { return strings.Join(s, ", ") },
		"envelope": func(e *wop.Error) string {
			b, _ := json.Marshal(e)
			return prettyJSON(b)
		},
		"bytes": formatBytes,
		// count writes n and the noun, singular or plural.
		"count": func(n uint64, one, many string) string {
			if n == 1 {
				return "1 " + one
			}
			return fmt.Sprintf("%d %s", n, many)
		},
		// seg escapes a value for one segment of a path: a prompt's name
		// holds slashes.
		"seg": url.PathEscape,
		"f1":  func(f float64) string { return fmt.Sprintf("%.1f", f) },
		// ms writes a latency in seconds as a duration.
		"ms": func(seconds float64) string { return formatDuration(time.Duration(seconds * float64(time.Second))) },
	}
}

// formatDuration writes d with three significant figures in the unit
// that suits it.
func formatDuration(d time.Duration) string {
	switch {
	case d <= 0:
		return "0"
	case d < time.Millisecond:
		return fmt.Sprintf("%d µs", d.Microseconds())
	case d < time.Second:
		return trimZeros(fmt.Sprintf("%.2f", float64(d)/float64(time.Millisecond))) + " ms"
	case d < time.Minute:
		return trimZeros(fmt.Sprintf("%.2f", d.Seconds())) + " s"
	}
	return d.Truncate(time.Second).String()
}

func trimZeros(s string) string {
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// formatTime writes t in UTC to the millisecond; the zero time is a
// dash.
func formatTime(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05.000Z")
}

// prettyJSON indents a JSON value for reading; what is not JSON is
// shown as it is.
func prettyJSON(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return string(b)
	}
	return out.String()
}

// shortDigest keeps a digest's algorithm and 12 hex digits.
func shortDigest(d string) string {
	if algo, hex, ok := strings.Cut(d, ":"); ok && len(hex) > 12 {
		return algo + ":" + hex[:12] + "…"
	}
	return d
}

// formatBytes writes n in bytes, KiB, MiB or GiB.
func formatBytes(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return trimZeros(fmt.Sprintf("%.1f", float64(n)/(1<<10))) + " KiB"
	case n < 1<<30:
		return trimZeros(fmt.Sprintf("%.1f", float64(n)/(1<<20))) + " MiB"
	}
	return trimZeros(fmt.Sprintf("%.1f", float64(n)/(1<<30))) + " GiB"
}
