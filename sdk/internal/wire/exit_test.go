package wire

import (
	"errors"
	"strings"
	"testing"
)

// go-plugin's failures of a start become the process's own account: an
// exit without a handshake line, a line that is not one (bounded like the
// last words), or any other failure with the last words after it.
func TestStartFailure(t *testing.T) {
	guesses := "\nThis usually means\n  the plugin was not compiled for this architecture,\n\nAdditional notes about plugin:\n  Path: /proc/1/fd/5\n"
	t.Run("no handshake line", func(t *testing.T) {
		for _, text := range []string{"Unrecognized remote plugin message: \nFailed to read any lines from plugin's stdout" + guesses, "plugin exited before we could connect"} {
			err := StartFailure(errors.New(text), nil, "ImportError: grpc")
			var exit *ExitError
			if !errors.As(err, &exit) || err.Error() != "the process exited before completing its handshake; the last it wrote to stderr: ImportError: grpc" {
				t.Errorf("%q: got %v", text, err)
			}
		}
	})
	t.Run("another line", func(t *testing.T) {
		line := strings.Repeat("x", 70000)
		err := StartFailure(errors.New("Unrecognized remote plugin message: "+line+guesses), nil, "")
		var he *HandshakeError
		if !errors.As(err, &he) || len(he.Line) > lastWordsShown+len("…") || !strings.HasSuffix(he.Line, "…") || strings.Contains(err.Error(), "usually") {
			t.Errorf("got %.100v (line of %d bytes)", err, len(he.Line))
		}
	})
	t.Run("any other failure", func(t *testing.T) {
		base := errors.New("Incompatible API version with plugin. Plugin version: 2, Client versions: [1]")
		if err := StartFailure(base, nil, "old SDK"); !errors.Is(err, base) || err.Error() != base.Error()+"; the last it wrote to stderr: old SDK" {
			t.Errorf("got %v", err)
		}
		if err := StartFailure(base, nil, ""); err != base {
			t.Errorf("got %v", err)
		}
	})
}
