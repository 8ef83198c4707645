//go:build race

package testbin

// raceDetector is set when the tests run with -race: the host binary they
// build then runs with the race detector too, so that the concurrency of
// host serve (reloads, supervision, drains) is checked where it lives.
const raceDetector = true
