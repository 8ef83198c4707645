package packmanifest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/wophost/wophost/sdk/wop"
)

// refPack writes validPack with files beside it, schemas/object.json (its
// output schema) included, and returns the directory.
func refPack(t *testing.T, files map[string]string) string {
	t.Helper()
	all := map[string]string{"schemas/object.json": `{"type": "object"}`}
	for k, v := range files {
		all[k] = v
	}
	return packDir(t, validPack, all)
}

// at finds the problem at file and field.
func at(ps []Problem, file, field string) (Problem, bool) {
	i := slices.IndexFunc(ps, func(p Problem) bool { return p.File == file && p.Field == field })
	if i < 0 {
		return Problem{}, false
	}
	return ps[i], true
}

// A schema references other files of the pack by paths relative to its
// own file; a path through ".." that stays inside the pack is one of
// them. The referenced definitions are the ones enforced.
func TestSchemaRefsAcrossFiles(t *testing.T) {
	dir := refPack(t, map[string]string{
		"schemas/summarize.input.json": `{
  "type": "object",
  "required": ["name", "age"],
  "properties": {
    "name": {"$ref": "common.schema.json#/$defs/name"},
    "age": {"$ref": "./defs/../defs/age.json"},
    "tag": {"$ref": "../shared/tag.json"},
    "nick": {"$ref": "a/../../shared/tag.json"},
    "$ref": {"type": "boolean"}
  },
  "$defs": {"example": {"default": {"$ref": "https://example.com/not-a-reference.json"}, "examples": [{"$ref": "/etc/passwd"}]}}
}`,
		"schemas/common.schema.json": `{"$defs": {"name": {"type": "string", "minLength": 1}}}`,
		"schemas/defs/age.json":      `{"type": "integer", "minimum": 0}`,
		"shared/tag.json":            `{"type": "string", "maxLength": 3}`,
	})
	m, _, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := m.Node("demo.summarize")
	if err := n.ValidateInput(json.RawMessage(`{"name": "Ada", "age": 36, "tag": "abc", "nick": "x", "$ref": true}`)); err != nil {
		t.Errorf("input the referenced definitions accept: %v", err)
	}
	vs := violationsOf(t, n.ValidateInput(json.RawMessage(`{"name": "", "age": -1, "tag": "long", "nick": 5, "$ref": "x"}`)))
	var got []string
	for _, v := range vs {
		got = append(got, v.Pointer)
	}
	if want := []string{"/$ref", "/age", "/name", "/nick", "/tag"}; !slices.Equal(got, want) {
		t.Errorf("violations at %v, want %v (each referenced definition enforced): %+v", got, want, vs)
	}
}

// Every reference that leaves the pack's directory, is an absolute path
// or is a URL is refused, named by its file and the JSON pointer of the
// keyword, all of them in one error that never shows the compiler's
// internal address. The near misses beside them load: a ".." that stays
// inside, an absolute URL naming the file's own $id, values shaped like
// references under value keywords, a property named "$ref".
func TestSchemaRefsRefusedOutsideThePack(t *testing.T) {
	dir := refPack(t, map[string]string{
		"schemas/summarize.input.json": `{
  "type": "object",
  "properties": {
    "up": {"$ref": "../../etc/passwd"},
    "climb": {"$ref": "a/../../../x.json"},
    "staysIn": {"$ref": "a/../../shared/x.json"},
    "encoded": {"$ref": "%2e%2e/%2e%2e/x.json"},
    "abs": {"$ref": "/etc/passwd"},
    "file": {"$ref": "file:///etc/passwd"},
    "http": {"$ref": "http://example.com/s.json"},
    "https": {"$ref": "https://example.com/s.json#/x"},
    "net": {"$ref": "//example.com/s.json"},
    "internal": {"$ref": "https://pack.invalid/schemas/common.json"},
    "urn": {"$ref": "urn:example:x"},
    "dynamic": {"$dynamicRef": "../../x.json"},
    "local": {"$ref": "#/$defs/ok"},
    "default": {"$ref": "../../x.json"},
    "common": {"$ref": "defs/common.json#/$defs/ok"},
    "own": {
      "$id": "https://example.com/own.json",
      "$defs": {"ok": {"type": "string"}},
      "properties": {"self": {"$ref": "https://example.com/own.json#/$defs/ok"}, "frag": {"$ref": "#/$defs/ok"}, "rel": {"$ref": "x.json"}}
    },
    "$ref": {"type": "string"}
  },
  "$defs": {"ok": {"type": "string"}, "value": {"const": {"$ref": "../../etc/passwd"}, "enum": [{"$ref": "file:///x"}]}}
}`,
		"shared/x.json": `{}`,
		// A file reached through a reference is walked as the nodes' own.
		"schemas/defs/common.json": `{"$defs": {"ok": {"type": "string"}, "far": {"$ref": "../../../x.json"}, "near": {"$ref": "../../shared/x.json"}}}`,
	})
	_, _, err := Load(dir)
	ps := problemsOf(t, err)
	if p, ok := at(ps, "schemas/defs/common.json", "/$defs/far/$ref"); !ok || p.Message != `"../../../x.json" leaves the pack's directory` {
		t.Errorf("schemas/defs/common.json: /$defs/far/$ref: got %+v", p)
	}
	const in = "schemas/summarize.input.json"
	want := map[string]string{
		"/properties/up/$ref":             `"../../etc/passwd" leaves the pack's directory`,
		"/properties/climb/$ref":          `"a/../../../x.json" leaves the pack's directory`,
		"/properties/encoded/$ref":        `"%2e%2e/%2e%2e/x.json" leaves the pack's directory`,
		"/properties/abs/$ref":            `"/etc/passwd" is an absolute path`,
		"/properties/file/$ref":           `"file:///etc/passwd" is a file URL`,
		"/properties/http/$ref":           `"http://example.com/s.json" is a remote URL`,
		"/properties/https/$ref":          `"https://example.com/s.json#/x" is a remote URL`,
		"/properties/net/$ref":            `"//example.com/s.json" is a remote URL`,
		"/properties/internal/$ref":       `"https://pack.invalid/schemas/common.json" is a remote URL`,
		"/properties/urn/$ref":            `"urn:example:x" is a URL (urn:)`,
		"/properties/dynamic/$dynamicRef": `"../../x.json" leaves the pack's directory`,
		// A property named like a value keyword is a schema all the same.
		"/properties/default/$ref": `"../../x.json" leaves the pack's directory`,
		// Under an absolute $id, a relative path leads off to that URL,
		// not into the pack.
		"/properties/own/properties/rel/$ref": `"x.json" resolves against the $id "https://example.com/own.json" to https://example.com/x.json, outside the pack`,
	}
	for field, msg := range want {
		p, ok := at(ps, in, field)
		if !ok || !strings.HasPrefix(p.Message, msg) {
			t.Errorf("%s: %s: got %+v, want %q", in, field, p, msg)
		}
	}
	if len(ps) != len(want)+1 {
		t.Errorf("%d problems, want %d: %+v", len(ps), len(want)+1, ps)
	}
	msg := wop.AsError(err).Message
	if strings.Contains(msg, "pack.invalid/") && !strings.Contains(msg, `"https://pack.invalid/schemas/common.json"`) || strings.Count(msg, "pack.invalid") != 1 {
		t.Errorf("the message shows the compiler's internal address beyond the reference that names it:\n%s", msg)
	}
	if line := "\n  " + in + `: /properties/up/$ref: "../../etc/passwd" leaves the pack's directory`; !strings.Contains(msg, line+"\n") {
		t.Errorf("message lacks the line %q:\n%s", line, msg)
	}
}

// A relative path that stays in the pack loads when the file's base is
// the file itself; the ones the previous test refuses under a $id are the
// near miss. A relative $id moves the base inside the pack, and one that
// leaves the pack is refused.
func TestSchemaRefsUnderID(t *testing.T) {
	dir := refPack(t, map[string]string{
		"schemas/summarize.input.json": `{
  "type": "object",
  "properties": {
    "leaf": {"$id": "sub/", "properties": {"v": {"$ref": "leaf.json"}}},
    "up": {"$ref": "a/../../shared/x.json"}
  }
}`,
		"schemas/sub/leaf.json": `{"type": "integer"}`,
		"shared/x.json":         `{"type": "string"}`,
	})
	m, _, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := m.Node("demo.summarize")
	vs := violationsOf(t, n.ValidateInput(json.RawMessage(`{"leaf": {"v": "x"}, "up": 1}`)))
	if len(vs) != 2 || vs[0].Pointer != "/leaf/v" || vs[1].Pointer != "/up" {
		t.Errorf("violations %+v, want /leaf/v and /up, from the files under the $id and beside it", vs)
	}

	dir = refPack(t, map[string]string{
		"schemas/summarize.input.json": `{"properties": {"leaf": {"$id": "../../x/", "properties": {"v": {"$ref": "leaf.json"}}}}}`,
	})
	_, _, err = Load(dir)
	ps := problemsOf(t, err)
	if p, ok := at(ps, "schemas/summarize.input.json", "/properties/leaf/$id"); !ok || p.Message != `"../../x/" leaves the pack's directory` || len(ps) != 1 {
		t.Errorf("problems %+v, want the $id refused alone", ps)
	}
}

// A symbolic link among the referenced files is followed while it stays
// inside the pack, and refused, at the reference, when it leads out.
func TestSchemaRefsThroughSymbolicLinks(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "outside.json")
	if err := os.WriteFile(outside, []byte(`{"type": "string"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := refPack(t, map[string]string{
		"schemas/summarize.input.json": `{"properties": {"in": {"$ref": "in.json"}}}`,
		"shared/real.json":             `{"type": "integer"}`,
	})
	if err := os.Symlink(filepath.Join("..", "shared", "real.json"), filepath.Join(dir, "schemas", "in.json")); err != nil {
		t.Skip("no symbolic links:", err)
	}
	m, _, err := Load(dir)
	if err != nil {
		t.Fatalf("a link inside the pack: %v", err)
	}
	n, _ := m.Node("demo.summarize")
	if vs := violationsOf(t, n.ValidateInput(json.RawMessage(`{"in": "x"}`))); len(vs) != 1 || vs[0].Pointer != "/in" {
		t.Errorf("violations %+v, want /in, from the file the link names", vs)
	}
	writeFile(t, filepath.Join(dir, "schemas", "summarize.input.json"), `{"properties": {"in": {"$ref": "in.json"}, "out": {"$ref": "out.json"}}}`)
	if err := os.Symlink(outside, filepath.Join(dir, "schemas", "out.json")); err != nil {
		t.Fatal(err)
	}
	_, _, err = Load(dir)
	ps := problemsOf(t, err)
	p, ok := at(ps, "schemas/summarize.input.json", "/properties/out/$ref")
	if !ok || p.Message != `"out.json": schemas/out.json leads outside the pack directory through a symbolic link; put the schema file inside the pack` || len(ps) != 1 {
		t.Errorf("problems %+v, want the link out refused at its reference, alone", ps)
	}
}

// A cycle of references between files is compiled as the recursive
// schema it describes. A cycle that applies to one value without end is
// the compiler's to refuse: each value that reaches it is refused, naming
// the files by their pack paths, and the validation ends.
func TestSchemaRefsCycle(t *testing.T) {
	dir := refPack(t, map[string]string{
		"schemas/summarize.input.json": `{"$ref": "a.json"}`,
		"schemas/a.json":               `{"type": "object", "properties": {"n": {"type": "integer"}, "b": {"$ref": "b.json"}}}`,
		"schemas/b.json":               `{"type": "object", "properties": {"a": {"$ref": "a.json"}, "self": {"$ref": "b.json"}}}`,
	})
	m, _, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := m.Node("demo.summarize")
	vs := violationsOf(t, n.ValidateInput(json.RawMessage(`{"b": {"a": {"n": 1, "b": {"self": {"a": {"n": "x"}}}}}}`)))
	if len(vs) != 1 || vs[0].Pointer != "/b/a/b/self/a/n" {
		t.Errorf("violations %+v, want /b/a/b/self/a/n, four references deep", vs)
	}

	dir = refPack(t, map[string]string{
		"schemas/summarize.input.json": `{"$ref": "a.json"}`,
		"schemas/a.json":               `{"$ref": "b.json"}`,
		"schemas/b.json":               `{"$ref": "a.json"}`,
	})
	m, _, err = Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	n, _ = m.Node("demo.summarize")
	vs = violationsOf(t, n.ValidateInput(json.RawMessage(`{}`)))
	if len(vs) != 1 || !strings.Contains(vs[0].Message, "reference cycle") || !strings.Contains(vs[0].Message, `"schemas/a.json`) || strings.Contains(vs[0].Message, "pack.invalid") {
		t.Errorf("violations %+v, want the reference cycle named by the pack's paths", vs)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// What a reference reaches is bounded: MaxSchemaFiles files in all, the
// nodes' included, and MaxSchemaBytes bytes; exactly the bound loads.
func TestSchemaRefsBounded(t *testing.T) {
	chain := func(n int) map[string]string {
		files := map[string]string{"schemas/summarize.input.json": `{"properties": {"next": {"$ref": "c/0.json"}}}`}
		for i := range n {
			files["schemas/c/"+strconv.Itoa(i)+".json"] = fmt.Sprintf(`{"properties": {"next": {"$ref": "%d.json"}}}`, i+1)
		}
		files["schemas/c/"+strconv.Itoa(n)+".json"] = `{}`
		return files
	}
	// The two node files and the chain's n+1.
	if _, _, err := Load(refPack(t, chain(MaxSchemaFiles-3))); err != nil {
		t.Fatalf("%d files: %v", MaxSchemaFiles, err)
	}
	_, _, err := Load(refPack(t, chain(MaxSchemaFiles-2)))
	ps := problemsOf(t, err)
	last := "schemas/c/" + strconv.Itoa(MaxSchemaFiles-3) + ".json"
	if p, ok := at(ps, last, "/properties/next/$ref"); !ok || !strings.Contains(p.Message, "is past the 256 files a pack's schemas may reach") || len(ps) != 1 {
		t.Errorf("%d files: problems %+v, want the reference to the last refused at %s", MaxSchemaFiles+1, ps, last)
	}

	big := `{"description": "` + strings.Repeat("x", MaxSize-20) + `"}`
	files := map[string]string{"schemas/summarize.input.json": `{"properties": {"a": {"$ref": "0.json"}, "b": {"$ref": "1.json"}, "c": {"$ref": "2.json"}, "d": {"$ref": "3.json"}}}`}
	for i := range 4 {
		files["schemas/"+strconv.Itoa(i)+".json"] = big
	}
	_, _, err = Load(refPack(t, files))
	ps = problemsOf(t, err)
	if p, ok := at(ps, "schemas/summarize.input.json", "/properties/d/$ref"); !ok || !strings.Contains(p.Message, "is past the 16777216 bytes") || len(ps) != 1 {
		t.Errorf("four files of %d bytes: problems %+v, want the fourth refused", len(big), ps)
	}
	delete(files, "schemas/3.json")
	files["schemas/summarize.input.json"] = strings.Replace(files["schemas/summarize.input.json"], `, "d": {"$ref": "3.json"}`, "", 1)
	if _, _, err := Load(refPack(t, files)); err != nil {
		t.Errorf("three files of %d bytes: %v", len(big), err)
	}

	files = map[string]string{
		"schemas/summarize.input.json": `{"$ref": "huge.json"}`,
		"schemas/huge.json":            `{"description": "` + strings.Repeat("x", MaxSize) + `"}`,
	}
	ps = problemsOf(t, func() error { _, _, err := Load(refPack(t, files)); return err }())
	if p, ok := at(ps, "schemas/huge.json", ""); !ok || p.Message != "is larger than 4194304 bytes" {
		t.Errorf("a file over MaxSize: problems %+v", ps)
	}
}

// A referenced file that is missing is a fault of the reference, reported
// at each one; one whose content is wrong is a fault of the file,
// reported at the file once, at each keyword that breaks the metaschema.
func TestSchemaRefsToBadFiles(t *testing.T) {
	dir := refPack(t, map[string]string{
		"schemas/summarize.input.json": `{"properties": {"a": {"$ref": "nope.json"}, "b": {"$ref": "nope.json#/x"}, "c": {"$ref": "text.json"}, "d": {"$ref": "text.json"}, "e": {"$ref": "list.json"}, "f": {"$ref": "sub"}}}`,
		"schemas/text.json":            `{"type":`,
		"schemas/list.json":            `["object"]`,
		"schemas/sub/x.json":           `{}`,
	})
	_, _, err := Load(dir)
	ps := problemsOf(t, err)
	const in = "schemas/summarize.input.json"
	for _, w := range []Problem{
		{File: in, Field: "/properties/a/$ref", Message: `"nope.json": schemas/nope.json does not exist in the pack directory`},
		{File: in, Field: "/properties/b/$ref", Message: `"nope.json#/x": schemas/nope.json does not exist in the pack directory`},
		{File: in, Field: "/properties/f/$ref", Message: `"sub": schemas/sub is not a regular file`},
		{File: "schemas/list.json", Message: "must hold a JSON object, a JSON Schema"},
	} {
		if p, ok := at(ps, w.File, w.Field); !ok || p.Message != w.Message {
			t.Errorf("%s: %s: got %+v, want %q", w.File, w.Field, p, w.Message)
		}
	}
	if p, ok := at(ps, "schemas/text.json", ""); !ok || !strings.HasPrefix(p.Message, "is not valid JSON") {
		t.Errorf("schemas/text.json: got %+v", p)
	}
	if len(ps) != 5 {
		t.Errorf("%d problems, want 5: %+v", len(ps), ps)
	}

	dir = refPack(t, map[string]string{
		"schemas/summarize.input.json": `{"properties": {"a": {"$ref": "common.json#/$defs/a"}}}`,
		"schemas/common.json":          `{"$defs": {"a": {"type": 5}, "b": {"minimum": "x"}}}`,
	})
	_, _, err = Load(dir)
	ps = problemsOf(t, err)
	for _, field := range []string{"/$defs/a/type", "/$defs/b/minimum"} {
		if p, ok := at(ps, "schemas/common.json", field); !ok || !strings.HasPrefix(p.Message, "is not valid JSON Schema: ") {
			t.Errorf("schemas/common.json: %s: got %+v", field, p)
		}
	}
	if len(ps) != 2 {
		t.Errorf("%d problems, want 2: %+v", len(ps), ps)
	}

	// A reference into a part the file does not have is the compiler's
	// refusal, at the node, with the file named as the pack names it.
	dir = refPack(t, map[string]string{
		"schemas/summarize.input.json": `{"properties": {"a": {"$ref": "common.json#/$defs/nope"}}}`,
		"schemas/common.json":          `{"$defs": {"a": {}}}`,
	})
	_, _, err = Load(dir)
	ps = problemsOf(t, err)
	if len(ps) != 1 || ps[0].Field != "/nodes/0/inputSchemaRef" || !strings.Contains(ps[0].Message, `"schemas/common.json#/$defs/nope"`) || strings.Contains(ps[0].Message, "pack.invalid") {
		t.Errorf("problems %+v, want the missing definition named by its pack path", ps)
	}
}

// The signed digests cover the referenced files as they cover the nodes'
// own: a referenced file is compiled only when its bytes are the ones
// listed, so one changed after the signature was checked is refused.
func TestSchemaRefsPinned(t *testing.T) {
	files := map[string]string{
		"schemas/summarize.input.json": `{"properties": {"a": {"$ref": "common.json#/$defs/a"}}}`,
		"schemas/common.json":          `{"$defs": {"a": {"type": "string"}}}`,
		"schemas/object.json":          `{"type": "object"}`,
	}
	pins := map[string]string{}
	for name, content := range files {
		sum := sha256.Sum256([]byte(content))
		pins[name] = hex.EncodeToString(sum[:])
	}
	manifest := variant(t, func(d map[string]any) { d[FilesKey] = pins })
	if _, _, err := Load(packDir(t, string(manifest), files)); err != nil {
		t.Fatalf("the files as listed: %v", err)
	}
	files["schemas/common.json"] = `{"$defs": {"a": {}}}`
	_, _, err := Load(packDir(t, string(manifest), files))
	ps := problemsOf(t, err)
	if p, ok := at(ps, "schemas/common.json", ""); !ok || !strings.HasPrefix(p.Message, "is not the file x-wophost-files lists: its sha256 is ") || len(ps) != 1 {
		t.Errorf("a changed referenced file: problems %+v", ps)
	}
	delete(pins, "schemas/common.json")
	manifest = variant(t, func(d map[string]any) { d[FilesKey] = pins })
	_, _, err = Load(packDir(t, string(manifest), files))
	ps = problemsOf(t, err)
	if p, ok := at(ps, "schemas/common.json", ""); !ok || p.Message != "is not among the files x-wophost-files lists" || len(ps) != 1 {
		t.Errorf("an unlisted referenced file: problems %+v", ps)
	}
}

// The compiler's loader hands out files of the pack only: a URL it is
// asked for that is not one of the pack's is refused before anything is
// read, whatever the walk of the references let through.
func TestPackLoaderRefusesOtherURLs(t *testing.T) {
	dir := refPack(t, map[string]string{"schemas/summarize.input.json": `{}`, "x.json": `{}`})
	l := packLoader{newSchemaSet(dir, nil)}
	if doc, err := l.Load(fileURL("x.json")); err != nil || doc == nil {
		t.Fatalf("a file of the pack: %v, %v", doc, err)
	}
	for _, u := range []string{
		"file://" + filepath.Join(dir, "x.json"),
		"https://example.com/x.json",
		"http://pack.invalid/x.json",
		"https://pack.invalid/../x.json",
		"https://pack.invalid/a/../x.json",
		"https://pack.invalid/%2e%2e/x.json",
		"https://pack.invalid/x.json?q",
		"https://user@pack.invalid/x.json",
		"https://pack.invalid/",
	} {
		if _, err := l.Load(u); err == nil {
			t.Errorf("Load(%s) succeeded", u)
		}
	}
	if len(l.s.files) != 1 {
		t.Errorf("the loader read %d files, want only x.json", len(l.s.files))
	}
}
