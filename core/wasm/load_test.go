package wasm

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestFixturesMatchTheirSource: every committed .wasm is what wat2wasm makes
// of the .wat beside it, wherever in the repository it is.
func TestFixturesMatchTheirSource(t *testing.T) {
	if _, err := exec.LookPath("wat2wasm"); err != nil {
		if os.Getenv("WOPHOST_TEST_WABT") == "1" {
			t.Fatal("wat2wasm is not on the PATH and WOPHOST_TEST_WABT=1 requires it (Debian: apt-get install wabt)")
		}
		t.Skip("wat2wasm is not on the PATH (Debian: apt-get install wabt); set WOPHOST_TEST_WABT=1 to require it")
	}
	// Every module written by hand in the repository: these fixtures, the
	// test packs and the example pack for authors outside Go.
	var sources []string
	err := filepath.WalkDir(filepath.Join("..", ".."), func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules"):
			return filepath.SkipDir
		case !d.IsDir() && strings.HasSuffix(path, ".wat"):
			sources = append(sources, path)
		}
		return nil
	})
	if err != nil || len(sources) < 3 {
		t.Fatalf("fixtures %v: %v", sources, err)
	}
	for _, src := range sources {
		out := filepath.Join(t.TempDir(), "out.wasm")
		if b, err := exec.Command("wat2wasm", src, "-o", out).CombinedOutput(); err != nil {
			t.Errorf("wat2wasm %s: %v\n%s", src, err, b)
			continue
		}
		built, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		committed, err := os.ReadFile(strings.TrimSuffix(src, ".wat") + ".wasm")
		if err != nil {
			t.Errorf("%s has no committed .wasm: %v", src, err)
			continue
		}
		if !bytes.Equal(built, committed) {
			t.Errorf("%s: the committed .wasm differs from its source; run make wasm-fixtures", src)
		}
	}
}

func TestLoadReadsWhatTheModuleDeclares(t *testing.T) {
	for name, encoding := range map[string]string{"good_multi": EncodingMultiValue, "good_packed": EncodingPackedI64} {
		m := load(t, name, LoadOptions{})
		if m.PackName() != "wat-good" || !slices.Equal(m.NodeIDs(), []string{"echo", "counter"}) ||
			m.ABIVersion() != 1 || m.Encoding() != encoding || m.UsesExtension() {
			t.Errorf("%s: name %q ids %q abi %d encoding %q extension %v", name,
				m.PackName(), m.NodeIDs(), m.ABIVersion(), m.Encoding(), m.UsesExtension())
		}
		if got := m.Limits(); got != (Limits{DefaultMaxMemoryBytes, DefaultMaxExecution}) {
			t.Errorf("%s: limits %+v, want the defaults", name, got)
		}
	}
	if !load(t, "ext", LoadOptions{}).UsesExtension() {
		t.Error("ext imports from wophost but UsesExtension is false")
	}
	if load(t, "imports", LoadOptions{}).UsesExtension() {
		t.Error("imports imports only from openwop but UsesExtension is true")
	}
}

func TestLoadRefusesWhatTheABIDoesNot(t *testing.T) {
	var abi *ABIError
	if err := loadErr(t, "abi999", LoadOptions{}); !errors.As(err, &abi) || abi.Reported != 999 || !slices.Equal(abi.Served, []int{1}) {
		t.Errorf("abi999: %v", err)
	} else if !strings.Contains(err.Error(), "reports ABI version 999; this host serves 1") {
		t.Errorf("abi999: message %q", err)
	}

	exports := map[string][]string{
		"missing_export": {"openwop_node_count: missing", "openwop_free: missing"},
		"bad_export_type": {
			"openwop_abi_version: has () -> (i64), want () -> (i32)",
			"openwop_free: has (i32) -> (), want (i32, i32) -> ()",
		},
		"no_memory": {"memory: missing (the module must export its memory)"},
	}
	for name, want := range exports {
		var ee *ExportError
		if err := loadErr(t, name, LoadOptions{}); !errors.As(err, &ee) || !slices.Equal(ee.Problems, want) {
			t.Errorf("%s: %v\nwant problems %q", name, err, want)
		}
	}

	imports := map[string][]string{
		"unknown_import": {"env.foo: not provided", "openwop.openwop_bogus: not provided"},
		"bad_import_sig": {
			"openwop.openwop_log: has (i32, i32) -> (), want (i32, i32, i32) -> ()",
			"openwop.openwop_now_ms: has () -> (i32), want () -> (i64)",
		},
	}
	for name, want := range imports {
		var ie *ImportError
		if err := loadErr(t, name, LoadOptions{}); !errors.As(err, &ie) || !slices.Equal(ie.Problems, want) {
			t.Errorf("%s: %v\nwant problems %q", name, err, want)
		}
	}
}

// TestLoadRefusesAMinimumMemoryAboveTheCap: 2049 pages is one page above
// the default cap; a cap of exactly 2049 pages loads it.
func TestLoadRefusesAMinimumMemoryAboveTheCap(t *testing.T) {
	var me *MemoryError
	err := loadErr(t, "big_min_memory", LoadOptions{})
	if !errors.As(err, &me) || me.MinBytes != 2049*pageSize || me.LimitBytes != DefaultMaxMemoryBytes {
		t.Fatalf("got %v", err)
	}
	var breach *CapBreach
	if errors.As(err, &breach) {
		t.Errorf("a refusal at load is not a cap breach: %v", err)
	}
	m := load(t, "big_min_memory", LoadOptions{Limits: Limits{MaxMemoryBytes: 2049 * pageSize}})
	if _, err := m.Invoke(context.Background(), Invocation{TypeID: "counter"}); err != nil {
		t.Errorf("at the cap: %v", err)
	}
}

func TestLoadRefusesBadOptions(t *testing.T) {
	e := newEngine(t)
	for name, opts := range map[string]LoadOptions{
		"MaxMemoryBytes": {Limits: Limits{MaxMemoryBytes: -1}},
		"MaxExecution":   {Limits: Limits{MaxExecution: -time.Millisecond}},
		"WarmInstances":  {WarmInstances: -1},
	} {
		if _, err := e.Load(context.Background(), fixture(t, "good_multi"), opts); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := e.Load(context.Background(), []byte("not wasm"), LoadOptions{}); err == nil || !strings.Contains(err.Error(), "compile") {
		t.Errorf("not wasm: %v", err)
	}
}

// TestCompilationCacheDir: the directory is made 0700 and holds the compiled
// code, so that a second engine on it loads without compiling.
func TestCompilationCacheDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache")
	e, err := NewEngine(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := e.Load(context.Background(), fixture(t, "good_multi"), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Invoke(context.Background(), Invocation{TypeID: "counter"}); err == nil {
		t.Error("a module of a closed engine still runs")
	}
	info, err := os.Stat(dir)
	if err != nil || info.Mode().Perm() != 0o700 {
		t.Fatalf("cache dir: %v %v", info, err)
	}
	var files int
	_ = filepath.WalkDir(dir, func(_ string, d os.DirEntry, _ error) error {
		if d != nil && !d.IsDir() {
			files++
		}
		return nil
	})
	if files == 0 {
		t.Error("the cache directory holds no compiled code")
	}
}
