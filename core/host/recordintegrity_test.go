package host

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/wophost/wophost/core/config"
	"github.com/wophost/wophost/core/dispatch"
	"github.com/wophost/wophost/internal/pgtest"
	"github.com/wophost/wophost/sdk/wop"
)

// loggedRecord is a record with one logged call, whose result an
// attacker would change.
func loggedRecord(runID string) *RunRecord {
	rec := testRecord(runID)
	rec.Invocations = &dispatch.InvocationLog{Calls: []dispatch.Invocation{{
		Seq: 1, Caller: "pack demo.pack node demo.node", Depth: 1, Family: "acme.kv", Method: "put",
		Key: "sha256:" + strings.Repeat("0", 64), Result: json.RawMessage(`{"stored":"yes"}`),
	}}}
	return rec
}

// assertUnusable checks that err is replay_source_missing for runID with
// details.reason reason, naming no file.
func assertUnusable(t *testing.T, err error, runID, reason, path string) {
	t.Helper()
	we := wop.AsError(err)
	if we == nil || we.Code != dispatch.CodeReplaySourceMissing {
		t.Fatalf("%s: %v; want %s", reason, err, dispatch.CodeReplaySourceMissing)
	}
	var details struct{ RunID, Reason string }
	if json.Unmarshal(we.Details, &details) != nil || details.RunID != runID || details.Reason != reason {
		t.Fatalf("details %s; want runId %s, reason %s", we.Details, runID, reason)
	}
	if path != "" && strings.Contains(we.Message, path) {
		t.Fatalf("the message names the file: %s", we.Message)
	}
}

func fileHost(t *testing.T, stateDir string) *Host {
	return New(&config.Config{Host: config.Host{
		StateDir: stateDir, MaxMessageBytes: 64 << 10, RunTimeout: time.Minute, Retention: config.DefaultRetention(),
	}}, config.NewLoader(), hclog.NewNullLogger(), "test")
}

// A record is read back only as it was written: an altered result, a cut,
// a record without its digest or a file that is a link is
// replay_source_missing naming why; a record re-indented is the same
// record.
func TestRunRecordIntegrityFile(t *testing.T) {
	stateDir := t.TempDir()
	dir := filepath.Join(stateDir, RunsDir)
	h := fileHost(t, stateDir)
	ctx := context.Background()
	write := func(id string) (string, []byte) {
		path, err := writeRunRecord(dir, loggedRecord(id), nil)
		if err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return path, data
	}

	path, data := write("run_01")
	rec, err := h.RunRecord(ctx, "run_01")
	if err != nil || !strings.HasPrefix(rec.Digest, "sha256:") || len(rec.Digest) != len("sha256:")+64 {
		t.Fatalf("intact record: %+v, %v", rec, err)
	}
	// The digest is over the canonical form: new whitespace is no change.
	var buf bytes.Buffer
	if err := json.Compact(&buf, data); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := h.RunRecord(ctx, "run_01"); err != nil {
		t.Fatalf("compacted record: %v", err)
	}

	path, data = write("run_02")
	altered := bytes.Replace(data, []byte(`"yes"`), []byte(`"no"`), 1)
	if bytes.Equal(altered, data) {
		t.Fatal("nothing to alter")
	}
	if err := os.WriteFile(path, altered, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = h.RunRecord(ctx, "run_02")
	assertUnusable(t, err, "run_02", RecordDigestMismatch, path)

	path, data = write("run_03")
	if err := os.WriteFile(path, data[:len(data)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = h.RunRecord(ctx, "run_03")
	assertUnusable(t, err, "run_03", RecordTruncated, path)
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = h.RunRecord(ctx, "run_03")
	assertUnusable(t, err, "run_03", RecordTruncated, path)

	path, data = write("run_04")
	var members map[string]json.RawMessage
	if err := json.Unmarshal(data, &members); err != nil {
		t.Fatal(err)
	}
	delete(members, "digest")
	undigested, _ := json.Marshal(members)
	if err := os.WriteFile(path, undigested, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = h.RunRecord(ctx, "run_04")
	assertUnusable(t, err, "run_04", RecordDigestMissing, path)

	// Links, to an intact record outside the directory and inside it.
	outside := filepath.Join(t.TempDir(), "run_05.json")
	_, data = write("run_05")
	if err := os.WriteFile(outside, data, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "run_05.json")
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	_, err = h.RunRecord(ctx, "run_05")
	assertUnusable(t, err, "run_05", RecordLink, outside)
	write("run_06")
	if err := os.Symlink("run_06.json", filepath.Join(dir, "run_07.json")); err != nil {
		t.Fatal(err)
	}
	_, err = h.RunRecord(ctx, "run_07")
	assertUnusable(t, err, "run_07", RecordLink, dir)
	if _, err := h.RunRecord(ctx, "run_06"); err != nil {
		t.Fatalf("the link's target itself: %v", err)
	}
}

// The same checks hold for a row of the postgres backend.
func TestRunRecordIntegrityPostgres(t *testing.T) {
	dsn := pgtest.DSN(t)
	h := newPostgresHost(t, dsn)
	ctx := context.Background()
	pool, err := h.state.database(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"run_01", "run_02", "run_03"} {
		if _, err := h.state.writeRunRecord(loggedRecord(id)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.RunRecord(ctx, "run_01"); err != nil {
		t.Fatalf("intact row: %v", err)
	}
	if _, err := pool.Exec(ctx, `UPDATE run_records SET record = convert_to(replace(convert_from(record, 'UTF8'), '"yes"', '"no"'), 'UTF8') WHERE run_id = 'run_02'`); err != nil {
		t.Fatal(err)
	}
	_, err = h.RunRecord(ctx, "run_02")
	assertUnusable(t, err, "run_02", RecordDigestMismatch, "")
	if _, err := pool.Exec(ctx, `UPDATE run_records SET record = substring(record from 1 for 40) WHERE run_id = 'run_03'`); err != nil {
		t.Fatal(err)
	}
	_, err = h.RunRecord(ctx, "run_03")
	assertUnusable(t, err, "run_03", RecordTruncated, "")
}
