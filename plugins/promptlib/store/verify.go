package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/wophost/wophost/plugins/promptlib/promptfile"
)

// Problem is one integrity failure found by Verify.
type Problem struct {
	// Ref is name@version, or the blob digest for a blob problem.
	Ref string `json:"ref"`
	// Path is the file at fault.
	Path    string `json:"path"`
	Message string `json:"message"`
}

// Report is the outcome of Verify.
type Report struct {
	Names    int       `json:"names"`
	Versions int       `json:"versions"`
	Blobs    int       `json:"blobs"`
	Problems []Problem `json:"problems"`
	// Leftovers are temporary files of publishes that never finished.
	// They are invisible to readers and harmless; they may be deleted.
	Leftovers []string `json:"leftovers,omitempty"`
}

// OK reports whether Verify found no problem.
func (r *Report) OK() bool { return len(r.Problems) == 0 }

// Verify re-reads every record and re-hashes every blob a record names:
// each blob must exist and hash to its digest, and each record must agree
// with the header of its bytes. It only reads.
func (s *Store) Verify() (*Report, error) {
	rep := &Report{Problems: []Problem{}}
	names, err := s.Names()
	if err != nil {
		return nil, err
	}
	rep.Names = len(names)
	blobs := map[string]bool{}
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
				rep.Problems = append(rep.Problems, Problem{Ref: ref, Path: path, Message: err.Error()})
				continue
			}
			blobs[v.Digest] = true
			raw, err := s.ReadBlob(v.Digest)
			if err != nil {
				rep.Problems = append(rep.Problems, Problem{Ref: ref, Path: s.blobPath(v.Digest), Message: err.Error()})
				continue
			}
			f, err := promptfile.Parse(raw)
			switch {
			case err != nil:
				rep.Problems = append(rep.Problems, Problem{Ref: ref, Path: s.blobPath(v.Digest), Message: "stored file no longer parses: " + err.Error()})
			case f.Name != name || (f.Version != "" && f.Version != version):
				rep.Problems = append(rep.Problems, Problem{Ref: ref, Path: path,
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
	leftovers, err := s.blobLeftovers()
	if err != nil {
		return nil, err
	}
	rep.Leftovers = append(rep.Leftovers, leftovers...)
	return rep, nil
}

// blobLeftovers lists temporary files under blobs/.
func (s *Store) blobLeftovers() ([]string, error) {
	var out []string
	root := filepath.Join(s.dir, filepath.FromSlash(blobsDir))
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if !d.IsDir() && strings.HasPrefix(d.Name(), tempPrefix) {
			out = append(out, path)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("prompt store: %w", err)
	}
	return out, nil
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
		return &Problem{Ref: IndexFile, Path: s.indexPath(), Message: err.Error()}
	case n != versions:
		return &Problem{Ref: IndexFile, Path: s.indexPath(),
			Message: fmt.Sprintf("the index lists %d versions, the store holds %d; rebuild it (host prompts index)", n, versions)}
	}
	return nil
}
