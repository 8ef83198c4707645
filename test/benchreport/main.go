// Command benchreport turns the output of
//
//	go test -run '^$' -bench . ./test/bench/
//
// into one markdown table of the project's performance figures, printed
// to stdout, and guards them against regressions.
//
// Usage:
//
//	benchreport [-compare FILE] [-update FILE] [-tolerance 0.20] [BENCH_OUTPUT | -]
//
// The input is read from BENCH_OUTPUT, or from stdin when it is "-" or
// absent. With -count N, each metric is the median of its N samples.
//
// -compare FILE holds the figures against the table committed in FILE
// between the lines <!-- benchreport:begin --> and <!-- benchreport:end -->.
// A figure regresses when the number it guards (its ratio when it has
// one, else its value) is worse than the committed one by more than the
// tolerance. Figures measured on one side only are reported as notes.
//
// -update FILE writes the new table between those markers, adding them at
// the end of FILE (or creating FILE) when absent. With both flags the
// comparison runs against the old table first and the update happens even
// when it fails, so committing the file accepts a deliberate regression.
//
// Exit status: 0 when no figure regressed, 1 when one did, 2 on a usage
// error or unreadable input, committed table or output file.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
)

const usage = "usage: benchreport [-compare FILE] [-update FILE] [-tolerance 0.20] [BENCH_OUTPUT | -]"

// Exit statuses.
const (
	exitOK         = 0
	exitRegression = 1
	exitError      = 2
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run is the command with its streams passed in, so tests can drive it;
// it returns the exit status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("benchreport", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, usage)
		fs.PrintDefaults()
	}
	comparePath := fs.String("compare", "", "fail when a figure regressed against the table committed in `FILE`")
	updatePath := fs.String("update", "", "write the new table between the markers of `FILE`")
	tol := fs.Float64("tolerance", 0.20, "regression allowed before -compare fails, as a `fraction` of the committed number")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitError
	}
	if fs.NArg() > 1 {
		fmt.Fprintln(stderr, usage)
		return exitError
	}
	if *tol < 0 || math.IsNaN(*tol) || math.IsInf(*tol, 0) {
		fmt.Fprintf(stderr, "benchreport: -tolerance %s: want a fraction such as 0.2, not negative\n", strconv.FormatFloat(*tol, 'g', -1, 64))
		return exitError
	}

	res, err := readInput(fs.Arg(0), stdin)
	if err != nil {
		fmt.Fprintf(stderr, "benchreport: %v\n", err)
		return exitError
	}
	rows := measure(res, figures())
	block := render(res, rows)
	if _, err := io.WriteString(stdout, block); err != nil {
		fmt.Fprintf(stderr, "benchreport: write table: %v\n", err)
		return exitError
	}

	status := exitOK
	if *comparePath != "" {
		c, err := compareFile(*comparePath, rows, *tol)
		if err != nil {
			fmt.Fprintf(stderr, "benchreport: compare: %v\n", err)
			return exitError
		}
		for _, n := range c.notes {
			fmt.Fprintf(stderr, "benchreport: note: %s\n", n)
		}
		for _, r := range c.regressions {
			fmt.Fprintf(stderr, "benchreport: regression: %s\n", r)
		}
		if len(c.regressions) > 0 {
			fmt.Fprintf(stderr, "benchreport: %d of %d figures regressed against %s\n", len(c.regressions), c.checked, *comparePath)
			status = exitRegression
		} else {
			fmt.Fprintf(stderr, "benchreport: %d figures within tolerance of %s\n", c.checked, *comparePath)
		}
	}
	if *updatePath != "" {
		if err := updateFile(*updatePath, block); err != nil {
			fmt.Fprintf(stderr, "benchreport: update: %v\n", err)
			return exitError
		}
	}
	return status
}

// readInput parses the bench output in path, or stdin when path is "" or
// "-".
func readInput(path string, stdin io.Reader) (*results, error) {
	if path == "" || path == "-" {
		return parseResults(stdin, "stdin")
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read bench output: %w", err)
	}
	defer f.Close()
	return parseResults(f, path)
}
