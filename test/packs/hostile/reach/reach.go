// Package reach is the code of the hostile test packs: one node that
// tries exactly one thing a pack should not be able to do (read the
// host's environment or files, write outside its own directories, open a
// connection, start a process, exhaust memory or CPU) and reports whether
// it worked. The containment tests run it contained and not.
//
// A reach that worked answers {"done": true, "detail": ...}. One that did
// not fails the node with the operating system's error wrapped, never
// flattened to text, so that errors.Is still finds the errno: what a host
// or SDK decides about a refusal, it decides from that.
package reach

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/wophost/wophost/sdk/pack"
	"github.com/wophost/wophost/sdk/wop"
)

// holdArg, as a process's first argument, makes the pack's binary a
// child the fork reach holds: it waits for its standard input to close
// and exits, instead of serving the pack.
const holdArg = "--hostile-hold"

// Reaches, the values of the input's reach.
const (
	Environ = "environ" // read /proc/<parent>/environ, the host's
	Read    = "read"    // read the file named by target
	Write   = "write"   // create the file named by target
	Connect = "connect" // dial target over TCP
	Exec    = "exec"    // run /bin/true
	Fork    = "fork"    // start copies of itself, up to target (default MaxForks)
	Alloc   = "alloc"   // allocate and touch target bytes
	Spin    = "spin"    // busy-loop until the run's context ends
	Own     = "own"     // write and read back a file in its own temp dir
)

// MaxForks bounds the fork reach: how many processes it starts at most,
// and how many it starts when target is empty.
const MaxForks = 10000

// tokenVar is the variable whose presence in the host's environment the
// environ reach reports; never its value.
const tokenVar = "WOPHOST_API_TOKEN"

// Input is the node's input.
type Input struct {
	Reach  string `json:"reach"`
	Target string `json:"target,omitempty"`
}

// Answer is what the node answers when the reach worked.
type Answer struct {
	Done   bool   `json:"done"`
	Detail string `json:"detail"`
	// Count is how many processes the fork reach started.
	Count int `json:"count,omitempty"`
}

// Main serves the pack whose embedded manifest is manifest, with its one
// node under typeID; or, started as a held child of the fork reach,
// waits for its standard input to close.
func Main(manifest []byte, typeID string) {
	if len(os.Args) > 1 && os.Args[1] == holdArg {
		hold()
	}
	pack.Serve(&pack.Pack{
		Manifest: manifest,
		Nodes:    map[string]pack.Node{typeID: pack.TypedNode(Try)},
	})
}

// hold is the life of a child the fork reach started: it waits for its
// standard input to close, then exits.
func hold() {
	_, _ = io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

// Try runs the reach in.Reach.
func Try(ctx *pack.Ctx, in *Input) (*Answer, error) {
	switch in.Reach {
	case Environ:
		return environ()
	case Read:
		return read(in.Target)
	case Write:
		return write(in.Target)
	case Connect:
		return connect(ctx, in.Target)
	case Exec:
		return run(ctx)
	case Fork:
		return fork(ctx, in.Target)
	case Alloc:
		return alloc(ctx, in.Target)
	case Spin:
		return nil, spin(ctx)
	case Own:
		return own()
	}
	return nil, wop.Errorf(wop.CodeValidation, "reach %q is none of environ, read, write, connect, exec, fork, alloc, spin, own", in.Reach)
}

// environ reads the environment the host was started with, through
// /proc: the pack's parent is the host.
func environ() (*Answer, error) {
	path := "/proc/" + strconv.Itoa(os.Getppid()) + "/environ"
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("environ: read the host's environment: %w", err)
	}
	where := "not in it"
	for _, kv := range bytes.Split(raw, []byte{0}) {
		if bytes.HasPrefix(kv, []byte(tokenVar+"=")) {
			where = "in it"
		}
	}
	return &Answer{Done: true, Detail: fmt.Sprintf("read the host's environment (%s, %d bytes); %s is %s", path, len(raw), tokenVar, where)}, nil
}

// read reads the file at path; the answer tells its size, not its
// contents.
func read(path string) (*Answer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	return &Answer{Done: true, Detail: fmt.Sprintf("read %d bytes of %s", len(data), path)}, nil
}

// write creates (or truncates) the file at path.
func write(path string) (*Answer, error) {
	if err := os.WriteFile(path, []byte("written by the hostile pack\n"), 0o600); err != nil {
		return nil, fmt.Errorf("write: %w", err)
	}
	return &Answer{Done: true, Detail: "wrote " + path}, nil
}

// connect opens a TCP connection to addr and closes it.
func connect(ctx context.Context, addr string) (*Answer, error) {
	d := net.Dialer{Timeout: 2 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	local := conn.LocalAddr().String()
	if err := conn.Close(); err != nil {
		return nil, fmt.Errorf("connect: close: %w", err)
	}
	return &Answer{Done: true, Detail: "connected to " + addr + " from " + local}, nil
}

// run runs /bin/true.
func run(ctx context.Context) (*Answer, error) {
	if err := exec.CommandContext(ctx, "/bin/true").Run(); err != nil {
		return nil, fmt.Errorf("exec: %w", err)
	}
	return &Answer{Done: true, Detail: "ran /bin/true"}, nil
}

// fork starts copies of the pack's own binary that stay until released,
// up to the count target names (MaxForks when empty), stopping at the
// first refusal, then releases them all. Having started none fails the
// node with the refusal.
func fork(ctx context.Context, target string) (*Answer, error) {
	limit := MaxForks
	if target != "" {
		n, err := strconv.Atoi(target)
		if err != nil || n < 1 || n > MaxForks {
			return nil, wop.Errorf(wop.CodeValidation, "fork: target %q is not a count from 1 to %d", target, MaxForks)
		}
		limit = n
	}
	self, err := os.Executable()
	if err != nil {
		self = "/proc/self/exe"
	}
	var held []*exec.Cmd
	var pipes []io.Closer
	var refused error
	for len(held) < limit && ctx.Err() == nil {
		cmd := exec.Command(self, holdArg)
		stdin, err := cmd.StdinPipe()
		if err != nil {
			refused = err
			break
		}
		if err := cmd.Start(); err != nil {
			_ = stdin.Close()
			refused = err
			break
		}
		held, pipes = append(held, cmd), append(pipes, stdin)
	}
	// Closing a child's standard input releases it.
	for i, cmd := range held {
		_ = pipes[i].Close()
		_ = cmd.Wait()
	}
	started := len(held)
	if refused == nil && started < limit {
		refused = ctx.Err()
	}
	if started == 0 {
		return nil, fmt.Errorf("fork: started 0 of %d processes: %w", limit, refused)
	}
	detail := fmt.Sprintf("started %d of %d processes", started, limit)
	if refused != nil {
		detail += ", then: " + refused.Error()
	}
	return &Answer{Done: true, Detail: detail, Count: started}, nil
}

// allocChunk is the size of one allocation of the alloc reach: small
// enough that no single one fails for want of address space, so that
// what stops the reach is a limit on the memory it touched.
const allocChunk = 1 << 20

// alloc allocates the number of bytes target names, in chunks, and
// writes to every page so that the memory is really used.
func alloc(ctx context.Context, target string) (*Answer, error) {
	want, err := strconv.ParseInt(target, 10, 64)
	if err != nil || want < 1 {
		return nil, wop.Errorf(wop.CodeValidation, "alloc: target %q is not a positive number of bytes", target)
	}
	page := os.Getpagesize()
	var held [][]byte
	for got := int64(0); got < want; {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("alloc: stopped after %d of %d bytes: %w", got, want, err)
		}
		b := make([]byte, min(allocChunk, want-got))
		for i := 0; i < len(b); i += page {
			b[i] = 1
		}
		held = append(held, b)
		got += int64(len(b))
	}
	runtime.KeepAlive(held)
	return &Answer{Done: true, Detail: fmt.Sprintf("allocated and touched %d bytes", want)}, nil
}

// spin keeps a CPU busy until the run's context ends, and fails with why
// it ended.
func spin(ctx context.Context) error {
	x, rounds := uint64(1), 0
	for ctx.Err() == nil {
		for range 1 << 20 {
			x = x*6364136223846793005 + 1442695040888963407
		}
		rounds++
	}
	// x is in the message so that the loop has an effect to keep.
	return fmt.Errorf("spin: stopped after %d rounds (%x) as the run's context ended: %w", rounds, x&0xff, ctx.Err())
}

// own writes a file in the pack's temp directory and reads it back: what
// a contained pack may still do.
func own() (*Answer, error) {
	dirs := []string{os.TempDir()}
	// A contained pack's state directory, named to it by the host.
	if d := os.Getenv("WOPHOST_STATE_DIR"); d != "" {
		dirs = append(dirs, d)
	}
	for _, dir := range dirs {
		if err := ownFile(dir); err != nil {
			return nil, err
		}
	}
	return &Answer{Done: true, Detail: "wrote and read back a file in " + strings.Join(dirs, " and ")}, nil
}

// ownFile writes a file in dir and reads it back.
func ownFile(dir string) error {
	f, err := os.CreateTemp(dir, "hostile-own-*")
	if err != nil {
		return fmt.Errorf("own: create a file in %s: %w", dir, err)
	}
	name := f.Name()
	defer os.Remove(name)
	want := make([]byte, 64)
	if _, err := rand.Read(want); err != nil {
		f.Close()
		return fmt.Errorf("own: %w", err)
	}
	if _, err := f.Write(want); err != nil {
		f.Close()
		return fmt.Errorf("own: write %s: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("own: write %s: %w", name, err)
	}
	got, err := os.ReadFile(name)
	if err != nil {
		return fmt.Errorf("own: read back %s: %w", name, err)
	}
	if !bytes.Equal(got, want) {
		return errors.New("own: read back other bytes than were written to " + name)
	}
	return nil
}
