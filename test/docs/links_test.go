package docs_test

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"unicode"
)

// docPages returns the pages of the documentation, relative to the module
// root: README.md, docs/*.md and docs/families/*.md.
func docPages(t *testing.T, root string) []string {
	t.Helper()
	pages := []string{"README.md"}
	for _, pattern := range []string{"docs/*.md", "docs/families/*.md"} {
		matches, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range matches {
			rel, err := filepath.Rel(root, m)
			if err != nil {
				t.Fatal(err)
			}
			pages = append(pages, filepath.ToSlash(rel))
		}
	}
	sort.Strings(pages[1:])
	return pages
}

// inlineLink matches a Markdown inline link or image, [text](target) or
// [text](target "title"); the target is the first group.
var inlineLink = regexp.MustCompile(`\]\(([^()\s]+)(?:\s+"[^"]*")?\)`)

// headingLine matches an ATX heading; the text is the second group.
var headingLine = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)

// proseLines returns the lines of a Markdown page outside fenced code
// blocks, each with its 1-based number; inline code spans are blanked so
// that a link shown as code is not taken for one.
func proseLines(src string) (lines []string, numbers []int) {
	inFence := false
	codeSpan := regexp.MustCompile("`[^`]*`")
	for i, line := range strings.Split(src, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		lines = append(lines, codeSpan.ReplaceAllStringFunc(line, func(s string) string { return strings.Repeat(" ", len(s)) }))
		numbers = append(numbers, i+1)
	}
	return lines, numbers
}

// anchors returns the anchors GitHub gives the headings of a page: the
// heading's text without Markdown markup, lower-cased, with every
// character other than a letter, a digit, a space, "-" or "_" dropped and
// each space made a "-"; a repeated anchor gets "-1", "-2", … in order.
func anchors(src string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	inFence := false
	for _, line := range strings.Split(src, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		m := headingLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		slug := slugify(m[2])
		if n, ok := seen[slug]; ok {
			seen[slug] = n + 1
			out[slug+"-"+itoa(n+1)] = true
			continue
		}
		seen[slug] = 0
		out[slug] = true
	}
	return out
}

// markup matches the Markdown a heading's rendered text leaves out: a
// link's target (its text stays) and emphasis or code markers.
var (
	linkInText = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	markers    = strings.NewReplacer("`", "", "*", "", "_", "_")
)

// slugify is GitHub's anchor of a heading's text.
func slugify(text string) string {
	text = linkInText.ReplaceAllString(text, "$1")
	text = markers.Replace(text)
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

func itoa(n int) string {
	const digits = "0123456789"
	if n < 10 {
		return digits[n : n+1]
	}
	return itoa(n/10) + digits[n%10:n%10+1]
}

// TestDocLinks checks every relative link of README.md and the pages
// under docs/: its file exists (inside the repository), and an #anchor,
// into the same page or a Markdown page it names, is one of that page's
// headings under GitHub's rules.
func TestDocLinks(t *testing.T) {
	root := moduleRoot(t)
	pageAnchors := map[string]map[string]bool{}
	anchorsOf := func(rel string) (map[string]bool, error) {
		if a, ok := pageAnchors[rel]; ok {
			return a, nil
		}
		src, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			return nil, err
		}
		pageAnchors[rel] = anchors(string(src))
		return pageAnchors[rel], nil
	}
	checked := 0
	for _, page := range docPages(t, root) {
		src, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		lines, numbers := proseLines(string(src))
		for i, line := range lines {
			for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				checked++
				at := page + ":" + itoa(numbers[i])
				path, anchor, _ := strings.Cut(target, "#")
				rel := page
				if path != "" {
					rel = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(page), path)))
					if rel == ".." || strings.HasPrefix(rel, "../") {
						t.Errorf("%s: %s leads outside the repository", at, target)
						continue
					}
					if _, err := os.Stat(filepath.Join(root, rel)); err != nil {
						t.Errorf("%s: %s: no such file %s", at, target, rel)
						continue
					}
				}
				if anchor == "" {
					continue
				}
				if !strings.HasSuffix(rel, ".md") {
					t.Errorf("%s: %s: an anchor into a file that is not a Markdown page", at, target)
					continue
				}
				have, err := anchorsOf(rel)
				if err != nil {
					t.Errorf("%s: %v", at, err)
					continue
				}
				if !have[anchor] {
					t.Errorf("%s: %s: %s has no heading with the anchor #%s", at, target, rel, anchor)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative links found; the walk checked nothing")
	}
}

// TestSlugify pins the anchor rules on headings of the kind the pages
// have.
func TestSlugify(t *testing.T) {
	for text, want := range map[string]string{
		"Running the host as a daemon: `host serve`": "running-the-host-as-a-daemon-host-serve",
		"The pack's lock map":                        "the-packs-lock-map",
		"agentRuntime: agents declared by packs":     "agentruntime-agents-declared-by-packs",
		"4.2 promptLibrary":                          "42-promptlibrary",
		"The `http` block":                           "the-http-block",
		"Over [HTTP](x.md)":                          "over-http",
		"snake_case names":                           "snake_case-names",
	} {
		if got := slugify(text); got != want {
			t.Errorf("slugify(%q) = %q, want %q", text, got, want)
		}
	}
	a := anchors("# A\n## A\n```\n# A\n```\n### A\n")
	for _, want := range []string{"a", "a-1", "a-2"} {
		if !a[want] {
			t.Errorf("anchors: no %q in %v", want, a)
		}
	}
	if a["a-3"] {
		t.Errorf("anchors: a heading inside a code block counted: %v", a)
	}
}
