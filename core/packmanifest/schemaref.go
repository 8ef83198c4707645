package packmanifest

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path"
	"strconv"
	"strings"
	"syscall"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/wophost/wophost/internal/rooted"
)

// Bounds on what the schemas of one pack reach through their references:
// a chain of references is read, never followed without end.
const (
	// MaxSchemaFiles is the most schema files one pack's schemas reach,
	// the files its nodes name included.
	MaxSchemaFiles = 256
	// MaxSchemaBytes is the most bytes those files hold together; each
	// one holds at most MaxSize.
	MaxSchemaBytes = 16 << 20
)

// schemaHost is the host of the synthetic URLs schema files are compiled
// under (schemaBase); the .invalid TLD never resolves to anything real.
const schemaHost = "pack.invalid"

// schemaFile is one file of the pack read as a schema: its document, or
// why it could not be had.
type schemaFile struct {
	doc any
	// unreachable says why the file cannot be opened: missing, outside
	// the pack, not a regular file, past the bounds. It is a fault of the
	// reference naming the file. "" when the file opened.
	unreachable string
	// bad says why the content is refused: too large, not the bytes
	// pinned, not JSON, not an object. It is a fault of the file itself.
	bad string
	// refs are the file's references, checked once walked.
	refs   []checkedRef
	walked bool
}

// schemaSet is the schema files of one pack, each read at most once and
// only through the pack directory.
type schemaSet struct {
	dir string
	// pins is the manifest's file digest map (FilesKey), nil without one.
	pins  map[string]string
	files map[string]*schemaFile
	bytes int
}

func newSchemaSet(dir string, pins map[string]string) *schemaSet {
	return &schemaSet{dir: dir, pins: pins, files: map[string]*schemaFile{}}
}

// read returns the file at rel, a clean slash-separated path that stays
// inside the pack, reading it the first time it is asked for.
func (s *schemaSet) read(rel string) *schemaFile {
	if f, ok := s.files[rel]; ok {
		return f
	}
	if len(s.files) >= MaxSchemaFiles {
		return &schemaFile{unreachable: "is past the " + strconv.Itoa(MaxSchemaFiles) + " files a pack's schemas may reach"}
	}
	f := &schemaFile{}
	s.files[rel] = f
	f.doc, f.unreachable, f.bad = s.load(rel)
	return f
}

// load reads and decodes the file at rel, or says why it cannot.
func (s *schemaSet) load(rel string) (doc any, unreachable, bad string) {
	// O_NONBLOCK: a FIFO put in the pack must not hang the load.
	file, err := rooted.OpenFile(s.dir, rel, os.O_RDONLY|syscall.O_NONBLOCK)
	if err != nil {
		var out *rooted.OutsideError
		switch {
		case errors.As(err, &out):
			return nil, "leads outside the pack directory through a symbolic link; put the schema file inside the pack", ""
		case errors.Is(err, fs.ErrNotExist):
			return nil, "does not exist in the pack directory", ""
		}
		return nil, "cannot be opened: " + err.Error(), ""
	}
	defer file.Close()
	if fi, err := file.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, "is not a regular file", ""
	}
	limit := min(MaxSize, MaxSchemaBytes-s.bytes)
	data, err := io.ReadAll(io.LimitReader(file, int64(limit)+1))
	if err != nil {
		return nil, "", "cannot be read: " + err.Error()
	}
	if len(data) > limit {
		if limit < MaxSize {
			return nil, "is past the " + strconv.Itoa(MaxSchemaBytes) + " bytes a pack's schema files may hold together", ""
		}
		return nil, "", "is larger than " + strconv.Itoa(MaxSize) + " bytes"
	}
	s.bytes += len(data)
	if s.pins != nil {
		sum := sha256.Sum256(data)
		switch want, ok := s.pins[rel]; {
		case !ok:
			return nil, "", "is not among the files " + FilesKey + " lists"
		case hex.EncodeToString(sum[:]) != want:
			return nil, "", "is not the file " + FilesKey + " lists: its sha256 is " + hex.EncodeToString(sum[:]) + ", not " + want
		}
	}
	doc, err = jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return nil, "", "is not valid JSON: " + err.Error()
	}
	if _, ok := doc.(map[string]any); !ok {
		return nil, "", "must hold a JSON object, a JSON Schema"
	}
	return doc, "", ""
}

// walk reads every file the references of root reach, breadth first, and
// records in ps each bad reference, at its file and JSON pointer, and each
// file reached whose content is refused, at that file. It reports whether
// root and everything it reaches are sound. A reference cycle ends at the
// file already walked; the compiler resolves the cycle itself.
func (s *schemaSet) walk(root string, ps *problems) bool {
	sound := true
	seen := map[string]bool{root: true}
	for queue := []string{root}; len(queue) > 0; queue = queue[1:] {
		file := queue[0]
		for _, r := range s.refsOf(file) {
			if r.msg != "" {
				ps.addProblem(Problem{File: file, Field: r.ptr, Message: r.msg})
				sound = false
				continue
			}
			if r.target == "" {
				continue
			}
			switch t := s.read(r.target); {
			case t.unreachable != "":
				ps.addProblem(Problem{File: file, Field: r.ptr, Message: strconv.Quote(r.val) + ": " + r.target + " " + t.unreachable})
				sound = false
			case t.bad != "":
				ps.addProblem(Problem{File: r.target, Message: t.bad})
				sound = false
			case !seen[r.target]:
				seen[r.target] = true
				queue = append(queue, r.target)
			}
		}
	}
	return sound
}

// refsOf returns the checked references of file, read and sound.
func (s *schemaSet) refsOf(file string) []checkedRef {
	f := s.files[file]
	if !f.walked {
		f.refs, f.walked = findRefs(file, f.doc), true
	}
	return f.refs
}

// compile compiles the schema file rel, already walked and sound, as the
// library resolves it: every reference it follows is loaded through
// packLoader. A problem of rel itself is returned, said of named (rel as
// pack.json names it), for the node field naming it; one of a file it
// references is recorded in ps at that file.
func (s *schemaSet) compile(rel, named string, ps *problems) (*jsonschema.Schema, string) {
	q := strconv.Quote(named)
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(packLoader{s})
	sch, err := c.Compile(fileURL(rel))
	if err == nil {
		return sch, ""
	}
	// A schema that breaks the metaschema is reported at each offending
	// keyword, which is where its author has to look.
	var sve *jsonschema.SchemaValidationError
	var verr *jsonschema.ValidationError
	if errors.As(err, &sve) && errors.As(sve.Err, &verr) {
		if in, ok := packPath(sve.URL); ok && in != rel {
			for _, v := range violations(verr) {
				ps.addProblem(Problem{File: in, Field: v.Pointer, Message: "is not valid JSON Schema: " + v.Message})
			}
			return nil, ""
		}
		var parts []string
		for _, v := range violations(verr) {
			parts = append(parts, label(v.Pointer)+" "+v.Message)
		}
		return nil, q + " is not valid JSON Schema: " + strings.Join(parts, "; ")
	}
	return nil, q + " does not compile as JSON Schema: " + packRelative(err.Error())
}

// packLoader is the compiler's loader: it hands the library the pack's
// schema files, read through the schema set, and refuses every other URL.
// The walk has checked every reference before; this keeps a schema from
// reaching the network or a file outside the pack whatever the walk
// missed, since the library's default loader reads any local file.
type packLoader struct{ s *schemaSet }

// Load implements jsonschema.URLLoader.
func (l packLoader) Load(u string) (any, error) {
	rel, ok := packPath(u)
	if !ok {
		return nil, fmt.Errorf("%s is not a file of the pack; a pack's schemas may reference only files of the pack", u)
	}
	f := l.s.read(rel)
	if msg := cmp.Or(f.unreachable, f.bad); msg != "" {
		return nil, errors.New(rel + " " + msg)
	}
	return f.doc, nil
}

// fileURL is the URL the pack's schema file rel is compiled under.
func fileURL(rel string) string {
	return (&url.URL{Scheme: "https", Host: schemaHost, Path: "/" + rel}).String()
}

// packPath is fileURL's inverse: the pack file a URL the compiler asks
// for names, if it names one.
func packPath(s string) (string, bool) {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "https" || u.Host != schemaHost || u.User != nil || u.Opaque != "" || u.RawQuery != "" || u.ForceQuery {
		return "", false
	}
	rel := strings.TrimPrefix(u.Path, "/")
	if rel == "" || path.Clean(rel) != rel || checkEntry(rel) != "" {
		return "", false
	}
	return rel, true
}

// packRelative rewrites the compiler's URLs in msg as the pack-relative
// paths they stand for.
func packRelative(msg string) string {
	return strings.ReplaceAll(msg, schemaBase+"/", "")
}

// checkedRef is one reference a schema file makes ($ref, $dynamicRef,
// $recursiveRef, or a $id that moves the base of those below it),
// checked.
type checkedRef struct {
	// ptr is the JSON pointer of the keyword in its file; val is what it
	// says.
	ptr, val string
	// target is the pack file it names, "" for a reference that stays in
	// its own file.
	target string
	// msg says why it is refused, "" when it is not.
	msg string
}

// refBase is what a reference resolves against: a file of the pack (rel),
// or an absolute URL a $id set (abs).
type refBase struct {
	rel string
	abs *url.URL
}

// rawRef is a reference as found, before the file's $ids are all known.
type rawRef struct {
	ptr, val string
	base     refBase
}

// refFinder walks one schema document for its references.
type refFinder struct {
	file  string
	found []rawRef
	// early are the $id refusals, known as they are met.
	early map[string]string
	// ids are the resources the file declares with $id: absolute URLs,
	// and pack paths for relative ones. A reference to one stays in the
	// file, where the compiler finds it.
	ids map[string]bool
}

// findRefs returns the references of doc, the schema file file, in
// document order (keys sorted), each checked: a relative path that stays
// in the pack names its target; a reference that leaves the pack's
// directory, an absolute path, or a URL (http, https, file or any other
// scheme) is refused, unless it names a resource the file itself
// declares.
func findRefs(file string, doc any) []checkedRef {
	w := &refFinder{file: file, early: map[string]string{}, ids: map[string]bool{}}
	w.schema(doc, "", refBase{rel: file})
	out := make([]checkedRef, 0, len(w.found))
	for _, r := range w.found {
		if msg, ok := w.early[r.ptr]; ok {
			out = append(out, checkedRef{ptr: r.ptr, val: r.val, msg: msg})
			continue
		}
		out = append(out, w.check(r))
	}
	return out
}

// schema walks v, a schema at ptr whose references resolve against b.
// Keywords holding values rather than schemas are skipped, so that an
// example or a default shaped like a reference is not read as one; every
// other object or array of objects below a schema is walked as schemas,
// which is a superset of the places a reference may sit.
func (w *refFinder) schema(v any, ptr string, b refBase) {
	obj, ok := v.(map[string]any)
	if !ok {
		return
	}
	if id, ok := obj["$id"].(string); ok {
		var sound bool
		if b, sound = w.rebase(b, id, ptr+pointer("$id")); !sound {
			// What resolves against a refused $id is not worth a word
			// more.
			return
		}
	}
	for _, kw := range []string{"$ref", "$dynamicRef", "$recursiveRef"} {
		if s, ok := obj[kw].(string); ok {
			w.found = append(w.found, rawRef{ptr: ptr + pointer(kw), val: s, base: b})
		}
	}
	for _, k := range sortedKeys(obj) {
		switch k {
		case "const", "enum", "default", "examples":
			continue
		case "properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies":
			// Names to schemas: a name is never a keyword.
			m, _ := obj[k].(map[string]any)
			for _, name := range sortedKeys(m) {
				w.schema(m[name], ptr+pointer(k, name), b)
			}
			continue
		}
		switch x := obj[k].(type) {
		case map[string]any:
			w.schema(x, ptr+pointer(k), b)
		case []any:
			for i, e := range x {
				w.schema(e, ptr+pointer(k, strconv.Itoa(i)), b)
			}
		}
	}
}

// rebase returns the base a $id of value id at ptr sets for the schema
// holding it, recording the resource it declares; false when the $id is
// refused.
func (w *refFinder) rebase(b refBase, id, ptr string) (refBase, bool) {
	u, err := url.Parse(id)
	if err != nil {
		w.refuse(ptr, id, strconv.Quote(id)+" is not a URI reference: "+err.Error())
		return b, false
	}
	u.Fragment, u.RawFragment = "", ""
	switch {
	case u.String() == "":
		// "#name", an anchor in older drafts: no new base.
		return b, true
	case b.abs != nil || u.IsAbs() || u.Host != "":
		abs := u
		if b.abs != nil {
			abs = b.abs.ResolveReference(u)
		} else if abs.Scheme == "" {
			abs.Scheme = "https"
		}
		w.ids[abs.String()] = true
		return refBase{abs: abs}, true
	case strings.HasPrefix(u.Path, "/"):
		w.refuse(ptr, id, strconv.Quote(id)+" is an absolute path; a $id inside a pack is relative to its file")
		return b, false
	}
	rel, ok := joinRel(b.rel, u.Path)
	if !ok {
		w.refuse(ptr, id, strconv.Quote(id)+" leaves the pack's directory")
		return b, false
	}
	w.ids[strings.TrimSuffix(rel, "/")] = true
	return refBase{rel: rel}, true
}

// refuse records a refusal of the $id at ptr, reported with the
// references.
func (w *refFinder) refuse(ptr, val, msg string) {
	w.early[ptr] = msg
	w.found = append(w.found, rawRef{ptr: ptr, val: val})
}

// check decides what the reference r names, or why it is refused.
func (w *refFinder) check(r rawRef) checkedRef {
	c := checkedRef{ptr: r.ptr, val: r.val}
	q := strconv.Quote(r.val)
	u, err := url.Parse(r.val)
	if err != nil {
		c.msg = q + " is not a URI reference: " + err.Error()
		return c
	}
	u.Fragment, u.RawFragment = "", ""
	switch {
	case u.IsAbs() || u.Host != "":
		if !w.ids[u.String()] {
			c.msg = q + " is " + urlKind(u) + "; a pack's schemas may reference only files of the pack, by relative path"
		}
		return c
	case u.String() == "":
		// A fragment of the schema's own resource.
		return c
	case r.base.abs != nil:
		if abs := r.base.abs.ResolveReference(u); !w.ids[abs.String()] {
			c.msg = q + " resolves against the $id " + strconv.Quote(r.base.abs.String()) + " to " + abs.String() + ", outside the pack"
		}
		return c
	case u.RawQuery != "" || u.ForceQuery:
		c.msg = q + " has a query; a file of the pack is named by its path alone"
		return c
	case strings.HasPrefix(u.Path, "/"):
		c.msg = q + " is an absolute path; name a file of the pack by its path relative to " + w.file
		return c
	}
	target, ok := joinRel(r.base.rel, u.Path)
	if !ok {
		c.msg = q + " leaves the pack's directory"
		return c
	}
	if msg := checkEntry(target); msg != "" {
		c.msg = q + ": the path it names, " + strconv.Quote(target) + ", " + msg
		return c
	}
	if !w.ids[target] {
		c.target = target
	}
	return c
}

// joinRel resolves the relative path ref against base, a pack path, as a
// URL reference resolves: from base's directory. It reports false when
// the result leaves the pack's directory, which URL resolution would hide
// by stopping at the root. A trailing slash, a directory's $id, is kept.
func joinRel(base, ref string) (string, bool) {
	dir := base[:strings.LastIndex(base, "/")+1]
	joined := path.Clean(dir + ref)
	if joined == ".." || strings.HasPrefix(joined, "../") {
		return "", false
	}
	if strings.HasSuffix(ref, "/") && joined != "." {
		joined += "/"
	}
	return joined, true
}

// urlKind names the kind of absolute URL u is, for a refusal.
func urlKind(u *url.URL) string {
	switch u.Scheme {
	case "http", "https", "":
		return "a remote URL, and the host fetches nothing"
	case "file":
		return "a file URL, and the host reads no file outside the pack"
	}
	return "a URL (" + u.Scheme + ":)"
}
