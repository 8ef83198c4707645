package bench

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wophost/wophost/core/host"
	"github.com/wophost/wophost/plugins/promptlib/store"
	"github.com/wophost/wophost/sdk/families/promptlibrary"
)

// The store benchmark's size: 10,000 prompts × 10 versions by default, as
// `make bench` runs it. It runs once per process whatever b.N is, since
// one pass already makes 100,000 publishes.
//
// Every publish syncs its blob, its record and their directories, so on a
// disk the pass is bound by the device's sync latency (about 14 ms per
// publish on the reference VM, 25 minutes for the full pass). By default
// the pass therefore runs on a RAM-backed file system when /dev/shm
// exists, which measures the store's own cost at full scale;
// -promptlib.dir puts it on a disk, and BenchmarkPromptPublishDurable
// measures durable publishes on the test's temporary directory.
var (
	storePrompts  = flag.Int("promptlib.prompts", 10000, "prompt names published by BenchmarkPromptStore")
	storeVersions = flag.Int("promptlib.versions", 10, "versions of each name published by BenchmarkPromptStore")
	storeDir      = flag.String("promptlib.dir", "", "parent directory of BenchmarkPromptStore's store (default: /dev/shm when present, else the test's temporary directory)")
)

// maxDurablePublishes caps BenchmarkPromptPublishDurable: each publish
// waits for several syncs, and `make bench` passes -benchtime 2000x.
const maxDurablePublishes = 300

// benchPrompt is a typical system prompt of about 1 KiB.
func benchPrompt(name string, version int) []byte {
	return fmt.Appendf(nil, "---\nname: %s\ndescription: benchmark prompt\nvariables:\n  type: object\n  properties:\n    topic: {type: string}\n---\n"+
		"You are a careful assistant for {{topic}}. Version %d.\n%s\n", name, version,
		"Answer briefly and cite the document you used. Never invent a source; say so when you do not know. "+
			"Keep the user's language, units and spelling. Use plain sentences, no lists unless asked. "+
			"When a request is ambiguous, ask one clarifying question first, then answer. "+
			"Refuse requests for personal data about third parties, and explain the refusal in one sentence. "+
			"Prefer the most recent document when two disagree, and say that they disagree. "+
			"Quote numbers exactly as the documents give them; do not round, convert or sum them unless asked. "+
			"End with the list of documents used, one per line, as `- title (date)`.")
}

// promptConfig serves promptLibrary from the plugin over storeDir, with
// testcap and the probe pack so that nodes can call get.
func promptConfig(tb testing.TB, storeDir string) string {
	return writeConfig(tb, fmt.Sprintf(`
capability "echo" {
  plugin   = %q
  families = ["test.echo"]
}
capability "prompts" {
  plugin   = %q
  families = ["promptLibrary"]
  config {
    dir = %q
  }
}
pack "private.wophost.probe" {
  path = %q
}
`, bin.testcap, binary(tb, "./plugins/promptlib"), storeDir, bin.probePack))
}

// seedStore publishes one prompt and returns the store and the pin.
func seedStore(tb testing.TB) (string, string) {
	dir := filepath.Join(tb.TempDir(), "prompts")
	s, err := store.Open(dir)
	if err != nil {
		tb.Fatal(err)
	}
	res, err := s.Publish(context.Background(), benchPrompt("bench/system", 1))
	if err != nil {
		tb.Fatal(err)
	}
	return dir, res.Pin().String()
}

// reportLatencies reports the p50 and p99 of ds in microseconds.
func reportLatencies(b *testing.B, ds []time.Duration) {
	slices.Sort(ds)
	at := func(q float64) float64 { return float64(ds[int(q*float64(len(ds)-1))].Nanoseconds()) / 1e3 }
	b.ReportMetric(at(0.50), "p50-µs")
	b.ReportMetric(at(0.99), "p99-µs")
}

// BenchmarkPromptGet times promptLibrary.get of a pinned ~1 KiB prompt
// through the host's router, its prompt policy (pin parsing, digest
// check) and the plugin, as `host call` makes it, one call at a time.
func BenchmarkPromptGet(b *testing.B) {
	dir, pin := seedStore(b)
	h := startHost(b, promptConfig(b, dir))
	ctx := context.Background()
	req := json.RawMessage(`{"promptId":"` + pin + `"}`)
	for range warmCalls {
		if _, err := h.Call(ctx, promptlibrary.Family, promptlibrary.MethodGet, req, host.RunOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	ds := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		_, err := h.Call(ctx, promptlibrary.Family, promptlibrary.MethodGet, req, host.RunOptions{})
		ds = append(ds, time.Since(t0))
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportLatencies(b, ds)
}

// BenchmarkPromptGetFromNode times one node run whose only work is a get:
// node dispatch, the pack's ctx call back through the host, the policy and
// the plugin.
func BenchmarkPromptGetFromNode(b *testing.B) {
	dir, pin := seedStore(b)
	h := startHost(b, promptConfig(b, dir))
	ctx := context.Background()
	input := json.RawMessage(`{"family":"promptLibrary","method":"get","payload":{"promptId":"` + pin + `"}}`)
	for range warmCalls {
		if _, err := h.Run(ctx, "probe.call", input, host.RunOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	ds := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		_, err := h.Run(ctx, "probe.call", input, host.RunOptions{})
		ds = append(ds, time.Since(t0))
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportLatencies(b, ds)
}

// storeParent picks the directory the store pass runs in (see storeDir).
func storeParent(b *testing.B) string {
	parent := *storeDir
	if parent == "" {
		if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
			parent = "/dev/shm"
		} else {
			return b.TempDir()
		}
	}
	dir, err := os.MkdirTemp(parent, "wophost-promptstore-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// BenchmarkPromptPublishDurable publishes min(b.N, maxDurablePublishes)
// new versions into a store in the test's temporary directory, each synced
// to the device, and reports the per-publish latency.
func BenchmarkPromptPublishDurable(b *testing.B) {
	s, err := store.Open(filepath.Join(b.TempDir(), "prompts"))
	if err != nil {
		b.Fatal(err)
	}
	n := min(b.N, maxDurablePublishes)
	ds := make([]time.Duration, 0, n)
	b.ResetTimer()
	for i := range n {
		raw := benchPrompt(fmt.Sprintf("bench/d%03d", i%50), i)
		t0 := time.Now()
		_, err := s.Publish(context.Background(), raw)
		ds = append(ds, time.Since(t0))
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportLatencies(b, ds)
}

// storeFigures are the results of one store benchmark pass.
type storeFigures struct {
	where         string
	publish, read time.Duration
	versions      int
	diskBytes     int64
	files         int
	err           error
}

// BenchmarkPromptStore publishes -promptlib.prompts names ×
// -promptlib.versions versions into a fresh store (each publish durable:
// synced blob, record and directories), then reads every version back by
// its full pin, and reports the time per version and the disk used. It is
// skipped under -short.
func BenchmarkPromptStore(b *testing.B) {
	if testing.Short() {
		b.Skip("the store benchmark publishes 100,000 versions; not under -short")
	}
	f := storeOnce(func() string { return storeParent(b) })
	if f.err != nil {
		b.Fatal(f.err)
	}
	b.Logf("store of %d versions in %s", f.versions, f.where)
	// ns/op is the publish time per version: the pass runs once whatever
	// b.N is, so the framework's figure would mean nothing.
	b.ReportMetric(float64(f.publish.Nanoseconds())/float64(f.versions), "ns/op")
	b.ReportMetric(float64(f.publish.Microseconds())/float64(f.versions), "publish-µs/version")
	b.ReportMetric(float64(f.read.Microseconds())/float64(f.versions), "read-µs/version")
	b.ReportMetric(f.publish.Seconds(), "publish-s")
	b.ReportMetric(f.read.Seconds(), "read-s")
	b.ReportMetric(float64(f.diskBytes)/(1<<20), "disk-MiB")
	b.ReportMetric(float64(f.files), "files")
	b.ReportMetric(float64(f.versions), "versions")
}

// storeOnce runs the store pass at most once per process: the benchmark
// framework calls a benchmark several times while it sizes b.N.
var storeOnce = func() func(func() string) storeFigures {
	var once sync.Once
	var f storeFigures
	return func(tempDir func() string) storeFigures {
		once.Do(func() { f = storePass(tempDir(), *storePrompts, *storeVersions) })
		return f
	}
}()

// storePass publishes prompts × versions into a store under root, reads
// every version back, and measures both and the disk used.
func storePass(root string, prompts, versions int) storeFigures {
	f := storeFigures{where: root}
	dir := filepath.Join(root, "prompts")
	s, err := store.Open(dir)
	if err != nil {
		return storeFigures{err: err}
	}
	ctx := context.Background()
	pins := make([]promptlibrary.Pin, 0, prompts*versions)
	t0 := time.Now()
	for v := 1; v <= versions; v++ {
		for p := range prompts {
			res, err := s.Publish(ctx, benchPrompt(fmt.Sprintf("bench/p%05d", p), v))
			if err != nil {
				return storeFigures{err: err}
			}
			pins = append(pins, res.Pin())
		}
	}
	f.publish = time.Since(t0)
	f.versions = len(pins)
	t0 = time.Now()
	for _, pin := range pins {
		if _, _, err := s.Get(pin); err != nil {
			return storeFigures{err: err}
		}
	}
	f.read = time.Since(t0)
	f.diskBytes, f.files, f.err = diskUsage(dir)
	return f
}

// diskUsage sums the blocks allocated to every file and directory under
// dir, as du does.
func diskUsage(dir string) (int64, int, error) {
	var total int64
	files := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			total += st.Blocks * 512
		} else {
			total += info.Size()
		}
		if !d.IsDir() {
			files++
		}
		return nil
	})
	return total, files, err
}

// TestPromptBenchSetup runs the prompt benchmarks' setup once at a small
// size, so `go test` catches a broken setup without running them.
func TestPromptBenchSetup(t *testing.T) {
	dir, pin := seedStore(t)
	h := startHost(t, promptConfig(t, dir))
	out, err := h.Call(context.Background(), promptlibrary.Family, promptlibrary.MethodGet,
		json.RawMessage(`{"promptId":"`+pin+`"}`), host.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var p promptlibrary.Prompt
	if err := json.Unmarshal(out, &p); err != nil || p.Raw != string(benchPrompt("bench/system", 1)) {
		t.Fatalf("get = %.200s, %v", out, err)
	}
	f := storePass(t.TempDir(), 5, 2)
	// A blob and a record per version, and the lock file.
	if f.err != nil || f.versions != 10 || f.files != 21 || f.diskBytes == 0 {
		t.Fatalf("store pass = %+v", f)
	}
}
