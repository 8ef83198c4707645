package main

import (
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"

	"github.com/wophost/wophost/core/config"
)

// diagnosticText renders d as config.FormatDiagnostic does, but keeps the
// line breaks of its detail: a detail that lists problems one a line (a
// refused pack.json) stays a list, each line indented under the first.
func diagnosticText(d *hcl.Diagnostic) string {
	lines := strings.Split(strings.TrimRight(d.Detail, "\n"), "\n")
	head := *d
	head.Detail = lines[0]
	var b strings.Builder
	b.WriteString(config.FormatDiagnostic(&head))
	for _, l := range lines[1:] {
		if t := strings.Join(strings.Fields(l), " "); t != "" {
			b.WriteString("\n  ")
			b.WriteString(t)
		}
	}
	return b.String()
}

// warnDiagnostics logs each of diags at warning level, one entry each,
// a listing detail kept as a list (hclog writes a message's lines as they
// are in text format; JSON format escapes them).
func warnDiagnostics(logger hclog.Logger, diags hcl.Diagnostics) {
	for _, d := range diags {
		logger.Warn(diagnosticText(d))
	}
}

// sortDiagnostics orders diags by where they are in the config, so that
// one report reads in the file's order whichever step found each; those
// without a place come first, and ties keep their order.
func sortDiagnostics(diags hcl.Diagnostics) {
	slices.SortStableFunc(diags, func(a, b *hcl.Diagnostic) int {
		switch {
		case a.Subject == nil && b.Subject == nil:
			return 0
		case a.Subject == nil:
			return -1
		case b.Subject == nil:
			return 1
		}
		if c := strings.Compare(a.Subject.Filename, b.Subject.Filename); c != 0 {
			return c
		}
		return a.Subject.Start.Byte - b.Subject.Start.Byte
	})
}

// countProblems says how many problems there are: "no problems",
// "1 problem", "3 problems".
func countProblems(n int) string {
	switch n {
	case 0:
		return "no problems"
	case 1:
		return "1 problem"
	}
	return strconv.Itoa(n) + " problems"
}

// countWarnings is ", 1 warning" or ", 2 warnings" for the n warnings
// shown beside the problems, and "" for none.
func countWarnings(n int) string {
	switch n {
	case 0:
		return ""
	case 1:
		return ", 1 warning"
	}
	return ", " + strconv.Itoa(n) + " warnings"
}
