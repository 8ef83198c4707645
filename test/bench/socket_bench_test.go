package bench

import (
	"fmt"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// socketPeer is a bare unix-socket connection to a sockecho process: the
// physical floor of a round trip between two processes on this machine,
// with no framing, encryption or scheduling of the host's own.
type socketPeer struct {
	conn net.Conn
	buf  []byte
}

// startSocketPeer starts sockecho on a fresh unix socket and returns the
// connection to it; both end with tb.
func startSocketPeer(tb testing.TB) *socketPeer {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "echo.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	cmd := exec.Command(binary(tb, "./test/sockecho"), path)
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	select {
	case c, ok := <-accepted:
		if !ok {
			tb.Fatal("sockecho did not connect")
		}
		tb.Cleanup(func() { _ = c.Close() })
		return &socketPeer{conn: c, buf: make([]byte, len(payload))}
	case <-time.After(startTimeout):
		tb.Fatal("sockecho did not connect")
		return nil
	}
}

// roundTrips writes the benchmark payload n times, each time reading it
// back whole before the next write.
func (p *socketPeer) roundTrips(n int) error {
	for range n {
		if _, err := p.conn.Write([]byte(payload)); err != nil {
			return err
		}
		if _, err := io.ReadFull(p.conn, p.buf); err != nil {
			return err
		}
		if string(p.buf) != payload {
			return fmt.Errorf("sockecho answered %q", p.buf)
		}
	}
	return nil
}
