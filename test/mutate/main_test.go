package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeTemp writes content to a file of its own and returns its path.
func writeTemp(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "f.go")
	if err := os.WriteFile(path, []byte(content), 0o640); err != nil {
		t.Fatal(err)
	}
	return path
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestApplyThenRestoreIsByteForByte(t *testing.T) {
	// No trailing newline and a CR: the restore must not normalise anything.
	orig := "package x\r\n\nfunc f() bool {\n\tif a && b {\n\t\treturn true\n\t}\n\treturn false\n}"
	path := writeTemp(t, orig)
	restore, err := apply(path, "if a && b {", "if false {")
	if err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, path); !strings.Contains(got, "if false {") || strings.Contains(got, "if a && b {") {
		t.Fatalf("the mutant is not in the file:\n%s", got)
	}
	if err := restore(); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, path); got != orig {
		t.Fatalf("restored file differs:\n%q\nwant\n%q", got, orig)
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o640 {
		t.Errorf("mode %v after restore, want 0640", info.Mode().Perm())
	}
}

func TestApplyRefusesTextNotOccurringExactlyOnce(t *testing.T) {
	orig := "a := 1\na := 1\n"
	for _, find := range []string{"a := 1", "b := 2"} {
		path := writeTemp(t, orig)
		if _, err := apply(path, find, "c := 3"); err == nil {
			t.Errorf("apply %q: no error, want a refusal", find)
		}
		if got := readFile(t, path); got != orig {
			t.Errorf("apply %q changed the file it refused:\n%s", find, got)
		}
	}
}

func TestRestoreFailsLoudlyWhenTheFileCannotBeWritten(t *testing.T) {
	if os.Getuid() == 0 {
		t.Skip("root writes into read-only directories")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "f.go")
	if err := os.WriteFile(path, []byte("x := 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	restore, err := apply(path, "x := 1", "x := 2")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o444); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(path, 0o644) })
	if err := restore(); err == nil {
		t.Fatal("restore of a read-only file reported success")
	}
}

// A mutant whose tests are interrupted (here: the context is already
// cancelled) still leaves its file as it was.
func TestMutateAndTestRestoresOnCancel(t *testing.T) {
	orig := "package x\n\nconst n = 1\n"
	path := writeTemp(t, orig)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	m := Mutant{ID: "m", File: path, Find: "n = 1", Replace: "n = 2", Module: ".", Package: "./nothing", Run: "."}
	if _, err := mutateAndTest(ctx, m, time.Second); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, path); got != orig {
		t.Fatalf("file left mutated:\n%s", got)
	}
}

func TestLoadRejectsBadLists(t *testing.T) {
	for name, list := range map[string]string{
		"missing run":    `[{"id":"a","file":"f","find":"x","replace":"y","module":".","package":"./p"}]`,
		"bad module":     `[{"id":"a","file":"f","find":"x","replace":"y","module":"other","package":"./p","run":"."}]`,
		"no change":      `[{"id":"a","file":"f","find":"x","replace":"x","module":".","package":"./p","run":"."}]`,
		"duplicate id":   `[{"id":"a","file":"f","find":"x","replace":"y","module":".","package":"./p","run":"."},{"id":"a","file":"f","find":"x","replace":"z","module":".","package":"./p","run":"."}]`,
		"unknown field":  `[{"id":"a","file":"f","find":"x","replace":"y","module":".","package":"./p","run":".","pkg":"q"}]`,
		"not json array": `{}`,
	} {
		path := writeTemp(t, list)
		if _, err := load(path); err == nil {
			t.Errorf("%s: load accepted %s", name, list)
		}
	}
}

func TestReportFailsOnASurvivor(t *testing.T) {
	rs := []result{
		{mutant: Mutant{ID: "a", File: "f"}, outcome: Killed},
		{mutant: Mutant{ID: "b", File: "f"}, outcome: Broken},
		{mutant: Mutant{ID: "c", File: "f"}, outcome: Survived},
	}
	var out bytes.Buffer
	if code := report(rs, time.Second, &out); code != 1 {
		t.Errorf("exit code %d with a survivor, want 1", code)
	}
	if !strings.Contains(out.String(), "2 of 3 killed (67 %)") || !strings.Contains(out.String(), "survivors: c") {
		t.Errorf("report:\n%s", out.String())
	}
	out.Reset()
	if code := report(rs[:2], time.Second, &out); code != 0 {
		t.Errorf("exit code %d without survivors, want 0", code)
	}
}

// An overlaid mutant is seen by the go commands its tests run themselves
// (here a go run of the module's command, as the integration tests build
// the host), and the tree is left untouched.
func TestOverlayReachesTheProgramsTestsBuild(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"go.mod":      "module example.com/x\n\ngo 1.24\n",
		"x.go":        "package x\n\n// N is what the command prints.\nconst N = 1\n",
		"cmd/main.go": "package main\n\nimport (\n\t\"fmt\"\n\n\t\"example.com/x\"\n)\n\nfunc main() { fmt.Print(x.N) }\n",
		"x_test.go": "package x\n\nimport (\n\t\"os/exec\"\n\t\"testing\"\n)\n\n" +
			"func TestCommand(t *testing.T) {\n\tout, err := exec.Command(\"go\", \"run\", \"./cmd\").Output()\n" +
			"\tif err != nil || string(out) != \"1\" {\n\t\tt.Fatalf(\"%q %v\", out, err)\n\t}\n}\n",
	}
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		replace string
		want    Outcome
	}{
		{"const N = 2", Killed},
		{"const N = 2 - 1", Survived},
		{"const N = ", Broken},
	} {
		m := Mutant{ID: "m", File: filepath.Join(dir, "x.go"), Find: "const N = 1", Replace: c.replace, Module: dir, Package: ".", Run: "TestCommand"}
		got, err := overlayAndTest(context.Background(), m, filepath.Join(t.TempDir(), "overlay"), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("%q: %s, want %s", c.replace, got, c.want)
		}
		if got := readFile(t, m.File); got != files["x.go"] {
			t.Fatalf("%q: the file was changed:\n%s", c.replace, got)
		}
	}
}

// -check names every entry whose text is not found exactly once, and
// passes a list whose texts all are, without running a mutant.
func TestCheckListNamesEveryStaleEntry(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f.go")
	if err := os.WriteFile(file, []byte("package f\n\nconst a = 1\nconst b = 2\nconst b2 = 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	entry := func(id, find string) string {
		return fmt.Sprintf(`{"id":%q,"file":%q,"find":%q,"replace":"x","module":".","package":"./p","run":"."}`, id, file, find)
	}
	good := writeTemp(t, "["+entry("once", "const a = 1")+"]")
	var out, errs bytes.Buffer
	if code := checkList(good, &out, &errs); code != 0 || !strings.Contains(out.String(), "1 mutants") {
		t.Errorf("a good list: exit %d, %q %q", code, out.String(), errs.String())
	}
	stale := writeTemp(t, "["+entry("once", "const a = 1")+","+entry("gone", "const c = 3")+","+entry("twice", "= 2")+"]")
	out.Reset()
	errs.Reset()
	code := checkList(stale, &out, &errs)
	if code != 2 {
		t.Errorf("a stale list: exit %d, want 2", code)
	}
	for _, want := range []string{"mutant gone: its text occurs 0 times", "mutant twice: its text occurs 2 times"} {
		if !strings.Contains(errs.String(), want) {
			t.Errorf("stderr %q lacks %q", errs.String(), want)
		}
	}
	if strings.Contains(errs.String(), "mutant once") {
		t.Errorf("stderr names the good entry: %q", errs.String())
	}
}
