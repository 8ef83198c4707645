// Command mutate runs a committed list of mutants over the code and fails
// when a test suite lets one survive. Each mutant is one exact text
// replacement in one file; the file is written, the tests named by the
// mutant run, and the file is restored byte for byte whatever happens.
//
// A mutant's text must occur exactly once in its file: when a refactor
// moves or rewords the code, the list fails loudly instead of mutating
// something else or nothing at all.
//
// A mutant of a Go file is not written into the tree: its tests build
// with the mutated file put in place by go's -overlay, through GOFLAGS so
// that the programs the tests build themselves get it too. Such mutants
// run -jobs at a time. A mutant of any other file (a template, the
// Makefile, a document) is written into the tree and restored, and runs
// alone, after them.
//
// Usage:
//
//	go run ./test/mutate [-list test/mutate/mutants.json] [-only ID,...] [-timeout 3m] [-jobs N]
//	go run ./test/mutate -check [-list test/mutate/mutants.json]
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"
)

// Mutant is one entry of the list.
type Mutant struct {
	// ID names the mutant in the table and for -only.
	ID string `json:"id"`
	// File is the file to mutate, relative to the repository root.
	File string `json:"file"`
	// Find is the exact text replaced; it must occur once in File.
	Find string `json:"find"`
	// Replace is the text put in its place.
	Replace string `json:"replace"`
	// Module is the module directory the tests run in: "." or "sdk".
	Module string `json:"module"`
	// Package is the package tested, as go test takes it from Module.
	Package string `json:"package"`
	// Run is the -run regexp of the tests that must kill the mutant.
	Run string `json:"run"`
}

// Outcome is what running the tests against a mutant gave.
type Outcome string

// The outcomes. Broken counts as killed: the compiler caught it.
const (
	Killed   Outcome = "killed"
	Survived Outcome = "SURVIVED"
	Broken   Outcome = "killed (does not compile)"
)

// result is one row of the table.
type result struct {
	mutant  Mutant
	outcome Outcome
	took    time.Duration
}

func main() {
	list := flag.String("list", "test/mutate/mutants.json", "the list of mutants, relative to the repository root")
	only := flag.String("only", "", "comma-separated ids of the mutants to run; all when empty")
	timeout := flag.Duration("timeout", 3*time.Minute, "the time allowed to one mutant's go test")
	jobs := flag.Int("jobs", runtime.NumCPU(), "how many mutants of Go files are tested at once")
	checkOnly := flag.Bool("check", false, "check the list against the tree (each text found exactly once) and run no mutant")
	flag.Parse()
	if *jobs < 1 {
		fmt.Fprintln(os.Stderr, "mutate: -jobs must be at least 1")
		os.Exit(2)
	}
	if *checkOnly {
		os.Exit(checkList(*list, os.Stdout, os.Stderr))
	}
	os.Exit(run(*list, *only, *timeout, *jobs, os.Stdout, os.Stderr))
}

// checkList checks every mutant of list against the tree, as run does
// before it mutates anything, and returns the exit code: 0 when each
// text occurs exactly once in its file, 2 otherwise. It is quick, so a
// refactor that moves a mutant's text fails at lint rather than after the
// tests.
func checkList(list string, stdout, stderr io.Writer) int {
	mutants, err := load(list)
	if err != nil {
		fmt.Fprintln(stderr, "mutate:", err)
		return 2
	}
	code := 0
	for _, m := range mutants {
		if err := check(m); err != nil {
			fmt.Fprintln(stderr, "mutate:", err)
			code = 2
		}
	}
	if code == 0 {
		fmt.Fprintf(stdout, "%d mutants, each text found once\n", len(mutants))
	}
	return code
}

// run runs the mutants and returns the exit code: 0 when all were killed,
// 1 when one survived, 2 when the list or a file is wrong.
func run(list, only string, timeout time.Duration, jobs int, stdout, stderr io.Writer) int {
	start := time.Now()
	mutants, err := load(list)
	if err != nil {
		fmt.Fprintln(stderr, "mutate:", err)
		return 2
	}
	if only != "" {
		ids := strings.Split(only, ",")
		mutants = pick(mutants, ids)
		// A mistyped id would otherwise run nothing and pass.
		if len(mutants) != len(ids) {
			fmt.Fprintf(stderr, "mutate: -only %s: %d of the ids are not in %s\n", only, len(ids)-len(mutants), list)
			return 2
		}
	}
	// Refuse the whole list before mutating anything, so a stale entry
	// does not leave a partial run behind.
	for _, m := range mutants {
		if err := check(m); err != nil {
			fmt.Fprintln(stderr, "mutate:", err)
			return 2
		}
	}

	// An interrupt cancels the running go test; the deferred restore of
	// the mutated file then runs before the program exits.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	results := make([]result, len(mutants))
	var overlaid, inPlace []int
	for i, m := range mutants {
		if overlays(m) {
			overlaid = append(overlaid, i)
		} else {
			inPlace = append(inPlace, i)
		}
	}
	scratch, err := os.MkdirTemp("", "wophost-mutate-")
	if err != nil {
		fmt.Fprintln(stderr, "mutate:", err)
		return 2
	}
	defer os.RemoveAll(scratch)

	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
		next     = make(chan int)
	)
	for range min(jobs, max(len(overlaid), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				m := mutants[i]
				mu.Lock()
				fmt.Fprintf(stderr, "== %s (%s: go test -run '%s' %s)\n", m.ID, m.File, m.Run, m.Package)
				mu.Unlock()
				t0 := time.Now()
				out, err := overlayAndTest(ctx, m, filepath.Join(scratch, fmt.Sprint(i)), timeout)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				results[i] = result{mutant: m, outcome: out, took: time.Since(t0)}
				mu.Unlock()
			}
		}()
	}
	for _, i := range overlaid {
		next <- i
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		fmt.Fprintln(stderr, "mutate:", firstErr)
		return 2
	}
	if ctx.Err() != nil {
		fmt.Fprintln(stderr, "mutate: interrupted; no file was changed")
		return 2
	}
	for _, i := range inPlace {
		m := mutants[i]
		fmt.Fprintf(stderr, "== %s (%s, in place: go test -run '%s' %s)\n", m.ID, m.File, m.Run, m.Package)
		t0 := time.Now()
		out, err := mutateAndTest(ctx, m, timeout)
		if err != nil {
			fmt.Fprintln(stderr, "mutate:", err)
			return 2
		}
		if ctx.Err() != nil {
			fmt.Fprintln(stderr, "mutate: interrupted; the file is restored")
			return 2
		}
		results[i] = result{mutant: m, outcome: out, took: time.Since(t0)}
	}
	return report(results, time.Since(start), stdout)
}

// load reads and validates the list.
func load(path string) ([]Mutant, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var ms []Mutant
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ms); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	seen := map[string]bool{}
	for i, m := range ms {
		if m.ID == "" || m.File == "" || m.Find == "" || m.Package == "" || m.Run == "" {
			return nil, fmt.Errorf("%s: mutant %d: id, file, find, package and run are required", path, i+1)
		}
		if m.Module != "." && m.Module != "sdk" {
			return nil, fmt.Errorf("%s: mutant %s: module %q is neither \".\" nor \"sdk\"", path, m.ID, m.Module)
		}
		if m.Find == m.Replace {
			return nil, fmt.Errorf("%s: mutant %s: the replacement changes nothing", path, m.ID)
		}
		if seen[m.ID] {
			return nil, fmt.Errorf("%s: mutant id %s is listed twice", path, m.ID)
		}
		seen[m.ID] = true
	}
	return ms, nil
}

// pick keeps the mutants whose id is in ids.
func pick(ms []Mutant, ids []string) []Mutant {
	want := map[string]bool{}
	for _, id := range ids {
		want[strings.TrimSpace(id)] = true
	}
	var out []Mutant
	for _, m := range ms {
		if want[m.ID] {
			out = append(out, m)
		}
	}
	return out
}

// check reports whether m's text occurs exactly once in its file.
func check(m Mutant) error {
	data, err := os.ReadFile(m.File)
	if err != nil {
		return fmt.Errorf("mutant %s: %w", m.ID, err)
	}
	if n := bytes.Count(data, []byte(m.Find)); n != 1 {
		return fmt.Errorf("mutant %s: its text occurs %d times in %s, want exactly once; update the list after a refactor", m.ID, n, m.File)
	}
	return nil
}

// overlays reports whether m is tested through an overlay rather than
// written into the tree: go's overlays replace Go source files, so a
// mutant of any other file, even one a Go file embeds, is written.
func overlays(m Mutant) bool {
	return strings.HasSuffix(m.File, ".go")
}

// overlayAndTest runs m's tests with m's file replaced, for every go
// command they run, by its mutated text in dir; the tree is not touched.
func overlayAndTest(ctx context.Context, m Mutant, dir string, timeout time.Duration) (Outcome, error) {
	orig, err := os.ReadFile(m.File)
	if err != nil {
		return "", fmt.Errorf("mutant %s: %w", m.ID, err)
	}
	if n := bytes.Count(orig, []byte(m.Find)); n != 1 {
		return "", fmt.Errorf("mutant %s: the text occurs %d times in %s, want exactly once", m.ID, n, m.File)
	}
	abs, err := filepath.Abs(m.File)
	if err != nil {
		return "", fmt.Errorf("mutant %s: %w", m.ID, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("mutant %s: %w", m.ID, err)
	}
	mutated := filepath.Join(dir, filepath.Base(m.File))
	if err := os.WriteFile(mutated, bytes.Replace(orig, []byte(m.Find), []byte(m.Replace), 1), 0o600); err != nil {
		return "", fmt.Errorf("mutant %s: %w", m.ID, err)
	}
	overlay, err := json.Marshal(map[string]map[string]string{"Replace": {abs: mutated}})
	if err != nil {
		return "", fmt.Errorf("mutant %s: %w", m.ID, err)
	}
	overlayFile := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(overlayFile, overlay, 0o600); err != nil {
		return "", fmt.Errorf("mutant %s: %w", m.ID, err)
	}
	// GOFLAGS rather than a flag of go test alone, so that the programs
	// the tests build (the host and plugins of the integration tests) are
	// built from the mutated file too. GOFLAGS splits on spaces.
	if strings.ContainsAny(overlayFile, " \t") {
		return "", fmt.Errorf("mutant %s: the overlay's path %q holds a space, which GOFLAGS cannot carry", m.ID, overlayFile)
	}
	goflags := strings.TrimSpace(os.Getenv("GOFLAGS") + " -overlay=" + overlayFile)
	return goTest(ctx, m, timeout, "GOFLAGS="+goflags), nil
}

// mutateAndTest applies m, runs its tests and restores the file.
func mutateAndTest(ctx context.Context, m Mutant, timeout time.Duration) (out Outcome, err error) {
	restore, err := apply(m.File, m.Find, m.Replace)
	if err != nil {
		return "", fmt.Errorf("mutant %s: %w", m.ID, err)
	}
	defer func() {
		if rerr := restore(); rerr != nil {
			err = errors.Join(err, fmt.Errorf("mutant %s: %w", m.ID, rerr))
		}
	}()
	return goTest(ctx, m, timeout), nil
}

// apply replaces the single occurrence of find in path by replace and
// returns the function that writes the original bytes back and checks,
// by their sha256, that they are back. The file's mode is kept.
func apply(path, find, replace string) (restore func() error, err error) {
	orig, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if n := bytes.Count(orig, []byte(find)); n != 1 {
		return nil, fmt.Errorf("the text occurs %d times in %s, want exactly once", n, path)
	}
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(orig)
	restore = func() error {
		if err := os.WriteFile(path, orig, info.Mode().Perm()); err != nil {
			return fmt.Errorf("restoring %s: %w", path, err)
		}
		back, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("checking %s: %w", path, err)
		}
		if sha256.Sum256(back) != sum {
			return fmt.Errorf("%s was not restored: its sha256 differs from the original's", path)
		}
		return nil
	}
	mutated := bytes.Replace(orig, []byte(find), []byte(replace), 1)
	if err := os.WriteFile(path, mutated, info.Mode().Perm()); err != nil {
		// A partial write is still a change: put the original back.
		return nil, errors.Join(err, restore())
	}
	return restore, nil
}

// goTest runs the mutant's tests, with env added to the environment, and
// classifies the result.
func goTest(ctx context.Context, m Mutant, timeout time.Duration, env ...string) Outcome {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// vet is off: a mutant such as "if false && ..." is a finding of vet's,
	// not a test failure, and would be counted as killed for the wrong reason.
	cmd := exec.CommandContext(ctx, "go", "test", "-count=1", "-vet=off", "-run", m.Run, m.Package)
	cmd.Dir = filepath.Clean(m.Module)
	cmd.Env = append(os.Environ(), env...)
	// The test binary's own children (plugins the tests start) share the
	// process group, so a timeout stops them all.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Run(); err == nil {
		return Survived
	}
	if buildFailed(buf.String()) {
		return Broken
	}
	return Killed
}

// buildFailed reports whether go test's output says the package did not
// compile rather than a test failed.
func buildFailed(out string) bool {
	return strings.Contains(out, "[build failed]") || strings.Contains(out, "[setup failed]")
}

// report prints the table and the kill rate and returns the exit code.
func report(results []result, total time.Duration, w io.Writer) int {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MUTANT\tFILE\tOUTCOME\tTIME")
	killed, survivors := 0, []string{}
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.1fs\n", r.mutant.ID, r.mutant.File, r.outcome, r.took.Seconds())
		if r.outcome == Survived {
			survivors = append(survivors, r.mutant.ID)
		} else {
			killed++
		}
	}
	tw.Flush()
	pct := 0.0
	if len(results) > 0 {
		pct = 100 * float64(killed) / float64(len(results))
	}
	fmt.Fprintf(w, "%d of %d killed (%.0f %%) in %s\n", killed, len(results), pct, total.Round(time.Second))
	if len(survivors) > 0 {
		fmt.Fprintf(w, "survivors: %s\n", strings.Join(survivors, ", "))
		return 1
	}
	return 0
}
