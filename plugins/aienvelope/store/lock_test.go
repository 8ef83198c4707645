package store

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// holdEnv names the store a child process of this test binary opens and
// holds until it is killed (see TestHelperHoldStore).
const holdEnv = "AIENVELOPE_STORE_TEST_HOLD"

// TestHelperHoldStore is not a test: run as a child process with holdEnv
// set, it opens that store, says so on stdout and waits to be killed.
func TestHelperHoldStore(t *testing.T) {
	path := os.Getenv(holdEnv)
	if path == "" {
		t.Skip("helper process for TestOneProcessOwnsTheStore")
	}
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatalf("child: %v", err)
	}
	defer s.Close()
	os.Stdout.WriteString("holding\n")
	// Held until the parent kills this process; the minute only ends a
	// child whose parent died without killing it.
	time.Sleep(time.Minute)
}

// holdInChild starts a child process that opens the store at path and
// returns once it holds it.
func holdInChild(t *testing.T, path string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHoldStore$", "-test.count=1")
	cmd.Env = append(os.Environ(), holdEnv+"="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "holding" {
		t.Fatalf("child did not open the store: %q %v", line, err)
	}
	return cmd
}

func openWithin(path string, d time.Duration) (*Store, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return Open(ctx, path)
}

// A second process cannot open a store another process holds: it waits a
// bounded time, then fails naming the holder. Once the holder dies, even
// by kill -9 while the next one waits, the next one opens it.
func TestOneProcessOwnsTheStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "env.db")
	child := holdInChild(t, path)

	start := time.Now()
	_, err := openWithin(path, 300*time.Millisecond)
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second opener: %v, want ErrLocked", err)
	}
	if waited := time.Since(start); waited < 250*time.Millisecond {
		t.Errorf("second opener gave up after %s, before its deadline", waited)
	}
	for _, want := range []string{"process " + strconv.Itoa(child.Process.Pid), path + LockSuffix} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}

	// The holder dies while the next opener waits: the kernel releases
	// its lock, and the wait ends in success rather than an error.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	waited := false
	s, err := openWaiting(ctx, path, func() {
		waited = true
		if err := child.Process.Signal(syscall.SIGKILL); err != nil {
			t.Errorf("kill the holder: %v", err)
		}
	})
	if !waited {
		t.Error("the opener did not wait for the lock the holder had")
	}
	if err != nil {
		t.Fatalf("opener after the holder was killed: %v", err)
	}
	if b, err := os.ReadFile(path + LockSuffix); err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(os.Getpid()) {
		t.Errorf("lock file says %q (%v), want this process's pid", b, err)
	}
	// The same holds within one process: the lock is per open store.
	if _, err := openWithin(path, 50*time.Millisecond); !errors.Is(err, ErrLocked) {
		t.Errorf("a second Open in the holder's process: %v, want ErrLocked", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := openWithin(path, time.Second)
	if err != nil {
		t.Fatalf("open after Close: %v", err)
	}
	s2.Close()
}
