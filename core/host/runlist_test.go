package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/wophost/wophost/core/config"
	"github.com/wophost/wophost/core/dispatch"
	"github.com/wophost/wophost/internal/atomicfile"
	"github.com/wophost/wophost/internal/pgstore"
	"github.com/wophost/wophost/internal/pgtest"
	"github.com/wophost/wophost/sdk/plugin"
	"github.com/wophost/wophost/sdk/wop"
)

// newFileHost is a host of the embedded backend, not started: its run
// records are read and written all the same.
func newFileHost(t *testing.T) *Host {
	t.Helper()
	return New(&config.Config{Host: config.Host{
		StateDir: t.TempDir(), MaxMessageBytes: 64 << 10, RunTimeout: time.Minute, Retention: config.DefaultRetention(),
	}}, config.NewLoader(), hclog.NewNullLogger(), "test")
}

// listBase is the start of the runs the listing tests record, whole
// seconds so that postgres keeps it exactly.
var listBase = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// listedRun is one run the listing tests record.
type listedRun struct {
	id, typeID, outcome, code, key, owner, replayOf string
	at                                              time.Duration
	calls                                           int
}

// listedRuns are recorded by listFixture, oldest first. Near misses sit
// beside each filter's match: a typeId and an error code that share a
// prefix, a key that is another's prefix, an owner of one byte more.
var listedRuns = []listedRun{
	{id: "run_01", typeID: "demo.node", outcome: OutcomeSucceeded, key: "key-alpha", owner: "alice", at: 1 * time.Second, calls: 2},
	{id: "run_02", typeID: "demo.node2", outcome: OutcomeFailed, code: "demo.boom", owner: "alice", at: 2 * time.Second},
	{id: "run_03", typeID: "demo.node", outcome: OutcomeFailed, code: "demo.boomer", owner: "alicea", at: 3 * time.Second},
	{id: "run_04", typeID: "demo.node", outcome: OutcomeSucceeded, key: "key-alph", at: 4 * time.Second},
	{id: "run_05", typeID: "demo.nod", outcome: OutcomeSucceeded, owner: "bob", replayOf: "run_01", at: 5 * time.Second, calls: 1},
	// Two runs started at once: the run id orders them.
	{id: "run_06", typeID: "demo.node", outcome: OutcomeSucceeded, owner: "bob", at: 6 * time.Second},
	{id: "run_07", typeID: "demo.node", outcome: OutcomeSucceeded, owner: "bob", at: 6 * time.Second},
}

func (r listedRun) record() *RunRecord {
	rec := &RunRecord{
		RunID: r.id, TypeID: r.typeID, Pack: "demo.pack", Input: json.RawMessage(`{}`), Outcome: r.outcome,
		StartedAt: listBase.Add(r.at), FinishedAt: listBase.Add(r.at + 500*time.Millisecond),
		IdempotencyKey: r.key, Owner: r.owner, ReplayOf: r.replayOf,
	}
	if r.code != "" {
		rec.Error = wop.Errorf(r.code, "it failed")
	}
	if r.calls > 0 {
		rec.Invocations = &dispatch.InvocationLog{}
		for range r.calls {
			rec.Invocations.Calls = append(rec.Invocations.Calls, dispatch.Invocation{})
		}
	}
	return rec
}

func recordRuns(t *testing.T, h *Host, runs []listedRun) {
	t.Helper()
	for _, r := range runs {
		if _, err := h.state.writeRunRecord(r.record()); err != nil {
			t.Fatalf("write %s: %v", r.id, err)
		}
	}
}

// listIDs lists f and returns the run ids of the page, and its next.
func listIDs(t *testing.T, h *Host, f RunFilter) ([]string, string) {
	t.Helper()
	page, err := h.ListRuns(context.Background(), f)
	if err != nil {
		t.Fatalf("ListRuns(%+v): %v", f, err)
	}
	ids := []string{}
	for _, s := range page.Runs {
		ids = append(ids, s.RunID)
	}
	return ids, page.Next
}

func ids(s ...string) []string { return s }

// testListRuns checks ListRuns on h, whose storage is empty: the same
// answers on either backend.
func testListRuns(t *testing.T, h *Host) {
	ctx := context.Background()
	if page, err := h.ListRuns(ctx, RunFilter{AllOwners: true}); err != nil || page.Runs == nil || len(page.Runs) != 0 || page.Next != "" {
		t.Fatalf("empty storage: %+v, %v; want an empty last page", page, err)
	}
	recordRuns(t, h, listedRuns)
	all := ids("run_07", "run_06", "run_05", "run_04", "run_03", "run_02", "run_01")
	at := func(d time.Duration) time.Time { return listBase.Add(d) }
	for _, c := range []struct {
		name string
		f    RunFilter
		want []string
	}{
		{"every owner", RunFilter{AllOwners: true}, all},
		{"typeId, not one sharing its prefix", RunFilter{AllOwners: true, TypeID: "demo.node"}, ids("run_07", "run_06", "run_04", "run_03", "run_01")},
		{"typeId longer", RunFilter{AllOwners: true, TypeID: "demo.node2"}, ids("run_02")},
		{"outcome", RunFilter{AllOwners: true, Outcome: OutcomeFailed}, ids("run_03", "run_02")},
		{"error code, not one it prefixes", RunFilter{AllOwners: true, ErrorCode: "demo.boom"}, ids("run_02")},
		{"error code of no run", RunFilter{AllOwners: true, ErrorCode: "demo.boo"}, ids()},
		{"idempotency key", RunFilter{AllOwners: true, IdempotencyKey: "key-alph"}, ids("run_04")},
		{"since is inclusive", RunFilter{AllOwners: true, Since: at(5 * time.Second)}, ids("run_07", "run_06", "run_05")},
		{"until is exclusive", RunFilter{AllOwners: true, Until: at(2 * time.Second)}, ids("run_01")},
		{"until a microsecond later", RunFilter{AllOwners: true, Until: at(2*time.Second + time.Microsecond)}, ids("run_02", "run_01")},
		{"a window", RunFilter{AllOwners: true, Since: at(2 * time.Second), Until: at(4 * time.Second)}, ids("run_03", "run_02")},
		{"an owner's", RunFilter{Owner: "alice"}, ids("run_02", "run_01")},
		{"the empty owner's", RunFilter{}, ids("run_04")},
		{"an owner of no run", RunFilter{Owner: "alic"}, ids()},
		{"filters together", RunFilter{Owner: "bob", TypeID: "demo.node", Since: at(6 * time.Second)}, ids("run_07", "run_06")},
	} {
		got, next := listIDs(t, h, c.f)
		if !slices.Equal(got, c.want) || next != "" {
			t.Errorf("%s: %v next %q; want %v and no next", c.name, got, next, c.want)
		}
	}

	page, err := h.ListRuns(ctx, RunFilter{AllOwners: true, IdempotencyKey: "key-alpha"})
	if err != nil || len(page.Runs) != 1 {
		t.Fatalf("one run: %+v, %v", page, err)
	}
	want := RunSummary{RunID: "run_01", TypeID: "demo.node", Pack: "demo.pack", Outcome: OutcomeSucceeded,
		StartedAt: at(time.Second), FinishedAt: at(1500 * time.Millisecond), IdempotencyKey: "key-alpha", Owner: "alice", Calls: 2}
	if got := page.Runs[0]; !got.StartedAt.Equal(want.StartedAt) || !got.FinishedAt.Equal(want.FinishedAt) {
		t.Errorf("times %v %v; want %v %v", got.StartedAt, got.FinishedAt, want.StartedAt, want.FinishedAt)
	} else if got.StartedAt, got.FinishedAt = want.StartedAt, want.FinishedAt; got != want {
		t.Errorf("summary %+v\nwant %+v", got, want)
	}
	// Pages of two walk every run once, in order, whatever the filter.
	for _, f := range []RunFilter{{AllOwners: true}, {AllOwners: true, TypeID: "demo.node"}, {Owner: "bob"}} {
		var walked []string
		f.Limit = 2
		for pages := 0; ; pages++ {
			if pages > len(listedRuns) {
				t.Fatalf("%+v: the pages do not end", f)
			}
			got, next := listIDs(t, h, f)
			if len(got) > 2 || (next != "" && len(got) != 2) {
				t.Fatalf("%+v: page %v next %q", f, got, next)
			}
			walked = append(walked, got...)
			if next == "" {
				break
			}
			f.After = next
		}
		f.After, f.Limit = "", 0
		whole, _ := listIDs(t, h, f)
		if !slices.Equal(walked, whole) {
			t.Errorf("%+v: pages of 2 walked %v; the whole listing is %v", f, walked, whole)
		}
	}

	// Exactly the limit: no next page.
	if got, next := listIDs(t, h, RunFilter{AllOwners: true, Limit: len(listedRuns)}); len(got) != len(listedRuns) || next != "" {
		t.Errorf("a limit of every run: %v next %q", got, next)
	}
	if got, next := listIDs(t, h, RunFilter{AllOwners: true, Limit: len(listedRuns) - 1}); len(got) != len(listedRuns)-1 || next == "" {
		t.Errorf("a limit of all but one: %v next %q", got, next)
	}

	// A run recorded after a listing is in the next.
	recordRuns(t, h, []listedRun{{id: "run_08", typeID: "demo.node", outcome: OutcomeSucceeded, at: 7 * time.Second}})
	if got, _ := listIDs(t, h, RunFilter{Limit: 1}); !slices.Equal(got, ids("run_08")) {
		t.Errorf("after a new record: %v; want run_08 first", got)
	}
	testListRefusals(t, h)
}

func testListRefusals(t *testing.T, h *Host) {
	ctx := context.Background()
	page, err := h.ListRuns(ctx, RunFilter{AllOwners: true, Limit: 1})
	if err != nil || page.Next == "" {
		t.Fatalf("first page: %+v, %v", page, err)
	}
	cursor := page.Next
	if _, err := h.ListRuns(ctx, RunFilter{AllOwners: true, After: cursor}); err != nil {
		t.Fatalf("the host's own cursor: %v", err)
	}
	flipped := []byte(cursor)
	flipped[len(flipped)/2] ^= 1
	for name, c := range map[string]RunFilter{
		"limit -1":            {Limit: -1},
		"limit past the most": {Limit: MaxRunListLimit + 1},
		"an outcome near one": {Outcome: "succeed"},
		"until at since":      {Since: listBase, Until: listBase},
		"a word for a cursor": {After: "page2"},
		"a cursor cut short":  {After: cursor[:len(cursor)-1]},
		"a cursor altered":    {After: string(flipped)},
		"a cursor too long":   {After: strings.Repeat("A", maxCursorBytes+1)},
	} {
		page, err := h.ListRuns(ctx, c)
		var we *wop.Error
		if !errors.As(err, &we) || we.Code != wop.CodeValidation || page != nil {
			t.Errorf("%s: %+v, %v; want a validation error", name, page, err)
			continue
		}
		var details map[string]string
		_ = json.Unmarshal(we.Details, &details)
		field := map[bool]string{true: "after", false: ""}[c.After != ""]
		switch {
		case c.Limit != 0:
			field = "limit"
		case c.Outcome != "":
			field = "outcome"
		case !c.Until.IsZero():
			field = "until"
		}
		if details["field"] != field || !strings.Contains(we.Message, `"`+field+`"`) {
			t.Errorf("%s: %v (details %v); want it to name %q", name, err, details, field)
		}
	}
	if got, _ := listIDs(t, h, RunFilter{AllOwners: true, Limit: MaxRunListLimit}); len(got) == 0 {
		t.Error("the most a page may hold was refused")
	}
	var many []listedRun
	for i := range DefaultRunListLimit {
		many = append(many, listedRun{id: fmt.Sprintf("run_1%02d", i), typeID: "demo.many", outcome: OutcomeSucceeded, at: time.Minute})
	}
	recordRuns(t, h, many)
	if got, next := listIDs(t, h, RunFilter{AllOwners: true}); len(got) != DefaultRunListLimit || next == "" {
		t.Errorf("no limit, more runs than a page: %d runs, next %q; want %d and a next page", len(got), next, DefaultRunListLimit)
	}
}

func TestListRunsEmbedded(t *testing.T) {
	testListRuns(t, newFileHost(t))
}

func TestListRunsPostgres(t *testing.T) {
	testListRuns(t, newPostgresHost(t, pgtest.DSN(t)))
}

// The embedded listing reads each record file once: a file whose size
// and modification time are unchanged is answered from the cache, one
// that changed is read again, and one pruned leaves the cache.
func TestListRunsEmbeddedCache(t *testing.T) {
	h := newFileHost(t)
	dir := filepath.Join(h.cfg.Host.StateDir, RunsDir)
	recordRuns(t, h, listedRuns[:2])
	if got, _ := listIDs(t, h, RunFilter{AllOwners: true}); !slices.Equal(got, ids("run_02", "run_01")) {
		t.Fatalf("listing %v", got)
	}
	if n := h.state.summaries.len(); n != 2 {
		t.Fatalf("cache holds %d summaries, want 2", n)
	}
	// Altered in place, keeping its size and time: the cache answers.
	path := filepath.Join(dir, "run_01.json")
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(strings.Repeat(" ", int(info.Size()))), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, info.ModTime(), info.ModTime()); err != nil {
		t.Fatal(err)
	}
	if page, _ := h.ListRuns(context.Background(), RunFilter{AllOwners: true}); page.Runs[1].Outcome != OutcomeSucceeded {
		t.Fatalf("an unchanged file was read again: %+v", page.Runs[1])
	}
	// Its time moves: it is read again, and found unreadable.
	later := info.ModTime().Add(time.Second)
	if err := os.Chtimes(path, later, later); err != nil {
		t.Fatal(err)
	}
	// Unreadable, it is listed at its file's time, now the newest.
	page, _ := h.ListRuns(context.Background(), RunFilter{AllOwners: true})
	if got := page.Runs[0]; got.RunID != "run_01" || got.Outcome != OutcomeUnreadable || !got.StartedAt.Equal(later) {
		t.Fatalf("a changed file: %+v; want run_01 unreadable at %v", got, later)
	}
	if err := os.Remove(filepath.Join(dir, "run_02.json")); err != nil {
		t.Fatal(err)
	}
	if got, _ := listIDs(t, h, RunFilter{AllOwners: true}); !slices.Equal(got, ids("run_01")) {
		t.Fatalf("after a removal: %v", got)
	}
	if n := h.state.summaries.len(); n != 1 {
		t.Fatalf("cache holds %d summaries after a removal, want 1", n)
	}
}

// A record that cannot be read is listed as unreadable, at its file's
// time and with no owner, beside the readable; temporary files, the
// tombstones and names that are no run id's are not listed.
func TestListRunsEmbeddedUnreadable(t *testing.T) {
	h := newFileHost(t)
	dir := filepath.Join(h.cfg.Host.StateDir, RunsDir)
	recordRuns(t, h, listedRuns[:1])
	stamp := time.Date(2026, 3, 4, 5, 6, 9, 0, time.UTC)
	for name, body := range map[string]string{
		"run_0a.json":                           `{`,
		"run_0b.json":                           `{"runId":"run_0b","typeId":"a.b","input":{},"outcome":"succeeded","owner":"alice","digest":"sha256:00"}`,
		atomicfile.TempPrefix + "run_0c.json-1": `{`,
		"notarun.json":                          `{`,
		"run_0D.json":                           `{`,
		"run_0e.txt":                            `{`,
	} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, stamp, stamp); err != nil {
			t.Fatal(err)
		}
	}
	if err := writeFileTombstones(dir, []string{"run_0f"}, stamp); err != nil {
		t.Fatal(err)
	}
	page, err := h.ListRuns(context.Background(), RunFilter{AllOwners: true})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range page.Runs {
		got = append(got, s.RunID+" "+s.Outcome+" "+s.Owner)
		if s.Outcome == OutcomeUnreadable && !s.StartedAt.Equal(stamp) {
			t.Errorf("%s started at %v, want its file's time %v", s.RunID, s.StartedAt, stamp)
		}
	}
	// The altered record claims alice; unread, it is no one's.
	want := []string{"run_0b unreadable ", "run_0a unreadable ", "run_01 succeeded alice"}
	if !slices.Equal(got, want) {
		t.Fatalf("listing %q\nwant %q", got, want)
	}
	if got, _ := listIDs(t, h, RunFilter{Owner: "alice"}); !slices.Equal(got, ids("run_01")) {
		t.Errorf("alice's runs: %v", got)
	}
	if got, _ := listIDs(t, h, RunFilter{AllOwners: true, Outcome: OutcomeUnreadable}); !slices.Equal(got, ids("run_0b", "run_0a")) {
		t.Errorf("unreadable runs: %v", got)
	}
}

// Migration 004 fills the listing's columns of the rows written before
// it from their bytes: a record's fields, and for bytes that are no run
// record (not JSON, not UTF-8, not an object) an unreadable row at the
// time it was stored, without failing. Rows written after it without the
// columns, by put from bytes that are no record or by a host that
// predates them, get them from the table's trigger.
func TestRunRecordsMigrationBackfills(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	before := fstest.MapFS{}
	err := fs.WalkDir(hostMigrations(), ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || path >= "004" {
			return err
		}
		data, err := fs.ReadFile(hostMigrations(), path)
		before[path] = &fstest.MapFile{Data: data}
		return err
	})
	if err != nil || len(before) != 3 {
		t.Fatalf("migrations before 004: %v, %v", before, err)
	}
	settings := plugin.Storage{Backend: config.BackendPostgres, DSN: dsn, MaxConnections: 2, StatementTimeout: 5 * time.Second}
	pool, err := pgstore.Open(ctx, settings, config.HostStorageSchema, before)
	if err != nil {
		t.Fatal(err)
	}
	// Recent, so that the host's retention keeps them.
	stored := time.Now().UTC().Truncate(time.Second)
	old := func(runID string, data []byte) {
		t.Helper()
		if _, err := pool.Exec(ctx, `INSERT INTO run_records (run_id, record, created_at) VALUES ($1, $2, $3)`, runID, data, stored); err != nil {
			t.Fatal(err)
		}
	}
	encoded := func(r listedRun) []byte {
		data, err := encodeRunRecord(r.record())
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	old("run_a1", encoded(listedRun{id: "run_a1", typeID: "demo.node", outcome: OutcomeFailed, code: "demo.boom", key: "key-alpha", owner: "alice", replayOf: "run_01", at: time.Second, calls: 3}))
	// A record written before records kept their key, owner or calls.
	plain, err := json.Marshal(map[string]any{"runId": "run_a2", "typeId": "demo.node", "pack": "demo.pack", "input": map[string]any{},
		"startedAt": listBase.Add(2 * time.Second), "finishedAt": listBase.Add(3 * time.Second), "outcome": "succeeded", "prompts": []any{}})
	if err != nil {
		t.Fatal(err)
	}
	old("run_a2", plain)
	old("run_a3", []byte("not json"))
	old("run_a4", []byte{0xff, 0xfe, '{', '}'})
	old("run_a5", []byte(`[1, 2]`))
	old("run_a6", []byte(`{"typeId": "demo.node", "outcome": "succeeded", "startedAt": "yesterday"}`))
	pool.Close()

	h := newPostgresHost(t, dsn)
	store, err := h.state.runRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.put(ctx, "run_a7", []byte("junk")); err != nil {
		t.Fatal(err)
	}
	// A host that predates the columns writes only the bytes.
	pool, err = h.state.database(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO run_records (run_id, record, created_at) VALUES ($1, $2, $3)`, "run_a8",
		encoded(listedRun{id: "run_a8", typeID: "demo.other", outcome: OutcomeSucceeded, owner: "bob", at: 4 * time.Second}), stored); err != nil {
		t.Fatal(err)
	}

	page, err := h.ListRuns(ctx, RunFilter{AllOwners: true})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]RunSummary{}
	for _, s := range page.Runs {
		got[s.RunID] = s
	}
	if len(got) != 8 {
		t.Fatalf("listed %d runs, want 8: %+v", len(got), page.Runs)
	}
	a1 := got["run_a1"]
	if a1.TypeID != "demo.node" || a1.Pack != "demo.pack" || a1.Outcome != OutcomeFailed || a1.ErrorCode != "demo.boom" ||
		a1.IdempotencyKey != "key-alpha" || a1.Owner != "alice" || a1.ReplayOf != "run_01" || a1.Calls != 3 ||
		!a1.StartedAt.Equal(listBase.Add(time.Second)) || !a1.FinishedAt.Equal(listBase.Add(1500*time.Millisecond)) {
		t.Errorf("backfilled record: %+v", a1)
	}
	if a2 := got["run_a2"]; a2.Outcome != OutcomeSucceeded || a2.Owner != "" || a2.IdempotencyKey != "" || a2.Calls != 0 ||
		!a2.StartedAt.Equal(listBase.Add(2*time.Second)) {
		t.Errorf("an older record: %+v", a2)
	}
	for _, id := range []string{"run_a3", "run_a4", "run_a5", "run_a6"} {
		if s := got[id]; s.Outcome != OutcomeUnreadable || !s.StartedAt.Equal(stored) || s.TypeID != "" || s.Owner != "" {
			t.Errorf("%s: %+v; want unreadable at %v", id, s, stored)
		}
	}
	if s := got["run_a7"]; s.Outcome != OutcomeUnreadable || s.StartedAt.IsZero() {
		t.Errorf("put of bytes that are no record: %+v", s)
	}
	if s := got["run_a8"]; s.TypeID != "demo.other" || s.Owner != "bob" || !s.StartedAt.Equal(listBase.Add(4*time.Second)) {
		t.Errorf("a row without its columns: %+v", s)
	}
	if ids, _ := listIDs(t, h, RunFilter{Owner: "alice"}); !slices.Equal(ids, []string{"run_a1"}) {
		t.Errorf("alice's runs after the migration: %v", ids)
	}
}

// Storage names the backend and where it keeps state, never a user or
// password, and whether it takes writes now, with the reason when not.
func TestStorageInfo(t *testing.T) {
	h := newFileHost(t)
	if got := h.Storage(); got != (StorageInfo{Backend: config.BackendEmbedded, Where: h.cfg.Host.StateDir, Writable: true}) {
		t.Errorf("embedded: %+v", got)
	}
	h = newFileHost(t)
	h.state.health.space = func(string) (space, error) { return space{avail: 1024}, nil }
	if got := h.Storage(); got.Writable || !strings.Contains(got.Reason, "1.0 KiB free") {
		t.Errorf("a full disk: %+v", got)
	}

	for dsn, want := range map[string]string{
		"postgres://ops:s3cret@db.example:6543/runs?sslmode=disable":  "db.example:6543/runs",
		"host=10.0.0.7 port=5433 dbname=wop user=ops password=s3cret": "10.0.0.7:5433/wop",
		"postgres://ops:s3cret@[::1]:5432/runs?sslmode=disable":       "[::1]:5432/runs",
		"postgres://%zz": "(a dsn that cannot be parsed)",
	} {
		if got := databaseWhere(dsn); got != want {
			t.Errorf("databaseWhere(%q) = %q, want %q", dsn, got, want)
		}
	}

	dsn := pgtest.DSN(t)
	h = newPostgresHost(t, dsn)
	got := h.Storage()
	name := dsn[strings.LastIndex(dsn, "/")+1 : strings.Index(dsn, "?")]
	if got.Backend != config.BackendPostgres || !strings.HasSuffix(got.Where, ":5432/"+name) || strings.Contains(got.Where, "@") ||
		!got.Writable || got.Reason != "" {
		t.Errorf("postgres: %+v; want host:5432/%s, writable", got, name)
	}
}
