package testbin

import (
	"fmt"
	"os"
	"testing"
)

// Main runs the tests of a package that drives built binaries: it makes a
// temporary directory named after prefix, lets setup build into it, runs
// m, removes the directory and returns the exit code for os.Exit. Under
// -race, the processes the tests start inherit GORACE settings that make
// a race-detector build exit at its first data race.
func Main(m *testing.M, prefix string, setup func(dir string) error) int {
	if raceDetector {
		if err := os.Setenv("GORACE", raceSettings); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
	}
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
