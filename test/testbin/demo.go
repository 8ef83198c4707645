package testbin

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// BuildDemo builds the deployment `make build` leaves in a checkout into
// dir, laid out as the checkout lays it out: bin/ with the host, the
// plugins and the toolbox MCP server, the example packs with their
// binaries, the examples' inputs, rules and prompts, and host.hcl.example.
// Tests copy it (CopyTree) and run the host there as a reader runs it in
// the checkout.
func BuildDemo(dir string) error {
	work := filepath.Join(dir, "build")
	builds := map[string]string{
		filepath.Join(dir, "bin", "host"):              HostPackage,
		filepath.Join(dir, "bin", "wophost-kv"):        "./examples/plugins/kv",
		filepath.Join(dir, "bin", "mcpserver-toolbox"): "./examples/mcpservers/toolbox",
		filepath.Join(work, "kvdemo"):                  "./examples/packs/kvdemo",
		filepath.Join(work, "council"):                 "./examples/packs/council",
	}
	plugins, err := filepath.Glob(SourceDir("plugins/*/main.go"))
	if err != nil {
		return err
	}
	for _, p := range plugins {
		name := filepath.Base(filepath.Dir(p))
		builds[filepath.Join(dir, "bin", "wophost-"+name)] = "./plugins/" + name
	}
	if err := Build(builds); err != nil {
		return err
	}
	if err := BuildWasm(filepath.Join(work, "wasmdemo"), "./examples/packs/wasmdemo"); err != nil {
		return err
	}
	for _, pack := range []string{"kvdemo", "council", "wasmdemo"} {
		if err := LayOutPack("examples/packs/"+pack, filepath.Join(work, pack), filepath.Join(dir, "examples", "packs", pack)); err != nil {
			return err
		}
	}
	// The pack in WebAssembly text is committed built.
	if err := LayOutPack("examples/packs/wathello", SourceDir("examples/packs/wathello/hello.wasm"), filepath.Join(dir, "examples", "packs", "wathello")); err != nil {
		return err
	}
	// The greeter pack's sources: docs/writing-packs.md builds it there.
	for _, sub := range []string{"examples/inputs", "examples/prompts", "examples/aienvelope", "examples/packs/greeter"} {
		if err := CopyTree(SourceDir(sub), filepath.Join(dir, sub)); err != nil {
			return err
		}
	}
	if err := CopyFile(SourceDir("host.hcl.example"), filepath.Join(dir, "host.hcl.example")); err != nil {
		return err
	}
	return os.RemoveAll(work)
}

// demoSetUp are the commands `make run` starts with, which leave a copy of
// the demo deployment with its prompts published and one run of
// kvdemo.remember: each is bin/host and its arguments, run in the copy.
var demoSetUp = [][]string{
	{"prompts", "publish", "examples/prompts/kvdemo-describe.prompt", "examples/prompts/council-reviewer.prompt", "examples/prompts/council-maintainer.prompt"},
	{"run", "kvdemo.remember", "--input", "examples/inputs/remember.json"},
}

// SetUpDemo runs, in root (a copy of the deployment BuildDemo built), the
// commands `make run` starts with against host.hcl.example: the demo's
// prompts are published and kvdemo.remember has run once.
func SetUpDemo(root string) error {
	for _, args := range demoSetUp {
		args = append([]string{"--config", "host.hcl.example"}, args...)
		cmd := exec.Command(filepath.Join(root, "bin", "host"), args...)
		cmd.Dir = root
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("bin/host %s: %v\n%s", strings.Join(args, " "), err, out.String())
		}
	}
	return nil
}

// CopyTree copies the directory src to dst, subdirectories included,
// keeping each file's permission bits.
func CopyTree(src, dst string) error {
	return filepath.Walk(src, func(path string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if fi.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if err := CopyFile(path, target); err != nil {
			return err
		}
		return os.Chmod(target, fi.Mode().Perm())
	})
}

// CopyFile copies the file src to dst, creating dst's directory.
func CopyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// demoListen is the listen line of host.hcl.example that DemoConfig
// replaces.
var demoListen = regexp.MustCompile(`listen\s*=\s*"127\.0\.0\.1:7427"`)

// DemoConfig writes name into root (a copy of the demo deployment): its
// host.hcl.example with the API listening on a free port of 127.0.0.1
// and, when tokens are given, asking for one of them. It returns the
// address.
func DemoConfig(root, name string, tokens ...string) (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		return "", err
	}
	src, err := os.ReadFile(filepath.Join(root, "host.hcl.example"))
	if err != nil {
		return "", err
	}
	if !demoListen.Match(src) {
		return "", fmt.Errorf("host.hcl.example has no listen = \"127.0.0.1:7427\" to replace")
	}
	listen := fmt.Sprintf("listen = %q", addr)
	if len(tokens) > 0 {
		quoted := make([]string, len(tokens))
		for i, tok := range tokens {
			quoted[i] = strconv.Quote(tok)
		}
		listen += "\n    tokens = [" + strings.Join(quoted, ", ") + "]"
	}
	out := demoListen.ReplaceAllLiteral(src, []byte(listen))
	return addr, os.WriteFile(filepath.Join(root, name), out, 0o644)
}

// ServeDemo starts `bin/host --config cfg serve` in root and waits, a
// minute at most, until addr's /readyz answers 200. stop interrupts the
// daemon and waits for it to exit.
func ServeDemo(root, cfg, addr string) (stop func(), err error) {
	cmd := exec.Command(filepath.Join(root, "bin", "host"), "--config", cfg, "serve")
	cmd.Dir = root
	var logs syncBuffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	stop = func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	}
	client := &http.Client{Timeout: 5 * time.Second}
	for deadline := time.Now().Add(time.Minute); ; {
		r, err := client.Get("http://" + addr + "/readyz")
		if err == nil {
			r.Body.Close()
			if r.StatusCode == http.StatusOK {
				return stop, nil
			}
		}
		if time.Now().After(deadline) {
			stop()
			return nil, fmt.Errorf("host serve not ready within a minute:\n%s", logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// syncBuffer is a bytes.Buffer a process may write while another
// goroutine reads it.
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
