//go:build !linux

package integration

import (
	"errors"
	"runtime"
)

// landlockABI reports that Landlock is Linux's.
func landlockABI() (int, error) {
	return 0, errors.New("only Linux has Landlock; this is " + runtime.GOOS)
}
