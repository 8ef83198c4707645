package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"
)

// Bounds of what the host keeps of a process's stderr.
const (
	// lastWordsKeep is how many of the last bytes a process wrote to
	// stderr the host keeps, to say why it went away.
	lastWordsKeep = 4096
	// lastWordsShown bounds what LastWords.String returns.
	lastWordsShown = 512
	// lastWordsLines is how many of the last lines LastWords.String returns
	// when the process did not panic.
	lastWordsLines = 3
)

// LastWords keeps the end of what a process wrote to stderr, so that an
// exit the host did not ask for, or a start that failed, can be reported
// with the process's own words rather than "exited unexpectedly" or
// go-plugin's guesses alone. Its zero value is ready; it is safe for
// concurrent use.
type LastWords struct {
	mu  sync.Mutex
	buf []byte
}

// Write keeps the last lastWordsKeep bytes written.
func (w *LastWords) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	if over := len(w.buf) - lastWordsKeep; over > 0 {
		w.buf = append(w.buf[:0], w.buf[over:]...)
	}
	return len(p), nil
}

// String returns what the process said last, on one line, at most
// lastWordsShown bytes: from a Go panic or fatal error on when the kept
// bytes hold one (its first lines say what went wrong; the stack after
// them does not), otherwise the last lastWordsLines lines. "" when the
// process wrote nothing.
func (w *LastWords) String() string {
	w.mu.Lock()
	text := string(w.buf)
	w.mu.Unlock()
	start := -1
	for _, marker := range []string{"panic: ", "fatal error: "} {
		if i := strings.LastIndex(text, marker); i >= 0 && (i == 0 || text[i-1] == '\n') && i > start {
			start = i
		}
	}
	var lines []string
	if start >= 0 {
		lines = nonEmptyLines(text[start:])
	} else {
		lines = nonEmptyLines(text)
		lines = lines[max(0, len(lines)-lastWordsLines):]
	}
	return clip(strings.Join(lines, " | "))
}

// clip is s cut to at most lastWordsShown bytes, at a character's
// boundary, the cut marked with "…".
func clip(s string) string {
	if len(s) <= lastWordsShown {
		return s
	}
	s = s[:lastWordsShown]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}

// nonEmptyLines splits text into lines, trimmed and plain (plainLine),
// dropping empty ones.
func nonEmptyLines(text string) []string {
	var out []string
	for _, l := range bytes.Split([]byte(text), []byte{'\n'}) {
		if s := plainLine(strings.TrimSpace(string(l))); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// plainLine is a line of stderr as it says why a process went away: a
// log line in hclog's JSON form (what the SDKs and go-plugin write) is
// its message and fields, "" at trace or debug level, which is chatter
// rather than a reason; any other line is itself.
func plainLine(l string) string {
	if !strings.HasPrefix(l, "{") {
		return l
	}
	var entry map[string]any
	if json.Unmarshal([]byte(l), &entry) != nil {
		return l
	}
	msg, ok := entry["@message"].(string)
	if !ok {
		return l
	}
	if level, _ := entry["@level"].(string); level == "trace" || level == "debug" {
		return ""
	}
	var b strings.Builder
	b.WriteString(msg)
	for _, k := range slices.Sorted(maps.Keys(entry)) {
		if strings.HasPrefix(k, "@") {
			continue
		}
		v, ok := entry[k].(string)
		if !ok {
			raw, _ := json.Marshal(entry[k])
			v = string(raw)
		}
		fmt.Fprintf(&b, " %s=%s", k, v)
	}
	return b.String()
}
