package main

import (
	"os"
	"testing"

	"github.com/wophost/wophost/core/sandbox"
)

// TestMain lets the test binary, which the commands under test use as
// their launcher, contain the packs they start.
func TestMain(m *testing.M) {
	if sandbox.IsLaunch(os.Args) {
		os.Exit(sandbox.Launch(os.Args))
	}
	os.Exit(m.Run())
}
