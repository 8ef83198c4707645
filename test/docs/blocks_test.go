package docs_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// codeBlock is one fenced code block of a document.
type codeBlock struct {
	// lang is the word after the opening fence, "" for none.
	lang string
	text string
	// line is the 1-based line of the opening fence.
	line int
}

// fencedBlocks reads the fenced code blocks of the document at rel
// (relative to the module root). A block never closed fails t.
func fencedBlocks(t *testing.T, root, rel string) []codeBlock {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatalf("read %s: %v", rel, err)
	}
	const fence = "```"
	var out []codeBlock
	var body []string
	open, lang, start := false, "", 0
	for i, line := range strings.Split(string(src), "\n") {
		trimmed := strings.TrimSpace(line)
		if !strings.HasPrefix(trimmed, fence) {
			if open {
				body = append(body, line)
			}
			continue
		}
		if !open {
			open, lang, start, body = true, strings.TrimSpace(strings.TrimPrefix(trimmed, fence)), i+1, nil
			continue
		}
		open = false
		out = append(out, codeBlock{lang: lang, text: strings.Join(body, "\n"), line: start})
	}
	if open {
		t.Errorf("%s:%d: a code block is never closed", rel, start)
	}
	return out
}
