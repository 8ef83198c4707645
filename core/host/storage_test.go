package host

import (
	"errors"
	"io/fs"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/wophost/wophost/sdk/wop"
)

// fakeDisk is the file system a storageHealth under test sees: its free
// space, whether writes fail, and a clock. Everything else (the
// directory, the cache, the transitions) is the real code.
type fakeDisk struct {
	mu       sync.Mutex
	avail    uint64
	writeErr error
	probes   int
	statfs   int
	now      time.Time
	changes  []bool
}

func newTestHealth(t *testing.T, d *fakeDisk, reserve uint64) *storageHealth {
	t.Helper()
	h := newStorageHealth(t.TempDir(), reserve, hclog.NewNullLogger(), func(ok bool) {
		d.mu.Lock()
		defer d.mu.Unlock()
		d.changes = append(d.changes, ok)
	})
	h.space = func(string) (space, error) {
		d.mu.Lock()
		defer d.mu.Unlock()
		d.statfs++
		return space{avail: d.avail, freeFiles: 1000, filesKnown: true}, nil
	}
	h.probe = func(string) error {
		d.mu.Lock()
		defer d.mu.Unlock()
		d.probes++
		return d.writeErr
	}
	h.now = func() time.Time {
		d.mu.Lock()
		defer d.mu.Unlock()
		return d.now
	}
	return h
}

func (d *fakeDisk) advance(dur time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.now = d.now.Add(dur)
}

func (d *fakeDisk) set(avail uint64, writeErr error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.avail, d.writeErr = avail, writeErr
}

func TestStorageHealthFullDiskAndRecovery(t *testing.T) {
	d := &fakeDisk{avail: 10 << 20, now: time.Unix(1_000_000, 0)}
	h := newTestHealth(t, d, 1<<20)
	if err := h.check(); err != nil {
		t.Fatalf("healthy disk: %v", err)
	}
	if d.probes != 1 {
		t.Fatalf("first check made %d write probes, want 1", d.probes)
	}

	// Within the cache's life, a full disk is not looked at again: a
	// request costs no disk work.
	d.set(100<<10, nil)
	for range 100 {
		if err := h.check(); err != nil {
			t.Fatalf("cached answer changed: %v", err)
		}
	}
	if d.statfs != 1 || d.probes != 1 {
		t.Fatalf("100 cached checks made %d statfs and %d probes, want 1 and 1", d.statfs, d.probes)
	}

	d.advance(storageCheckTTL)
	err := h.check()
	var se *StorageError
	if !errors.As(err, &se) || !strings.Contains(se.Reason, "100.0 KiB free, below the 1.0 MiB") {
		t.Fatalf("full disk: %v, want a StorageError naming the free space and the reserve", err)
	}
	d.set(10<<20, nil)
	d.advance(storageCheckTTL)
	if err := h.check(); err != nil {
		t.Fatalf("after space returned: %v", err)
	}
	if want := []bool{false, true}; len(d.changes) != 2 || d.changes[0] != want[0] || d.changes[1] != want[1] {
		t.Fatalf("transitions reported: %v, want %v", d.changes, want)
	}
}

// A write that failed refuses runs at once, and until a write probe
// succeeds; statfs alone (which may see space) does not lift it.
func TestStorageHealthWriteFailure(t *testing.T) {
	d := &fakeDisk{avail: 10 << 20, now: time.Unix(1_000_000, 0)}
	h := newTestHealth(t, d, 1<<20)
	if err := h.check(); err != nil {
		t.Fatal(err)
	}
	d.set(10<<20, syscall.EROFS)
	h.failed(StoreRunRecords, &fs.PathError{Op: "write", Path: "/state/runs/.tmp-run_1.json", Err: syscall.ENOSPC})
	if err := h.check(); err == nil || err.Error() != "the state directory cannot take writes: a write of run_records failed: no space left on device" {
		t.Fatalf("after a failed write: %v", err)
	}
	d.advance(storageCheckTTL)
	if err := h.check(); err == nil || !strings.Contains(err.Error(), "a test write failed: read-only file system") {
		t.Fatalf("probe over a read-only file system: %v", err)
	}
	d.set(10<<20, nil)
	d.advance(storageCheckTTL)
	if err := h.check(); err != nil {
		t.Fatalf("after writes work again: %v", err)
	}
	// Healthy again: the next probe waits for storageProbeEvery.
	probes := d.probes
	d.advance(storageCheckTTL)
	_ = h.check()
	if d.probes != probes {
		t.Fatalf("a healthy directory was probed again after %s", storageCheckTTL)
	}
	d.advance(storageProbeEvery)
	_ = h.check()
	if d.probes != probes+1 {
		t.Fatalf("a healthy directory was not probed again after %s", storageProbeEvery)
	}
}

func TestStorageHealthRealDirectory(t *testing.T) {
	dir := t.TempDir()
	h := newStorageHealth(dir, 0, hclog.NewNullLogger(), nil)
	if err := h.check(); err != nil {
		t.Fatalf("a temporary directory cannot take writes: %v", err)
	}
	h = newStorageHealth(dir, 1<<62, hclog.NewNullLogger(), nil)
	if err := h.check(); err == nil {
		t.Fatal("a reserve of 4 EiB was met")
	}
}

func TestRefusalIsRetryableUnavailable(t *testing.T) {
	e := refusal(&StorageError{Dir: "/secret/path", Reason: "0 B free"})
	if e.Code != wop.CodeUnavailable || !e.Retryable || !strings.Contains(e.Message, "state directory") ||
		!strings.Contains(e.Message, "refused before it started") || strings.Contains(e.Message, "/secret/path") {
		t.Fatalf("refusal = %+v", e)
	}
}

func TestFormatBytes(t *testing.T) {
	for n, want := range map[uint64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1536: "1.5 KiB", 5 << 20: "5.0 MiB", 3 << 30: "3.0 GiB"} {
		if got := formatBytes(n); got != want {
			t.Errorf("formatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}
