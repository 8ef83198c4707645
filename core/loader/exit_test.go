package loader

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/wophost/wophost/sdk/hostwire"
	"github.com/wophost/wophost/sdk/plugin"
	"github.com/wophost/wophost/test/testbin"
)

// go-plugin's guesses at a failed handshake, which say nothing of this
// process, and the descriptor the host execs, which names no file.
var guesses = []string{"Unrecognized remote plugin message", "This usually means", "/proc/"}

// A process that exits before its handshake is reported in its own words,
// without go-plugin's guesses, for a plugin and a pack alike; one that
// says nothing is reported as silent; and its stderr is logged under its
// own name, not the descriptor's.
func TestProcessThatExitsBeforeItsHandshake(t *testing.T) {
	const reason = `ImportError: No module named 'grpc_health'`
	for _, tc := range []struct {
		kind, body, status, said, text string
	}{
		{"capability", "echo \"" + reason + "\" >&2\nexit 3\n", "exit status 3", reason,
			"the process exited before completing its handshake (exit status 3); the last it wrote to stderr: " + reason},
		{"pack", "echo \"" + reason + "\" >&2\nexit 3\n", "exit status 3", reason,
			"the process exited before completing its handshake (exit status 3); the last it wrote to stderr: " + reason},
		{"capability", "exit 1\n", "exit status 1", "",
			"the process exited before completing its handshake (exit status 1) and wrote nothing to stderr"},
	} {
		t.Run(tc.kind+"/"+tc.status, func(t *testing.T) {
			path, _ := launcher(t, tc.body)
			var log syncBuffer
			opts := testOptions(30*time.Second, &log)
			exe := openExecutable(t, path)
			var err error
			if tc.kind == "pack" {
				_, err = StartPack("early", exe, opts)
			} else {
				_, err = StartCapability("early", exe, opts)
			}
			var pe *PhaseError
			var exit *ExitError
			if !errors.As(err, &pe) || pe.Phase != "started" || !errors.As(err, &exit) {
				t.Fatalf("err = %v, want an ExitError in phase started", err)
			}
			if exit.Status != tc.status || exit.Said != tc.said {
				t.Errorf("status %q and words %q, want %q and %q", exit.Status, exit.Said, tc.status, tc.said)
			}
			if got := exit.Error(); got != tc.text {
				t.Errorf("error %q, want %q", got, tc.text)
			}
			for _, g := range guesses {
				if strings.Contains(err.Error(), g) {
					t.Errorf("error %q holds go-plugin's %q", err, g)
				}
			}
			if tc.said == "" {
				return
			}
			// The line is logged (at debug, as go-plugin logs a line that
			// is not JSON) under the process's name alone.
			if !strings.Contains(log.String(), "] early: "+reason) {
				t.Errorf("the reason is not logged under the process's name:\n%s", log.String())
			}
			if m := regexp.MustCompile(`early\.[^:\s]+: `).FindString(log.String()); m != "" {
				t.Errorf("a line is logged under %q, a name beyond the process's:\n%s", m, log.String())
			}
		})
	}
}

// A process that writes something else where the handshake belongs is
// reported with that line and its own words, without go-plugin's guesses.
func TestProcessThatWritesNoHandshake(t *testing.T) {
	path, pidfile := launcher(t, `echo "config.yaml: no such file" >&2
sleep 300 &
echo "$$ $!" > PIDFILE.tmp && mv PIDFILE.tmp PIDFILE
echo 'this is not a handshake'
wait
`)
	var log syncBuffer
	_, err := StartCapability("junk", openExecutable(t, path), testOptions(30*time.Second, &log))
	var he *hostwire.HandshakeError
	if !errors.As(err, &he) {
		t.Fatalf("err = %v, want a HandshakeError", err)
	}
	if he.Line != "this is not a handshake" || he.Said != "config.yaml: no such file" {
		t.Errorf("line %q and words %q", he.Line, he.Said)
	}
	for _, g := range guesses {
		if strings.Contains(err.Error(), g) {
			t.Errorf("error %q holds go-plugin's %q", err, g)
		}
	}
	assertGroupGone(t, readPIDs(t, pidfile, 2)[0])
}

// A Go plugin whose definition the SDK refuses, and one that exits during
// Configure, are reported in their own words, in their phase.
func TestGoPluginThatExitsBeforeItIsReady(t *testing.T) {
	testcap, err := testbin.NewCache(t.TempDir()).Binary("./test/plugins/testcap")
	if err != nil {
		t.Fatal(err)
	}
	t.Run("a family record the SDK refuses", func(t *testing.T) {
		var log syncBuffer
		opts := testOptions(30*time.Second, &log)
		opts.Env = map[string]string{"TESTCAP_START": "bad-record"}
		_, err := StartCapability("bad", openExecutable(t, testcap), opts)
		var exit *ExitError
		if !errors.As(err, &exit) || exit.Status != "exit status 1" {
			t.Fatalf("err = %v, want an ExitError with exit status 1", err)
		}
		if want := `invalid plugin definition: family "test.echo":`; !strings.HasPrefix(exit.Said, want) || !strings.Contains(exit.Said, "until") {
			t.Errorf("words %q, want the SDK's refusal of the record (%s ... until ...)", exit.Said, want)
		}
	})
	t.Run("an exit during Configure", func(t *testing.T) {
		var log syncBuffer
		c, err := StartCapability("licensed", openExecutable(t, testcap), testOptions(30*time.Second, &log))
		if err != nil {
			t.Fatalf("start: %v\n%s", err, log.String())
		}
		t.Cleanup(c.Kill)
		ctx := context.Background()
		if _, err := c.Describe(ctx); err != nil {
			t.Fatal(err)
		}
		_, err = c.Configure(ctx, json.RawMessage(`{"exit_configure":true}`), t.TempDir(), plugin.Storage{Backend: plugin.StorageEmbedded}, nil, nil)
		var pe *PhaseError
		var exit *ExitError
		if !errors.As(err, &pe) || pe.Phase != "configured" || !errors.As(err, &exit) {
			t.Fatalf("err = %v, want an ExitError in phase configured", err)
		}
		want := "the process exited during Configure (exit status 4); the last it wrote to stderr: testcap: the licence server refused key TC-0000"
		if got := exit.Error(); got != want {
			t.Errorf("error %q, want %q", got, want)
		}
	})
}
