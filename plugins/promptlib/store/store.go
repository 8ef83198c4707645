// Package store is the prompt library's on-disk store: content-addressed,
// immutable blobs and one immutable record per published version, laid out
// as plain files so that a store directory can live in Git.
//
//	<dir>/
//	  .lock                                  publishers' file lock
//	  blobs/sha256/9f/9f86d0…                the exact bytes of a .prompt file, mode 0444
//	  names/<name>/_versions/<version>.json  one record per version
//	  index.sqlite                           optional, rebuildable cache (index.go)
//
// A version record names its blob by digest. Publishing writes the blob,
// then the record, each to a temporary file in the target directory that
// is synced, renamed into place and followed by a sync of the directory,
// so a version becomes visible only once its bytes are durable, and a
// crash at any point leaves either the whole version or none of it.
// Publishers serialise on an exclusive lock of .lock; readers take no lock,
// because nothing visible is ever rewritten.
//
// The store is safe for concurrent use by several goroutines and several
// processes.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gofrs/flock"

	"github.com/wophost/wophost/internal/atomicfile"
	"github.com/wophost/wophost/internal/promptfile"
	"github.com/wophost/wophost/sdk/families/promptlibrary"
)

// Directory and file names inside a store.
const (
	lockFile    = ".lock"
	blobsDir    = "blobs/sha256"
	namesDir    = "names"
	versionsDir = "_versions" // cannot collide with a name segment, which starts with [a-z0-9]
	recordExt   = ".json"
	tempPrefix  = atomicfile.TempPrefix
)

// lockRetry is how often a publisher retries a held lock.
const lockRetry = 10 * time.Millisecond

// Errors callers branch on. They arrive wrapped; test with errors.Is.
var (
	// ErrNotFound: no version of the name was ever published.
	ErrNotFound = errors.New("prompt not found")
	// ErrVersionNotFound: the name exists, the pinned version or digest
	// does not.
	ErrVersionNotFound = errors.New("prompt version not found")
	// ErrDigestMismatch: the pin's version and digest disagree.
	ErrDigestMismatch = errors.New("prompt digest mismatch")
	// ErrCorrupt: stored bytes no longer hash to their digest, or a record
	// is unreadable.
	ErrCorrupt = errors.New("prompt store corrupt")
	// ErrVersionExists: different bytes were published under a version
	// that already exists.
	ErrVersionExists = errors.New("prompt version already exists with different content")
	// ErrInvalid: the file to publish is not a valid .prompt file.
	ErrInvalid = errors.New("invalid prompt file")
)

// Version is the record of one published version: the family's wire
// type, so that the plugin answers with records as stored.
type Version = promptlibrary.Version

// Store is an open store directory.
type Store struct {
	dir  string
	lock *flock.Flock
	// mu serialises this handle's publishers: the file lock excludes
	// other handles and processes, but a flock.Flock already held answers
	// Lock at once, so goroutines sharing one Store would pass it together.
	mu sync.Mutex
	// beforeCommit, when set, runs after the blob and the record's
	// temporary file are durable and before the record is renamed into
	// place: tests use it to kill a publisher at the worst moment.
	beforeCommit func()
	// synced, when set, is told of every file and directory a write of
	// the store has synced (atomicfile.Hooks.Synced).
	synced func(path string)
}

// Option adjusts a Store.
type Option func(*Store)

// WithBeforeCommit runs fn inside every publish, just before the version
// record is renamed into place. It exists for crash tests.
func WithBeforeCommit(fn func()) Option { return func(s *Store) { s.beforeCommit = fn } }

// WithSynced tells fn of every file and directory a publish syncs, once
// the sync succeeded. It exists for durability tests: a kill cannot show
// a missing sync, since the page cache outlives the process.
func WithSynced(fn func(path string)) Option { return func(s *Store) { s.synced = fn } }

// Open opens the store at dir, creating the directory layout if needed.
func Open(dir string, opts ...Option) (*Store, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("prompt store %s: %w", dir, err)
	}
	for _, d := range []string{abs, filepath.Join(abs, filepath.FromSlash(blobsDir)), filepath.Join(abs, namesDir)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("prompt store: %w", err)
		}
	}
	s := &Store{dir: abs, lock: flock.New(filepath.Join(abs, lockFile))}
	for _, o := range opts {
		o(s)
	}
	return s, nil
}

// Dir returns the store's absolute directory.
func (s *Store) Dir() string { return s.dir }

// PublishResult is the outcome of Publish.
type PublishResult struct {
	Version
	// Existed is true when the same bytes were already published under
	// this version, so nothing was written.
	Existed bool
}

// Publish stores raw, the bytes of a .prompt file, as a new version. The
// version is the header's, or the next integer after the name's highest
// integer version when the header has none. Publishing bytes that are
// already stored under that version (or, without a header version, under
// any version of the name) returns the existing version and writes
// nothing; different bytes under an existing version fail with
// ErrVersionExists.
func (s *Store) Publish(ctx context.Context, raw []byte) (*PublishResult, error) {
	f, err := promptfile.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	digest := promptlibrary.DigestOf(raw)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.lock.Lock(); err != nil {
		return nil, fmt.Errorf("prompt store: lock %s: %w", s.lock.Path(), err)
	}
	defer s.lock.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	existing, err := s.Versions(f.Name)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, err
	}
	// An identical republish writes nothing new, but it does restore the
	// blob if it was damaged: the bytes in hand are known to be right.
	same := func(v Version) (*PublishResult, error) {
		if err := s.writeBlob(digest, raw); err != nil {
			return nil, err
		}
		return &PublishResult{Version: v, Existed: true}, nil
	}
	version, seq, stored, err := allocate(f, digest, existing)
	if err != nil {
		return nil, err
	}
	if stored != nil {
		return same(*stored)
	}

	if err := s.writeBlob(digest, raw); err != nil {
		return nil, err
	}
	v := Version{
		Name: f.Name, Version: version, Seq: seq, Digest: digest, Size: int64(len(raw)),
		PublishedAt:  time.Now().UTC().Truncate(time.Millisecond),
		EnvelopeType: f.EnvelopeType, Description: f.Description, Variables: f.Variables,
	}
	rec, err := json.MarshalIndent(&v, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("prompt store: encode record: %w", err)
	}
	dir := s.versionsPath(f.Name)
	if err := mkdirAllSync(dir, s.synced); err != nil {
		return nil, fmt.Errorf("prompt store: %w", err)
	}
	if err := atomicfile.WriteWithHooks(filepath.Join(dir, version+recordExt), append(rec, '\n'), 0o444, atomicfile.Hooks{BeforeRename: s.beforeCommit, Synced: s.synced}); err != nil {
		return nil, fmt.Errorf("prompt store: write record of %s@%s: %w", f.Name, version, err)
	}
	// The version is published; an index that cannot take it is deleted,
	// and only a failure to delete it is reported.
	if err := s.indexPublished(&v); err != nil {
		return &PublishResult{Version: v}, fmt.Errorf("%s@%s is published, but the prompt index is stale: %w", f.Name, version, err)
	}
	return &PublishResult{Version: v}, nil
}

// allocate applies the publishing rules to f, whose bytes hash to digest,
// given the name's existing versions: it returns the version and sequence
// number the bytes get, or the version that already stores them, or
// ErrVersionExists. Both stores call it with the name's publishers
// serialised.
func allocate(f *promptfile.File, digest string, existing []Version) (version string, seq int, stored *Version, err error) {
	version = f.Version
	if version == "" {
		for i := range existing {
			if existing[i].Digest == digest {
				return "", 0, &existing[i], nil
			}
		}
		version = nextInteger(existing)
	}
	seq = 1
	for i := range existing {
		if existing[i].Version == version {
			if existing[i].Digest == digest {
				return "", 0, &existing[i], nil
			}
			return "", 0, nil, fmt.Errorf("%w: %s@%s is stored with digest %s, the file hashes to %s; publish it under a new version",
				ErrVersionExists, f.Name, version, existing[i].Digest, digest)
		}
		seq = max(seq, existing[i].Seq+1)
	}
	return version, seq, nil, nil
}

// nextInteger returns one past the highest integer version in vs, or "1".
func nextInteger(vs []Version) string {
	n := 0
	for _, v := range vs {
		if i, err := strconv.Atoi(v.Version); err == nil && i > n {
			n = i
		}
	}
	return strconv.Itoa(n + 1)
}

// writeBlob stores raw under digest unless an intact copy is already
// there. A damaged copy is replaced, which is the one way a store repairs
// itself: the digest says exactly what the bytes must be.
func (s *Store) writeBlob(digest string, raw []byte) error {
	path := s.blobPath(digest)
	if old, err := os.ReadFile(path); err == nil && promptlibrary.DigestOf(old) == digest {
		return nil
	}
	dir := filepath.Dir(path)
	if err := mkdirAllSync(dir, s.synced); err != nil {
		return fmt.Errorf("prompt store: %w", err)
	}
	if err := atomicfile.WriteWithHooks(path, raw, 0o444, atomicfile.Hooks{Synced: s.synced}); err != nil {
		return fmt.Errorf("prompt store: write blob %s: %w", digest, err)
	}
	return nil
}

// Resolve returns the version record a pin names. It does not read the
// blob.
func (s *Store) Resolve(pin promptlibrary.Pin) (*Version, error) {
	if err := promptlibrary.CheckName(pin.Name); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	if pin.Version != "" {
		v, err := s.readRecord(pin.Name, pin.Version)
		if err != nil {
			return nil, err
		}
		if pin.Digest != "" && v.Digest != pin.Digest {
			return nil, fmt.Errorf("%w: %s@%s is stored with digest %s, the pin says %s", ErrDigestMismatch, pin.Name, pin.Version, v.Digest, pin.Digest)
		}
		return v, nil
	}
	vs, err := s.Versions(pin.Name)
	if err != nil {
		return nil, err
	}
	for i := range vs {
		if vs[i].Digest == pin.Digest {
			return &vs[i], nil
		}
	}
	return nil, fmt.Errorf("%w: no version of %s has digest %s", ErrVersionNotFound, pin.Name, pin.Digest)
}

// Get resolves pin and returns its record and the verified bytes.
func (s *Store) Get(pin promptlibrary.Pin) (*Version, []byte, error) {
	v, err := s.Resolve(pin)
	if err != nil {
		return nil, nil, err
	}
	raw, err := s.ReadBlob(v.Digest)
	if err != nil {
		return nil, nil, fmt.Errorf("%s@%s: %w", v.Name, v.Version, err)
	}
	return v, raw, nil
}

// ReadBlob returns the bytes stored under digest after checking that they
// still hash to it; bytes that do not are never returned (ErrCorrupt).
func (s *Store) ReadBlob(digest string) ([]byte, error) {
	if err := promptlibrary.CheckDigest(digest); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	path := s.blobPath(digest)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: blob %s is missing", ErrCorrupt, digest)
	}
	if err != nil {
		return nil, fmt.Errorf("prompt store: %w", err)
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, promptfile.MaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("prompt store: read blob %s: %w", digest, err)
	}
	if got := promptlibrary.DigestOf(raw); got != digest {
		return nil, fmt.Errorf("%w: blob %s now hashes to %s", ErrCorrupt, digest, got)
	}
	return raw, nil
}

// Versions lists the versions of name in publication order. A name with
// no version is ErrNotFound.
func (s *Store) Versions(name string) ([]Version, error) {
	if err := promptlibrary.CheckName(name); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	entries, err := os.ReadDir(s.versionsPath(name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, name)
	}
	if err != nil {
		return nil, fmt.Errorf("prompt store: %w", err)
	}
	var out []Version
	for _, e := range entries {
		file := e.Name()
		if strings.HasPrefix(file, tempPrefix) || !strings.HasSuffix(file, recordExt) {
			continue
		}
		v, err := s.readRecord(name, strings.TrimSuffix(file, recordExt))
		if err != nil {
			return nil, err
		}
		out = append(out, *v)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, name)
	}
	slices.SortFunc(out, func(a, b Version) int { return a.Seq - b.Seq })
	return out, nil
}

// readRecord reads the record of name@version.
func (s *Store) readRecord(name, version string) (*Version, error) {
	if err := promptlibrary.CheckVersion(version); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrVersionNotFound, name, err)
	}
	path := filepath.Join(s.versionsPath(name), version+recordExt)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		if _, derr := os.Stat(s.versionsPath(name)); errors.Is(derr, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s", ErrNotFound, name)
		}
		return nil, fmt.Errorf("%w: %s@%s", ErrVersionNotFound, name, version)
	}
	if err != nil {
		return nil, fmt.Errorf("prompt store: %w", err)
	}
	var v Version
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, fmt.Errorf("%w: record %s: %w", ErrCorrupt, path, err)
	}
	if v.Name != name || v.Version != version || promptlibrary.CheckDigest(v.Digest) != nil {
		return nil, fmt.Errorf("%w: record %s names %s@%s digest %q", ErrCorrupt, path, v.Name, v.Version, v.Digest)
	}
	return &v, nil
}

// Names lists every prompt name with at least one version, sorted.
func (s *Store) Names() ([]string, error) {
	root := filepath.Join(s.dir, namesDir)
	var names []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == versionsDir {
			rel, err := filepath.Rel(root, filepath.Dir(path))
			if err != nil {
				return err
			}
			names = append(names, filepath.ToSlash(rel))
			return filepath.SkipDir
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("prompt store: list names: %w", err)
	}
	slices.Sort(names)
	return names, nil
}

func (s *Store) blobPath(digest string) string {
	hex := strings.TrimPrefix(digest, promptlibrary.DigestPrefix)
	return filepath.Join(s.dir, filepath.FromSlash(blobsDir), hex[:2], hex)
}

func (s *Store) versionsPath(name string) string {
	return filepath.Join(s.dir, namesDir, filepath.FromSlash(name), versionsDir)
}

// mkdirAllSync creates dir and its missing parents, syncing each parent
// that gained an entry so the new directories survive a crash; synced
// (when not nil) is told of each.
func mkdirAllSync(dir string, synced func(string)) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := mkdirAllSync(parent, synced); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return atomicfile.SyncDirWithHook(parent, synced)
}

// DefaultDir is where the promptlib plugin keeps its store when its
// config block sets no dir: inside the plugin's state directory.
const DefaultDir = "store"

// ConfigDir resolves the plugin's `dir` setting the way both the plugin and
// the `host prompts` commands do: "" means DefaultDir, a relative path is
// relative to the plugin's state directory (state_dir/plugins/<label>), an
// absolute path is used as it is (a store kept in a Git checkout, say).
func ConfigDir(stateDir, dir string) string {
	if dir == "" {
		dir = DefaultDir
	}
	if filepath.IsAbs(dir) {
		return filepath.Clean(dir)
	}
	return filepath.Join(stateDir, dir)
}
