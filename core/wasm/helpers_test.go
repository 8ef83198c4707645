package wasm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// fixture reads a committed testdata/NAME.wasm.
func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name+".wasm"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// newEngine is an engine with an in-memory cache, closed with the test.
func newEngine(t testing.TB) *Engine {
	t.Helper()
	e, err := NewEngine("", hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return e
}

// load loads a fixture, closed with the test.
func load(t testing.TB, name string, opts LoadOptions) *Module {
	t.Helper()
	m, err := newEngine(t).Load(context.Background(), fixture(t, name), opts)
	if err != nil {
		t.Fatalf("load %s: %v", name, err)
	}
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	return m
}

// loadErr loads a fixture that must be refused.
func loadErr(t testing.TB, name string, opts LoadOptions) error {
	t.Helper()
	m, err := newEngine(t).Load(context.Background(), fixture(t, name), opts)
	if err == nil {
		_ = m.Close(context.Background())
		t.Fatalf("load %s: want a refusal, got a module", name)
	}
	return err
}

// fakeImports answers imports from its fields and records what it was asked.
type fakeImports struct {
	mu       sync.Mutex
	channels map[string][]byte
	vars     map[string][]byte
	writes   map[string][]byte
	sets     map[string][]byte
	status   Status
	resume   []byte
	now      int64
	nowSleep time.Duration
	random   []byte
	logs     []string
	calls    []string
	callErr  error
	callRes  []byte
	adv      []byte
	readErr  error
	payloads [][]byte
}

func newFakeImports() *fakeImports {
	return &fakeImports{
		channels: map[string][]byte{}, vars: map[string][]byte{},
		writes: map[string][]byte{}, sets: map[string][]byte{},
	}
}

func (f *fakeImports) ChannelRead(_ context.Context, name string) ([]byte, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.readErr != nil {
		return nil, false, f.readErr
	}
	v, ok := f.channels[name]
	return v, ok, nil
}

func (f *fakeImports) ChannelWrite(_ context.Context, name string, value []byte) (Status, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes[name] = value
	return f.status, nil
}

func (f *fakeImports) VariableGet(_ context.Context, key string) ([]byte, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.vars[key]
	return v, ok, nil
}

func (f *fakeImports) VariableSet(_ context.Context, key string, value []byte) (Status, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sets[key] = value
	return f.status, nil
}

func (f *fakeImports) Interrupt(_ context.Context, payload []byte) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.payloads = append(f.payloads, payload)
	return f.resume, nil
}

func (f *fakeImports) Log(level int, message string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.logs = append(f.logs, strings.Repeat("*", level)+message)
}

func (f *fakeImports) NowMs(ctx context.Context) (int64, error) {
	if f.nowSleep > 0 {
		select {
		case <-time.After(f.nowSleep):
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	return f.now, nil
}

func (f *fakeImports) Random(_ context.Context, n int) ([]byte, error) {
	if len(f.random) == 0 {
		return make([]byte, n), nil
	}
	return bytes.Repeat(f.random, n/len(f.random)+1)[:n], nil
}

func (f *fakeImports) Call(_ context.Context, family, method string, payload []byte) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, family+"."+method+" "+string(payload))
	return f.callRes, f.callErr
}

func (f *fakeImports) Advertised(context.Context) ([]byte, error) {
	return f.adv, nil
}

// goGuest builds testdata/goguest for wasip1 as a reactor, once per source
// and toolchain: the result is kept in the temporary directory.
func goGuest(t testing.TB) []byte {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("testdata", "goguest", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	goBin := filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		goBin = "go"
	}
	version, err := exec.Command(goBin, "env", "GOVERSION").Output()
	if err != nil {
		t.Fatalf("go env GOVERSION: %v", err)
	}
	key := hashHex(append(src, version...))
	out := filepath.Join(os.TempDir(), "wophost-wasm-goguest-"+key+".wasm")
	if b, err := os.ReadFile(out); err == nil {
		return b
	}
	tmp := out + "." + hashHex([]byte(t.Name()+time.Now().String())) + ".tmp"
	cmd := exec.Command(goBin, "build", "-buildmode=c-shared", "-o", tmp, ".")
	cmd.Dir = filepath.Join("testdata", "goguest")
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "GOFLAGS=")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the Go guest: %v\n%s", err, b)
	}
	if err := os.Rename(tmp, out); err != nil && !errors.Is(err, os.ErrExist) {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func hashHex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}
