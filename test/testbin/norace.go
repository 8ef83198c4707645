//go:build !race

package testbin

// raceDetector is set when the tests run with -race (see race.go).
const raceDetector = false
