package loader

import (
	"bytes"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/wophost/wophost/test/testbin"
)

// syncBuffer is a log sink that the test may read while go-plugin's
// goroutines still write to it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func testOptions(startTimeout time.Duration, log *syncBuffer) Options {
	return Options{
		Logger:          hclog.New(&hclog.LoggerOptions{Output: log, Level: hclog.Debug}),
		LogLevel:        hclog.Info,
		MaxMessageBytes: 4 << 20,
		StartTimeout:    startTimeout,
		HostVersion:     "0.0.0-test",
	}
}

// launcher writes an executable shell script whose body may name PIDFILE;
// it returns the script and that file. The body writes the pids the test
// needs into PIDFILE; a cleanup kills every process and group named there,
// so that a failing test leaves nothing running.
func launcher(t *testing.T, body string) (path, pidfile string) {
	t.Helper()
	dir := t.TempDir()
	pidfile = filepath.Join(dir, "pids")
	path = filepath.Join(dir, "launcher")
	script := "#!/bin/sh\n" + strings.ReplaceAll(body, "PIDFILE", pidfile)
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		b, _ := os.ReadFile(pidfile)
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
				_ = syscall.Kill(-pid, syscall.SIGKILL)
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	return path, pidfile
}

// readPIDs waits until pidfile holds n pids (the scripts write it with a
// rename, so it is never seen half written).
func readPIDs(t *testing.T, pidfile string, n int) []int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := os.ReadFile(pidfile)
		if err == nil {
			var pids []int
			for _, f := range strings.Fields(string(b)) {
				pid, err := strconv.Atoi(f)
				if err != nil {
					t.Fatalf("pid file %s: %v", pidfile, err)
				}
				pids = append(pids, pid)
			}
			if len(pids) != n {
				t.Fatalf("pid file %s holds %v, want %d pids", pidfile, pids, n)
			}
			return pids
		}
		if time.Now().After(deadline) {
			t.Fatalf("the launcher never wrote %s", pidfile)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// assertGroupGone fails unless process group pgid is empty. The host has
// already sent SIGKILL when this is called; the poll only gives the
// kernel time to finish the exits.
func assertGroupGone(t *testing.T, pgid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		left := testbin.Group(pgid)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process group %d survived: %+v", pgid, left)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startWithin runs start and fails the test unless it returns within
// limit. The test measures from its own call, a little before the host
// execs the process, so the figure is an upper bound.
func startWithin[T any](t *testing.T, limit time.Duration, start func() (T, error)) (T, error, time.Duration) {
	t.Helper()
	type outcome struct {
		v   T
		err error
	}
	done := make(chan outcome, 1)
	t0 := time.Now()
	go func() {
		v, err := start()
		done <- outcome{v, err}
	}()
	select {
	case o := <-done:
		return o.v, o.err, time.Since(t0)
	case <-time.After(limit + 10*time.Second):
		t.Fatalf("start had not returned after %s (limit %s)", limit+10*time.Second, limit)
	}
	panic("unreachable")
}

// silentBody is a launcher that never writes the handshake: it leaves a
// child holding its stdout and stderr, as a wrapper script around a stuck
// program would, and waits for it.
const silentBody = `sleep 300 &
echo "$$ $!" > PIDFILE.tmp && mv PIDFILE.tmp PIDFILE
wait
`

// A plugin that never completes its handshake, with a child that keeps
// its output open, fails within start_timeout plus a second, and no
// process of its group survives.
func TestSilentLauncherIsBoundedByStartTimeout(t *testing.T) {
	for _, kind := range []string{"capability", "pack"} {
		t.Run(kind, func(t *testing.T) {
			path, pidfile := launcher(t, silentBody)
			var log syncBuffer
			opts := testOptions(time.Second, &log)
			limit := opts.StartTimeout + time.Second
			exe := openExecutable(t, path)
			_, err, took := startWithin(t, limit, func() (any, error) {
				if kind == "pack" {
					return StartPack("silent", exe, opts)
				}
				return StartCapability("silent", exe, opts)
			})
			t.Logf("start failed after %s (start_timeout %s): %v", took.Round(time.Millisecond), opts.StartTimeout, err)
			if took > limit {
				t.Errorf("start took %s, want at most start_timeout + 1s = %s", took, limit)
			}
			var pe *PhaseError
			if !errors.As(err, &pe) || pe.Phase != "started" {
				t.Fatalf("err = %v, want a PhaseError in phase started", err)
			}
			if !strings.Contains(err.Error(), "start_timeout") {
				t.Errorf("error %q does not name start_timeout", err)
			}
			assertGroupGone(t, readPIDs(t, pidfile, 2)[0])
		})
	}
}

// A plugin that writes its handshake line but never answers on the address
// it names leaves go-plugin waiting on the connection past its own
// timeout; the start as a whole is still bounded by start_timeout.
func TestHandshakeWithoutConnectionIsBoundedByStartTimeout(t *testing.T) {
	// A listener that accepts and never speaks: the TLS handshake on it
	// waits for ever.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var held []net.Conn
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-accepted
		for _, c := range held {
			c.Close()
		}
	})
	path, pidfile := launcher(t, `echo "1|1|tcp|`+ln.Addr().String()+`|grpc"
sleep 300 &
echo "$$ $!" > PIDFILE.tmp && mv PIDFILE.tmp PIDFILE
wait
`)
	var log syncBuffer
	opts := testOptions(time.Second, &log)
	limit := opts.StartTimeout + time.Second
	exe := openExecutable(t, path)
	_, err, took := startWithin(t, limit, func() (*Capability, error) {
		return StartCapability("mute", exe, opts)
	})
	t.Logf("start failed after %s (start_timeout %s): %v", took.Round(time.Millisecond), opts.StartTimeout, err)
	if took > limit {
		t.Errorf("start took %s, want at most start_timeout + 1s = %s", took, limit)
	}
	if err == nil {
		t.Fatal("a plugin that never answers on its address started")
	}
	assertGroupGone(t, readPIDs(t, pidfile, 2)[0])
}

// A descendant that leaves the plugin's process group cannot be killed
// with it, and holds go-plugin's pipes for as long as it lives; the host
// stops waiting for them rather than for the descendant.
func TestDescendantOutsideTheGroupCannotHoldTheStart(t *testing.T) {
	path, pidfile := launcher(t, `setsid sleep 300 &
echo "$$ $!" > PIDFILE.tmp && mv PIDFILE.tmp PIDFILE
wait
`)
	var log syncBuffer
	opts := testOptions(time.Second, &log)
	limit := opts.StartTimeout + time.Second
	exe := openExecutable(t, path)
	_, err, took := startWithin(t, limit, func() (*Capability, error) {
		return StartCapability("escapee", exe, opts)
	})
	t.Logf("start failed after %s (start_timeout %s)", took.Round(time.Millisecond), opts.StartTimeout)
	if took > limit {
		t.Errorf("start took %s, want at most start_timeout + 1s = %s", took, limit)
	}
	if err == nil {
		t.Fatal("the silent plugin started")
	}
	pids := readPIDs(t, pidfile, 2)
	assertGroupGone(t, pids[0])
	if !strings.Contains(log.String(), "left its process group") {
		t.Errorf("no warning about the process that left the group in the log:\n%s", log.String())
	}
	// The cleanup kills the escaped process; go-plugin's readers end then.
}

// wrappedTestcap writes a launcher that leaves a child holding its output
// and then execs the test plugin, which becomes the group's leader.
func wrappedTestcap(t *testing.T) (path, pidfile string) {
	t.Helper()
	bins := testbin.NewCache(t.TempDir())
	testcap, err := bins.Binary("./test/plugins/testcap")
	if err != nil {
		t.Fatal(err)
	}
	return launcher(t, `sleep 300 &
echo "$$ $!" > PIDFILE.tmp && mv PIDFILE.tmp PIDFILE
exec `+testcap+"\n")
}

// Stopping a plugin ends the children it leaves behind, and a child that
// holds its output does not hold the stop.
func TestStopEndsTheGroupOfAPluginWithChildren(t *testing.T) {
	path, pidfile := wrappedTestcap(t)
	var log syncBuffer
	opts := testOptions(30*time.Second, &log)
	c, err := StartCapability("wrapped", openExecutable(t, path), opts)
	if err != nil {
		t.Fatalf("start: %v\n%s", err, log.String())
	}
	pids := readPIDs(t, pidfile, 2)
	stopped := make(chan struct{})
	t0 := time.Now()
	go func() {
		c.Kill()
		close(stopped)
	}()
	// The test plugin exits as soon as it is asked to, and its leftover
	// child goes with it: the stop is far quicker than go-plugin's 2 s
	// wait for an exit or the host's fallback bounds.
	const limit = 2 * time.Second
	select {
	case <-stopped:
	case <-time.After(limit + 10*time.Second):
		t.Fatalf("Kill had not returned after %s", limit+10*time.Second)
	}
	took := time.Since(t0)
	t.Logf("stopped in %s", took.Round(time.Millisecond))
	if took > limit {
		t.Errorf("stop took %s, want at most %s", took, limit)
	}
	assertGroupGone(t, pids[0])
}

// A plugin that dies while its child holds its output is noticed as
// exited: the child is killed with the rest of the group.
func TestExitNoticedWhileAChildHoldsTheOutput(t *testing.T) {
	path, pidfile := wrappedTestcap(t)
	var log syncBuffer
	opts := testOptions(30*time.Second, &log)
	c, err := StartCapability("wrapped", openExecutable(t, path), opts)
	if err != nil {
		t.Fatalf("start: %v\n%s", err, log.String())
	}
	t.Cleanup(func() {
		stopped := make(chan struct{})
		go func() {
			c.Kill()
			close(stopped)
		}()
		select {
		case <-stopped:
		case <-time.After(10 * time.Second):
			t.Error("Kill had not returned after 10s")
		}
	})
	pids := readPIDs(t, pidfile, 2)
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Exited():
	case <-time.After(10 * time.Second):
		t.Fatal("the plugin's exit was not noticed within 10s")
	}
	assertGroupGone(t, pids[0])
}
