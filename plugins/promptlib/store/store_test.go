package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wophost/wophost/sdk/families/promptlibrary"
)

func open(t *testing.T, dir string, opts ...Option) *Store {
	t.Helper()
	s, err := Open(dir, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func publish(t *testing.T, s *Store, raw string) *PublishResult {
	t.Helper()
	res, err := s.Publish(context.Background(), []byte(raw))
	if err != nil {
		t.Fatalf("publish: %v", err)
	}
	return res
}

func mustPin(t *testing.T, ref string) promptlibrary.Pin {
	t.Helper()
	p, err := promptlibrary.ParsePin(ref)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Every byte of a published file comes back unchanged, whatever it holds.
func TestRoundTripIsByteExact(t *testing.T) {
	s := open(t, t.TempDir())
	line := "Zeile mit Umlauten äöü und 漢字, trailing spaces   \r\n"
	big := strings.Repeat(line, 1<<20/len(line)+1)
	cases := map[string]string{
		"non-ascii":        "---\nname: t/utf8\n---\nRéponds en français — «comme ça» 🙂\n",
		"crlf":             "---\r\nname: t/crlf\r\n---\r\nline one\r\nline two\r\n",
		"trailing-spaces":  "---\nname: t/spaces\n---\nkeep these   \n\t\n   ",
		"no-final-newline": "---\nname: t/nonl\n---\nno newline at the end",
		"one-mebibyte":     "---\nname: t/big\n---\n" + big,
	}
	for label, raw := range cases {
		t.Run(label, func(t *testing.T) {
			res := publish(t, s, raw)
			if res.Digest != promptlibrary.DigestOf([]byte(raw)) {
				t.Errorf("digest %s is not sha256 of the file", res.Digest)
			}
			v, got, err := s.Get(mustPin(t, res.Name+"@"+res.Version.Version))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, []byte(raw)) {
				t.Fatalf("stored bytes differ from the published file (%d vs %d bytes)", len(got), len(raw))
			}
			if v.Size != int64(len(raw)) {
				t.Errorf("size %d, want %d", v.Size, len(raw))
			}
		})
	}
	if len(cases["one-mebibyte"]) < 1<<20 {
		t.Fatalf("the large case is only %d bytes", len(cases["one-mebibyte"]))
	}
}

func TestVersionsAreImmutableAndRepublishIsIdempotent(t *testing.T) {
	s := open(t, t.TempDir())
	a := "---\nname: greet\n---\nHello.\n"
	b := "---\nname: greet\n---\nHello there.\n"
	if r := publish(t, s, a); r.Version.Version != "1" || r.Existed {
		t.Fatalf("first publish = %+v, want new version 1", r)
	}
	if r := publish(t, s, a); r.Version.Version != "1" || !r.Existed {
		t.Fatalf("republish = %+v, want existing version 1", r)
	}
	if r := publish(t, s, b); r.Version.Version != "2" || r.Existed {
		t.Fatalf("changed bytes = %+v, want new version 2", r)
	}

	v7 := "---\nname: greet\nversion: 7\n---\nSeven.\n"
	if r := publish(t, s, v7); r.Version.Version != "7" {
		t.Fatalf("explicit version = %+v", r)
	}
	if r := publish(t, s, v7); !r.Existed {
		t.Fatalf("republish of explicit version wrote again: %+v", r)
	}
	before, _ := os.ReadFile(filepath.Join(s.Dir(), "names/greet/_versions/7.json"))
	_, err := s.Publish(context.Background(), []byte("---\nname: greet\nversion: 7\n---\nSeven, changed.\n"))
	if !errors.Is(err, ErrVersionExists) {
		t.Fatalf("different bytes under version 7: err = %v, want ErrVersionExists", err)
	}
	after, _ := os.ReadFile(filepath.Join(s.Dir(), "names/greet/_versions/7.json"))
	if !bytes.Equal(before, after) {
		t.Error("a refused publish changed the version record")
	}
	if _, raw, err := s.Get(mustPin(t, "greet@7")); err != nil || string(raw) != v7 {
		t.Errorf("greet@7 = %q, %v", raw, err)
	}
	// The next automatic version follows the highest integer.
	if r := publish(t, s, "---\nname: greet\n---\nEight.\n"); r.Version.Version != "8" {
		t.Errorf("next automatic version = %s, want 8", r.Version.Version)
	}
	vs, err := s.Versions("greet")
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, v := range vs {
		order = append(order, v.Version)
	}
	if got := strings.Join(order, ","); got != "1,2,7,8" {
		t.Errorf("versions in publication order = %s", got)
	}
}

func TestResolve(t *testing.T) {
	s := open(t, t.TempDir())
	r := publish(t, s, "---\nname: team/triage\nversion: 1.2.0\n---\nSort it.\n")
	other := promptlibrary.DigestOf([]byte("something else"))
	cases := []struct {
		ref  string
		want error
	}{
		{"team/triage@1.2.0", nil},
		{"team/triage@" + r.Digest, nil},
		{"team/triage@1.2.0#" + r.Digest, nil},
		{"team/triage@1.2.0#" + other, ErrDigestMismatch},
		{"team/triage@" + other, ErrVersionNotFound},
		{"team/triage@2", ErrVersionNotFound},
		{"team/other@1", ErrNotFound},
		{"team@1", ErrNotFound},
	}
	for _, c := range cases {
		v, err := s.Resolve(mustPin(t, c.ref))
		if c.want == nil {
			if err != nil || v.Digest != r.Digest || v.Version != "1.2.0" {
				t.Errorf("%s = %+v, %v", c.ref, v, err)
			}
			continue
		}
		if !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", c.ref, err, c.want)
		}
	}
}

func TestInvalidFilesAreRefused(t *testing.T) {
	s := open(t, t.TempDir())
	for _, raw := range []string{
		"no header",
		"---\nname: ../escape\n---\n",
		"---\nname: /abs\n---\n",
		"---\nname: a/../b\n---\n",
		"---\nname: Upper\n---\n",
		"---\nname: ok\nversion: latest\n---\n",
		"---\nname: ok\n",
		"---\nname: ok\nvariables: [1]\n---\n",
		"---\nname: ok\nvariables: {type: 12}\n---\n",
		"---\nname: ok\nbogus: 1\n---\n",
		"---\nname: ok\n---\n\xff\xfe",
	} {
		if _, err := s.Publish(context.Background(), []byte(raw)); !errors.Is(err, ErrInvalid) {
			t.Errorf("publish %q: err = %v, want ErrInvalid", raw, err)
		}
	}
	names, err := s.Names()
	if err != nil || len(names) != 0 {
		t.Errorf("refused files left names %v (%v)", names, err)
	}
	if _, err := os.Stat(filepath.Join(s.Dir(), "escape")); err == nil {
		t.Error("a name escaped the store")
	}
}

// A blob that no longer hashes to its digest is never returned, verify
// reports it, and publishing the original bytes again repairs it.
func TestCorruptBlob(t *testing.T) {
	s := open(t, t.TempDir())
	raw := "---\nname: c\n---\nIntact.\n"
	r := publish(t, s, raw)
	path := s.blobPath(r.Digest)
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("---\nname: c\n---\nTampered.\n"), 0o444); err != nil {
		t.Fatal(err)
	}
	if _, got, err := s.Get(mustPin(t, "c@1")); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("get of a corrupt blob = %q, %v; want ErrCorrupt", got, err)
	}
	rep, err := s.Verify()
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK() || len(rep.Problems) != 1 || rep.Problems[0].Ref != "c@1" {
		t.Fatalf("verify = %+v, want one problem on c@1", rep)
	}
	if res := publish(t, s, raw); !res.Existed {
		t.Errorf("republish after corruption = %+v", res)
	}
	if _, got, err := s.Get(mustPin(t, "c@1")); err != nil || string(got) != raw {
		t.Errorf("after repair: %q, %v", got, err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Get(mustPin(t, "c@1")); !errors.Is(err, ErrCorrupt) {
		t.Errorf("missing blob: err = %v, want ErrCorrupt", err)
	}
}

// A blob that no version record names, because its record was deleted,
// is a problem of its own kind, named by its digest and path, with how to
// restore or remove it; so is a file in blobs/ that is not a blob.
func TestVerifyReportsOrphanedBlobs(t *testing.T) {
	s := open(t, t.TempDir())
	publish(t, s, "---\nname: kept\n---\nKept.\n")
	gone := publish(t, s, "---\nname: gone\n---\nIts record is deleted.\n")
	if rep, err := s.Verify(); err != nil || !rep.OK() {
		t.Fatalf("verify before the deletion: %+v %v", rep, err)
	}
	if err := os.Remove(filepath.Join(s.versionsPath("gone"), "1"+recordExt)); err != nil {
		t.Fatal(err)
	}
	stray := filepath.Join(s.Dir(), "blobs", "sha256", "ab", "notes.txt")
	if err := os.MkdirAll(filepath.Dir(stray), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stray, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}

	rep, err := s.Verify()
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK() || len(rep.Problems) != 2 {
		t.Fatalf("verify = %+v, want two problems", rep)
	}
	blob := s.blobPath(gone.Version.Digest)
	for _, p := range rep.Problems {
		if p.Kind != ProblemOrphan {
			t.Errorf("problem %+v: kind %q, want %q", p, p.Kind, ProblemOrphan)
		}
		switch p.Path {
		case blob:
			if p.Ref != gone.Version.Digest || !strings.Contains(p.Message, "no version record names this blob") ||
				!strings.Contains(p.Message, "rm -f "+blob) || !strings.Contains(p.Message, "host prompts publish "+blob) {
				t.Errorf("orphan = %+v", p)
			}
		case stray:
			if !strings.Contains(p.Message, "rm -f "+stray) {
				t.Errorf("stray file = %+v", p)
			}
		default:
			t.Errorf("unexpected problem %+v", p)
		}
	}
	if rep.Versions != 1 || rep.Blobs != 1 {
		t.Errorf("verify counted %d versions and %d blobs, want 1 and 1", rep.Versions, rep.Blobs)
	}
}

// Publishers in separate Store values (separate lock descriptors, as in
// separate processes) never hand out the same version twice.
func TestConcurrentPublishers(t *testing.T) {
	dir := t.TempDir()
	const n = 24
	var wg sync.WaitGroup
	versions := make([]string, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := Open(dir)
			if err != nil {
				errs[i] = err
				return
			}
			res, err := s.Publish(context.Background(), fmt.Appendf(nil, "---\nname: race\n---\nwriter %d\n", i))
			if err != nil {
				errs[i] = err
				return
			}
			versions[i] = res.Version.Version
		}()
	}
	wg.Wait()
	seen := map[string]bool{}
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("writer %d: %v", i, errs[i])
		}
		if seen[versions[i]] {
			t.Errorf("version %s handed out twice", versions[i])
		}
		seen[versions[i]] = true
	}
	vs, err := open(t, dir).Versions("race")
	if err != nil || len(vs) != n {
		t.Fatalf("%d versions stored, want %d (%v)", len(vs), n, err)
	}
	if rep, err := open(t, dir).Verify(); err != nil || !rep.OK() {
		t.Errorf("verify after concurrent publishes: %+v %v", rep, err)
	}
}

// helperEnv makes the test binary act as a publisher that stops just
// before its version becomes visible, so the parent can kill it there.
const helperEnv = "PROMPTLIB_STORE_TEST_PUBLISHER"

func TestMain(m *testing.M) {
	if dir := os.Getenv(helperEnv); dir != "" {
		os.Exit(pausingPublisher(dir))
	}
	os.Exit(m.Run())
}

func pausingPublisher(dir string) int {
	ready := filepath.Join(dir, "ready")
	s, err := Open(filepath.Join(dir, "store"), WithBeforeCommit(func() {
		_ = os.WriteFile(ready, nil, 0o644)
		time.Sleep(time.Hour)
	}))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if _, err := s.Publish(context.Background(), []byte("---\nname: crash\n---\nhalf written\n")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	return 3 // unreachable unless the hook returned
}

// kill -9 at the last moment of a publish leaves no version visible, the
// lock is released with the process, and the next publish works.
func TestKillDuringPublish(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := os.Stat(filepath.Join(dir, "ready")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatalf("publisher never reached the commit point: %s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	s := open(t, filepath.Join(dir, "store"))
	if _, err := s.Versions("crash"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after kill -9 the half-published version is visible: %v", err)
	}
	rep, err := s.Verify()
	if err != nil || !rep.OK() {
		t.Fatalf("verify after the crash: %+v %v", rep, err)
	}
	// The temporary record, and the blob it names, are both leftovers of
	// the publish, not an orphan: no version was lost.
	half := s.blobPath(promptlibrary.DigestOf([]byte("---\nname: crash\n---\nhalf written\n")))
	if len(rep.Leftovers) != 2 || !slices.Contains(rep.Leftovers, half) {
		t.Errorf("leftovers = %v, want the temporary record and %s", rep.Leftovers, half)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := s.Publish(ctx, []byte("---\nname: crash\n---\nwhole\n"))
	if err != nil || res.Version.Version != "1" {
		t.Fatalf("publish after the crash = %+v, %v", res, err)
	}
	if _, raw, err := s.Get(mustPin(t, "crash@1")); err != nil || string(raw) != "---\nname: crash\n---\nwhole\n" {
		t.Errorf("crash@1 = %q, %v", raw, err)
	}
}
