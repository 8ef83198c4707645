package wire

import (
	"strings"
	"testing"
)

func TestLastWords(t *testing.T) {
	t.Run("nothing written is nothing said", func(t *testing.T) {
		if got := (&LastWords{}).String(); got != "" {
			t.Errorf("got %q", got)
		}
	})
	t.Run("the last three lines, on one line", func(t *testing.T) {
		w := &LastWords{}
		for _, l := range []string{"one", "two", "", "three", "four"} {
			_, _ = w.Write([]byte(l + "\n"))
		}
		if got, want := w.String(), "two | three | four"; got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	})
	t.Run("a panic from its first line, not the stack's end", func(t *testing.T) {
		w := &LastWords{}
		_, _ = w.Write([]byte("started\npanic: the plugin panicked\n\ngoroutine 1 [running]:\nmain.main()\n\t/src/main.go:12\nexit status 2\n"))
		got := w.String()
		if !strings.HasPrefix(got, "panic: the plugin panicked | goroutine 1 [running]:") {
			t.Errorf("got %q, want it to start at the panic", got)
		}
	})
	t.Run("a line merely mentioning a panic is no panic", func(t *testing.T) {
		w := &LastWords{}
		_, _ = w.Write([]byte("a\nb\nrecovered from panic: x\nc\n"))
		if got, want := w.String(), "b | recovered from panic: x | c"; got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	})
	t.Run("log lines in hclog's JSON form as the host logs them, without the chatter", func(t *testing.T) {
		w := &LastWords{}
		_, _ = w.Write([]byte(`{"@level":"info","@message":"opening the store","@module":"kv","@timestamp":"2026-12-01T14:03:25.660000Z","path":"kv.db"}` + "\n" +
			`{"@level":"debug","@message":"plugin address","address":"/tmp/plugin1","network":"unix"}` + "\n" +
			`{"@level":"error","@message":"cannot open the store","attempt":3,"error":"locked"}` + "\n" +
			`{"not":"a log line"}` + "\n"))
		want := `opening the store path=kv.db | cannot open the store attempt=3 error=locked | {"not":"a log line"}`
		if got := w.String(); got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	})
	t.Run("kept and shown within their bounds", func(t *testing.T) {
		w := &LastWords{}
		for range 1000 {
			_, _ = w.Write([]byte(strings.Repeat("é", 100) + "\n"))
		}
		if n := len(w.buf); n > lastWordsKeep {
			t.Errorf("kept %d bytes, more than %d", n, lastWordsKeep)
		}
		got := w.String()
		if len(got) > lastWordsShown+len("…") || !strings.HasSuffix(got, "…") {
			t.Errorf("shown %d bytes (%q), want at most %d and the cut marked", len(got), got[:20], lastWordsShown)
		}
		if !strings.HasPrefix(got, "é") {
			t.Errorf("shown text starts mid-character: %q", got[:4])
		}
	})
}
