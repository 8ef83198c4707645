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
	"strings"

	"github.com/wophost/wophost/internal/promptfile"
	"github.com/wophost/wophost/sdk/families/promptlibrary"
)

// Problem is one integrity failure found by Verify.
type Problem = promptlibrary.Problem

// The kinds of Problem.
const (
	// ProblemCorrupt is a version that cannot be served as published: its
	// record is unreadable, or its blob is missing, altered or disagrees
	// with the record.
	ProblemCorrupt = promptlibrary.ProblemCorrupt
	// ProblemOrphan is a file under blobs/ that no version record names:
	// the trace of a deleted record (a version that no longer resolves),
	// of a publish stopped before its record was written, or a stray file.
	ProblemOrphan = promptlibrary.ProblemOrphan
	// ProblemIndex is an index.sqlite that disagrees with the records.
	ProblemIndex = promptlibrary.ProblemIndex
)

// Report is the outcome of Verify.
type Report = promptlibrary.Report

// Verify re-reads every record and re-hashes every blob a record names:
// each blob must exist and hash to its digest, and each record must agree
// with the header of its bytes. A blob no record names is a problem too
// (ProblemOrphan): the store cannot tell a record deleted by hand, whose
// version no longer resolves, from a publish stopped before its record
// was written, and the operator should decide. It only reads.
func (s *Store) Verify() (*Report, error) {
	rep := &Report{Problems: []Problem{}}
	names, err := s.Names()
	if err != nil {
		return nil, err
	}
	rep.Names = len(names)
	blobs := map[string]bool{}
	// unfinished are the digests that the records of unfinished publishes
	// name: their blobs are leftovers too, not orphans.
	unfinished := map[string]bool{}
	unreadable := 0
	for _, name := range names {
		dir := s.versionsPath(name)
		entries, err := os.ReadDir(dir)
		if err != nil {
			return nil, fmt.Errorf("prompt store: %w", err)
		}
		for _, e := range entries {
			file := e.Name()
			path := filepath.Join(dir, file)
			if strings.HasPrefix(file, tempPrefix) {
				rep.Leftovers = append(rep.Leftovers, path)
				if d := pendingDigest(path); d != "" {
					unfinished[d] = true
				}
				continue
			}
			if !strings.HasSuffix(file, recordExt) {
				continue
			}
			version := strings.TrimSuffix(file, recordExt)
			ref := name + "@" + version
			rep.Versions++
			v, err := s.readRecord(name, version)
			if err != nil {
				unreadable++
				rep.Problems = append(rep.Problems, Problem{Kind: ProblemCorrupt, Ref: ref, Path: path, Message: err.Error()})
				continue
			}
			blobs[v.Digest] = true
			raw, err := s.ReadBlob(v.Digest)
			if err != nil {
				rep.Problems = append(rep.Problems, Problem{Kind: ProblemCorrupt, Ref: ref, Path: s.blobPath(v.Digest), Message: err.Error()})
				continue
			}
			f, err := promptfile.Parse(raw)
			switch {
			case err != nil:
				rep.Problems = append(rep.Problems, Problem{Kind: ProblemCorrupt, Ref: ref, Path: s.blobPath(v.Digest), Message: "stored file no longer parses: " + err.Error()})
			case f.Name != name || (f.Version != "" && f.Version != version):
				rep.Problems = append(rep.Problems, Problem{Kind: ProblemCorrupt, Ref: ref, Path: path,
					Message: fmt.Sprintf("record names %s@%s, the stored file's header %s@%s", name, version, f.Name, f.Version)})
			}
		}
	}
	rep.Blobs = len(blobs)
	if s.HasIndex() {
		if p := s.checkIndex(rep.Versions); p != nil {
			rep.Problems = append(rep.Problems, *p)
		}
	}
	leftovers, orphans, err := s.scanBlobs(blobs, unfinished, unreadable > 0)
	if err != nil {
		return nil, err
	}
	rep.Leftovers = append(rep.Leftovers, leftovers...)
	rep.Problems = append(rep.Problems, orphans...)
	return rep, nil
}

// pendingDigest returns the digest that the temporary record file at path
// names, or "" when it holds none. A publish killed at its last step
// leaves its record whole in such a file, beside a blob no record names.
func pendingDigest(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	var v Version
	// A record is small; anything longer is not one.
	if json.NewDecoder(io.LimitReader(f, 1<<20)).Decode(&v) != nil || promptlibrary.CheckDigest(v.Digest) != nil {
		return ""
	}
	return v.Digest
}

// scanBlobs walks blobs/: temporary files, and the blobs of unfinished
// publishes (whose digests are in unfinished), are leftovers; every other
// file whose digest is not in named is an orphan. unreadable says that some
// record could not be read, so an orphan may be the blob of that record.
func (s *Store) scanBlobs(named, unfinished map[string]bool, unreadable bool) (leftovers []string, orphans []Problem, err error) {
	root := filepath.Join(s.dir, filepath.FromSlash(blobsDir))
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() {
			return nil
		}
		name := d.Name()
		if strings.HasPrefix(name, tempPrefix) {
			leftovers = append(leftovers, path)
			return nil
		}
		digest := promptlibrary.DigestPrefix + name
		if promptlibrary.CheckDigest(digest) != nil || filepath.Base(filepath.Dir(path)) != name[:2] || filepath.Dir(filepath.Dir(path)) != root {
			orphans = append(orphans, Problem{Kind: ProblemOrphan, Ref: name, Path: path,
				Message: "is not a blob of this store (a blob is named by the sha256 of its bytes, under the directory of the first two hex digits); remove it: rm -f " + path})
			return nil
		}
		switch {
		case named[digest]:
			return nil
		case unfinished[digest]:
			leftovers = append(leftovers, path)
			return nil
		}
		msg := "no version record names this blob: its record was deleted (that version no longer resolves), " +
			"or a publish stopped before writing it. To restore a version, publish the blob's bytes again " +
			"(host prompts publish " + path + "); to drop them, remove it: rm -f " + path
		if unreadable {
			msg += ". A record above that cannot be read may be the one that names it"
		}
		orphans = append(orphans, Problem{Kind: ProblemOrphan, Ref: digest, Path: path, Message: msg})
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("prompt store: %w", err)
	}
	return leftovers, orphans, nil
}

// checkIndex compares the index's row count with the number of version
// records; a stale index is a problem because list would read it.
func (s *Store) checkIndex(versions int) *Problem {
	rows, err := s.ListIndex(context.Background())
	n := 0
	for _, r := range rows {
		n += r.Versions
	}
	switch {
	case err != nil:
		return &Problem{Kind: ProblemIndex, Ref: IndexFile, Path: s.indexPath(), Message: err.Error()}
	case n != versions:
		return &Problem{Kind: ProblemIndex, Ref: IndexFile, Path: s.indexPath(),
			Message: fmt.Sprintf("the index lists %d versions, the store holds %d; rebuild it (host prompts index)", n, versions)}
	}
	return nil
}
