package config

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hcled"
)

// Snippet limits: enough context to recognise the spot without flooding the
// terminal when a subject spans a whole block.
const (
	snippetContextLines = 1
	snippetMaxLines     = 6
)

// WriteDiagnostics renders diags for a terminal: severity and summary, then
// file:line:col with the enclosing block, a source snippet with the subject
// underlined, and the detail. files supplies the source (Loader.Files); a
// diagnostic whose file is unknown is printed without a snippet, one without
// a subject without its location.
func WriteDiagnostics(w io.Writer, files map[string]*hcl.File, diags hcl.Diagnostics) error {
	var b strings.Builder
	for _, d := range diags {
		writeDiagnostic(&b, files, d)
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("write diagnostics: %w", err)
	}
	return nil
}

// FormatDiagnostic renders d on one line as "file:line:col: summary: detail"
// for logs and JSON output; the location is omitted when d has no subject.
func FormatDiagnostic(d *hcl.Diagnostic) string {
	if d == nil {
		return ""
	}
	var b strings.Builder
	if d.Subject != nil {
		b.WriteString(posString(*d.Subject))
		b.WriteString(": ")
	}
	b.WriteString(d.Summary)
	if detail := strings.Join(strings.Fields(d.Detail), " "); detail != "" {
		b.WriteString(": ")
		b.WriteString(detail)
	}
	return b.String()
}

func writeDiagnostic(b *strings.Builder, files map[string]*hcl.File, d *hcl.Diagnostic) {
	if d == nil {
		return
	}
	severity := "Error"
	if d.Severity == hcl.DiagWarning {
		severity = "Warning"
	}
	fmt.Fprintf(b, "%s: %s\n", severity, d.Summary)

	if d.Subject != nil || d.Detail != "" {
		b.WriteString("\n")
	}
	if d.Subject != nil {
		file := files[d.Subject.Filename]
		context := ""
		if file != nil {
			context = hcled.ContextString(file, d.Subject.Start.Byte)
		}
		if context != "" {
			fmt.Fprintf(b, "  on %s (in %s):\n", posString(*d.Subject), context)
		} else {
			fmt.Fprintf(b, "  on %s:\n", posString(*d.Subject))
		}
		if file != nil {
			writeSnippet(b, file.Bytes, *d.Subject, d.Context)
		}
	}
	for line := range strings.SplitSeq(strings.TrimRight(d.Detail, "\n"), "\n") {
		if line == "" {
			b.WriteString("\n")
			continue
		}
		fmt.Fprintf(b, "  %s\n", line)
	}
	b.WriteString("\n")
}

// writeSnippet prints the subject's lines, preceded by a little context,
// each followed by a line of carets under the subject's part of it.
func writeSnippet(b *strings.Builder, src []byte, subject hcl.Range, ctx *hcl.Range) {
	lines := splitLines(src)
	if subject.Start.Line < 1 || subject.Start.Line > len(lines) || subject.End.Byte < subject.Start.Byte {
		return
	}
	lastSubject := subject.End.Line
	// A range that ends at the start of a line does not cover that line.
	if lastSubject > subject.Start.Line && subject.End.Column == 1 {
		lastSubject--
	}
	lastSubject = min(lastSubject, len(lines))

	first := subject.Start.Line - snippetContextLines
	if ctx != nil && ctx.Start.Line < first {
		first = ctx.Start.Line
	}
	first = max(first, 1, subject.Start.Line-snippetMaxLines/2)
	// Blank context lines only push the subject down.
	for first < subject.Start.Line && strings.TrimSpace(lines[first-1].text) == "" {
		first++
	}
	last := min(lastSubject, first+snippetMaxLines-1)

	width := max(4, len(fmt.Sprint(last)))
	for n := first; n <= last; n++ {
		ln := lines[n-1]
		fmt.Fprintf(b, "  %*d │ %s\n", width, n, ln.text)
		if n < subject.Start.Line {
			continue
		}
		from, to := 0, len(ln.text)
		if n == subject.Start.Line {
			from = subject.Start.Byte - ln.start
		} else {
			from = len(ln.text) - len(strings.TrimLeft(ln.text, " \t"))
		}
		if n == subject.End.Line {
			to = subject.End.Byte - ln.start
		}
		from = min(max(from, 0), len(ln.text))
		to = min(max(to, from), len(ln.text))
		carets := max(utf8.RuneCountInString(ln.text[from:to]), 1)
		fmt.Fprintf(b, "  %*s │ %s%s\n", width, "", indentFor(ln.text[:from]), strings.Repeat("^", carets))
	}
	if last < lastSubject {
		fmt.Fprintf(b, "  %*s │ …\n", width, "")
	}
}

type sourceLine struct {
	text  string
	start int // byte offset of the line in the file
}

func splitLines(src []byte) []sourceLine {
	var out []sourceLine
	start := 0
	for {
		i := bytes.IndexByte(src[start:], '\n')
		if i < 0 {
			out = append(out, sourceLine{text: strings.TrimSuffix(string(src[start:]), "\r"), start: start})
			return out
		}
		out = append(out, sourceLine{text: strings.TrimSuffix(string(src[start:start+i]), "\r"), start: start})
		start += i + 1
	}
}

// indentFor returns whitespace as wide as prefix on screen; tabs are kept as
// tabs so the carets line up however the terminal expands them.
func indentFor(prefix string) string {
	var b strings.Builder
	for _, r := range prefix {
		if r == '\t' {
			b.WriteByte('\t')
		} else {
			b.WriteByte(' ')
		}
	}
	return b.String()
}

// displayName shortens an absolute filename to one relative to the working
// directory when it lies below it, and otherwise leaves it as given.
func displayName(filename string) string {
	if !filepath.IsAbs(filename) {
		return filename
	}
	wd, err := os.Getwd()
	if err != nil {
		return filename
	}
	rel, err := filepath.Rel(wd, filename)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return filename
	}
	return rel
}
