package testbin

import (
	"fmt"
	"os"
	"testing"
)

// Main runs the tests of a package that drives built binaries: it makes a
// temporary directory named after prefix, lets setup build into it, runs
// m, removes the directory and returns the exit code for os.Exit.
func Main(m *testing.M, prefix string, setup func(dir string) error) int {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer os.RemoveAll(dir)
	if err := setup(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	return m.Run()
}
