package store

import (
	"context"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/wophost/wophost/sdk/families/promptlibrary"
)

// A publish answers only once what it wrote is on disk: the blob, the
// version record, and every directory entry that names them, the blob
// before the record that points to it. A kill test cannot see a missing
// sync, since the page cache outlives the process, so the store reports
// each sync it made.
func TestPublishSyncsBeforeItAnswers(t *testing.T) {
	var mu sync.Mutex
	var synced []string
	s, err := Open(t.TempDir(), WithSynced(func(path string) {
		mu.Lock()
		defer mu.Unlock()
		synced = append(synced, path)
	}))
	if err != nil {
		t.Fatal(err)
	}
	raw := []byte("---\nname: team/greet\nversion: 1\n---\nHello.\n")
	if _, err := s.Publish(context.Background(), raw); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	got := slices.Clone(synced)
	mu.Unlock()

	blob := s.blobPath(promptlibrary.DigestOf(raw))
	versions := s.versionsPath("team/greet")
	record := filepath.Join(versions, "1"+recordExt)
	at := func(path string) int {
		i := slices.Index(got, path)
		if i < 0 {
			t.Errorf("%s was not synced before the publish answered; synced: %v", path, got)
		}
		return i
	}
	blobAt, blobDirAt := at(blob), at(filepath.Dir(blob))
	recordAt, versionsAt := at(record), at(versions)
	// The directories the publish created are durable in their parents.
	at(filepath.Join(s.dir, namesDir))
	at(filepath.Join(s.dir, namesDir, "team"))
	at(filepath.Join(s.dir, namesDir, "team", "greet"))
	if t.Failed() {
		return
	}
	if blobAt > blobDirAt || blobDirAt > recordAt || recordAt > versionsAt {
		t.Errorf("sync order %v: want the blob and its entry before the record, and the record before its entry", got)
	}
}
