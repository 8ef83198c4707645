package wire

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ExitError is a plugin or pack process that exited before it was ready:
// before it completed its handshake, or during a call made before it
// serves (Describe, ConfigSchema, Configure, Manifest). Its text says why
// in the process's own words when it wrote any to stderr, in place of the
// failure the caller saw (go-plugin's guesses at a missing handshake, a
// call's lost connection), which Err keeps.
type ExitError struct {
	// During says when the process exited: "before completing its
	// handshake", "during Configure".
	During string
	// Status is how it ended, as os/exec says it ("exit status 3",
	// "signal: killed"); "" when that is not known.
	Status string
	// Said is the end of what it wrote to stderr (LastWords), "" when it
	// wrote nothing.
	Said string
	// Err is the failure the caller saw.
	Err error
}

// Error implements error.
func (e *ExitError) Error() string {
	s := "the process exited " + e.During
	if e.Status != "" {
		s += " (" + e.Status + ")"
	}
	if e.Said == "" {
		return s + " and wrote nothing to stderr"
	}
	return s + "; the last it wrote to stderr: " + e.Said
}

// Unwrap returns the failure the caller saw.
func (e *ExitError) Unwrap() error { return e.Err }

// HandshakeError is a process whose first line on stdout is not the
// go-plugin handshake.
type HandshakeError struct {
	// Line is what the process wrote in its place, 512 bytes at most.
	Line string
	// Said is the end of what it wrote to stderr, "" when it wrote
	// nothing.
	Said string
	// Err is go-plugin's failure.
	Err error
}

// Error implements error.
func (e *HandshakeError) Error() string {
	s := fmt.Sprintf("the process wrote %q to stdout where the plugin handshake belongs", e.Line)
	if e.Said == "" {
		return s
	}
	return s + "; the last it wrote to stderr: " + e.Said
}

// Unwrap returns go-plugin's failure.
func (e *HandshakeError) Unwrap() error { return e.Err }

// go-plugin's failures of a start (v1.8.0, client.go). The first line of
// an unrecognised handshake carries the line read, if any; the lines
// after it are the same guesses whatever happened ("not compiled for this
// architecture", "missing dynamic-link libraries", file permissions).
const (
	unrecognisedHandshake = "Unrecognized remote plugin message:"
	exitedBeforeConnect   = "plugin exited before we could connect"
)

// StartFailure is the error of a process go-plugin failed to start with
// err, given how the process ended (nil when not known) and what it wrote
// last to stderr (said, LastWords). A process that closed its stdout
// without a handshake line is an *ExitError and one that wrote another
// line there a *HandshakeError, both without go-plugin's guesses. Any
// other failure is err, with said after it.
func StartFailure(err error, state *os.ProcessState, said string) error {
	first, _, _ := strings.Cut(err.Error(), "\n")
	first = strings.TrimSpace(first)
	switch {
	case first == unrecognisedHandshake || first == exitedBeforeConnect:
		return &ExitError{During: "before completing its handshake", Status: StatusOf(state), Said: said, Err: err}
	case strings.HasPrefix(first, unrecognisedHandshake):
		// go-plugin reads a line of up to 64 KiB: as much is not shown.
		return &HandshakeError{Line: clip(strings.TrimSpace(strings.TrimPrefix(first, unrecognisedHandshake))), Said: said, Err: err}
	case said != "":
		return fmt.Errorf("%w; the last it wrote to stderr: %s", err, said)
	}
	return err
}

// StatusOf is how a process ended, as os/exec says it ("exit status 3"),
// "" for nil.
func StatusOf(state *os.ProcessState) string {
	if state == nil {
		return ""
	}
	return state.String()
}

// exitNotice bounds how long a call that lost its connection waits to see
// the process exit, so that it reports the exit in the process's own
// words rather than the connection's.
const exitNotice = 2 * time.Second

// ExitedDuring is the error of the call named call, made to a process
// before it serves (Describe, Configure), that failed with err: an
// *ExitError when the connection failed because the process exited,
// otherwise FromStatus(err). exited is closed once go-plugin has waited
// for the process and read its stderr to the end (the connection's Exited
// context); cmd is its command and words what it wrote last to stderr.
func ExitedDuring(call string, err error, exited <-chan struct{}, cmd *exec.Cmd, words *LastWords) error {
	we := FromStatus(err)
	// The SDKs answer every failure with the envelope in the status: one
	// without it is gRPC's own, and Unavailable its lost connection (a
	// cancelled call is the caller's doing, not worth a wait).
	st, ok := status.FromError(err)
	if !ok || len(st.Details()) > 0 || st.Code() != codes.Unavailable {
		return we
	}
	notice := time.NewTimer(exitNotice)
	defer notice.Stop()
	select {
	case <-exited:
	case <-notice.C:
		return we
	}
	return &ExitError{During: "during " + call, Status: StatusOf(cmd.ProcessState), Said: words.String(), Err: we}
}
