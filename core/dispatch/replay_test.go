package dispatch

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gowebpki/jcs"

	"github.com/wophost/wophost/core/registry"
	"github.com/wophost/wophost/sdk/wop"
)

// countingInvoker answers each call with answer(family, method, payload)
// and counts the calls that reached it.
type countingInvoker struct {
	n      atomic.Int32
	answer func(family, method string, payload []byte) ([]byte, error)
}

func (c *countingInvoker) Invoke(_ context.Context, family, method string, payload []byte, _ wop.CallContext) ([]byte, error) {
	c.n.Add(1)
	return c.answer(family, method, payload)
}

// journalRouter serves aiEnvelope and acme.kv from inv, with a journal in
// which acme.kv.get is pure and "s3cret-value" is a secret.
func journalRouter(inv registry.Invoker) (*Router, *Journal) {
	reg := registry.New(registry.Implementation{Name: "wophost", Version: "test"})
	reg.Declare("ai", "plugin-ai")
	reg.Ready("ai", []registry.Family{{Name: wop.FamilyAIEnvelope, Methods: []string{"generate"}}}, inv)
	reg.Declare("kv", "plugin-kv")
	reg.Ready("kv", []registry.Family{{Name: "acme.kv", Methods: []string{"get", "put"}}}, inv)
	r := NewRouter(reg, testDepthLimit, 1<<20)
	j := NewJournal(func(family, method string) bool { return family == "acme.kv" && method == "get" },
		func(b []byte) bool { return strings.Contains(string(b), "s3cret-value") })
	r.SetJournal(j)
	return r, j
}

// echoAnswers answers every call with {"echo": <method>, "n": <count>}.
func echoAnswers(c *countingInvoker) func(string, string, []byte) ([]byte, error) {
	return func(_, method string, _ []byte) ([]byte, error) {
		return []byte(`{"echo":"` + method + `","n":` + strconv.Itoa(int(c.n.Load())) + `}`), nil
	}
}

func callRun(t *testing.T, r *Router, runID, family, method, payload string) ([]byte, error) {
	t.Helper()
	return r.Call(context.Background(), allowAll, family, method, []byte(payload), wop.CallContext{RunID: runID, Depth: 1})
}

func TestInvocationKey(t *testing.T) {
	gen := InvocationKey(wop.FamilyAIEnvelope, "generate", []byte(`{"userMessage":"hi","idempotencyKey":"run_1"}`))
	for _, tc := range []struct {
		name           string
		family, method string
		payload        string
		same           bool
	}{
		{"another per-run key", wop.FamilyAIEnvelope, "generate", `{"idempotencyKey":"run_2","userMessage":"hi"}`, true},
		{"whitespace and order", wop.FamilyAIEnvelope, "generate", "{ \"userMessage\" : \"hi\" }", true},
		{"another request", wop.FamilyAIEnvelope, "generate", `{"userMessage":"ho","idempotencyKey":"run_1"}`, false},
		{"another method", wop.FamilyAIEnvelope, "await", `{"userMessage":"hi","idempotencyKey":"run_1"}`, false},
		{"a vendor's idempotencyKey counts", "acme.kv", "generate", `{"userMessage":"hi","idempotencyKey":"run_1"}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := InvocationKey(tc.family, tc.method, []byte(tc.payload))
			if (k == gen) != tc.same {
				t.Errorf("key %s vs %s: same = %v, want %v", k, gen, k == gen, tc.same)
			}
		})
	}
	if !strings.HasPrefix(gen, "sha256:") || len(gen) != len("sha256:")+64 {
		t.Errorf("key %q is not sha256:<hex>", gen)
	}
	if InvocationKey("acme.kv", "get", []byte("not json")) == InvocationKey("acme.kv", "get", []byte("not json!")) {
		t.Error("two requests that are not JSON share a key")
	}
}

// record runs calls under a tracked run and returns its log.
func record(t *testing.T, r *Router, j *Journal, limits LogLimits, calls ...[3]string) *InvocationLog {
	t.Helper()
	l, stop := j.Track("run_src", limits, nil)
	defer stop()
	for _, c := range calls {
		_, _ = callRun(t, r, "run_src", c[0], c[1], c[2])
	}
	return l.Log()
}

func TestJournalRecordsTrackedRuns(t *testing.T) {
	inv := &countingInvoker{}
	inv.answer = func(family, method string, _ []byte) ([]byte, error) {
		if method == "put" {
			return nil, wop.Errorf("acme.kv_full", "full")
		}
		return []byte(`{"v":1}`), nil
	}
	r, j := journalRouter(inv)
	log := record(t, r, j, LogLimits{},
		[3]string{"acme.kv", "get", `{"key":"a"}`},
		[3]string{"acme.kv", "put", `{"key":"a"}`},
		[3]string{"acme.nothing", "x", `{}`})
	if len(log.Calls) != 3 || log.Truncated {
		t.Fatalf("log %+v", log)
	}
	get, put, none := log.Calls[0], log.Calls[1], log.Calls[2]
	if get.Seq != 1 || get.Caller != "pack:demo" || get.Depth != 1 || !get.Pure || string(get.Result) != `{"v":1}` || get.Error != nil {
		t.Errorf("get %+v", get)
	}
	if put.Seq != 2 || put.Pure || put.Result != nil || put.Error == nil || put.Error.Code != "acme.kv_full" {
		t.Errorf("put %+v", put)
	}
	if none.Error == nil || none.Error.Code != wop.CodeCapabilityNotProvided {
		t.Errorf("a refusal by the router is logged too: %+v", none)
	}
	if get.Key != InvocationKey("acme.kv", "get", []byte(`{"key":"a"}`)) {
		t.Errorf("key %s", get.Key)
	}
	// A run the journal does not track leaves nothing.
	if _, err := callRun(t, r, "run_other", "acme.kv", "get", `{}`); err != nil {
		t.Fatal(err)
	}
	if j.run("run_other") != nil {
		t.Error("an untracked run was tracked")
	}
}

func TestJournalBoundsAndSecrets(t *testing.T) {
	inv := &countingInvoker{}
	inv.answer = func(_, _ string, payload []byte) ([]byte, error) { return payload, nil }
	r, j := journalRouter(inv)

	log := record(t, r, j, LogLimits{MaxCalls: 2},
		[3]string{"acme.kv", "put", `{"n":1}`}, [3]string{"acme.kv", "put", `{"n":2}`}, [3]string{"acme.kv", "put", `{"n":3}`})
	if len(log.Calls) != 2 || !log.Truncated || log.Dropped != 1 {
		t.Errorf("max calls: %d calls, truncated %v, dropped %d", len(log.Calls), log.Truncated, log.Dropped)
	}
	big := `{"v":"` + strings.Repeat("x", 600) + `"}`
	log = record(t, r, j, LogLimits{MaxBytes: 700},
		[3]string{"acme.kv", "put", `{"n":1}`}, [3]string{"acme.kv", "put", big}, [3]string{"acme.kv", "put", `{"n":3}`})
	if len(log.Calls) != 1 || !log.Truncated || log.Dropped != 2 {
		t.Errorf("max bytes: %d calls, truncated %v, dropped %d; a log once cut stays cut", len(log.Calls), log.Truncated, log.Dropped)
	}

	log = record(t, r, j, LogLimits{}, [3]string{"acme.kv", "put", `{"token":"s3cret-value"}`})
	if c := log.Calls[0]; !c.Redacted || c.Result != nil || c.Error != nil {
		t.Errorf("an answer holding a secret was kept: %+v", c)
	}
	if b, _ := json.Marshal(log); strings.Contains(string(b), "s3cret-value") {
		t.Errorf("the log holds the secret: %s", b)
	}
}

// replay runs calls as a replay of src and returns the answers, the
// replay's log and its summary.
func replay(t *testing.T, r *Router, j *Journal, src *InvocationLog, live func(string, string) bool, calls ...[3]string) ([]string, []error, *RunLog) {
	t.Helper()
	l, stop := j.Track("run_replay", LogLimits{}, &ReplaySource{RunID: "run_src", Log: src, Live: live})
	defer stop()
	var outs []string
	var errs []error
	for _, c := range calls {
		out, err := callRun(t, r, "run_replay", c[0], c[1], c[2])
		outs, errs = append(outs, string(out)), append(errs, err)
	}
	return outs, errs, l
}

func TestReplayServesEffectsAndRunsPureCalls(t *testing.T) {
	inv := &countingInvoker{}
	inv.answer = echoAnswers(inv)
	r, j := journalRouter(inv)
	gen := [3]string{wop.FamilyAIEnvelope, "generate", `{"userMessage":"hi","idempotencyKey":"run_src"}`}
	get := [3]string{"acme.kv", "get", `{"key":"a"}`}
	src := record(t, r, j, LogLimits{}, gen, gen, get)
	recorded := []string{string(src.Calls[0].Result), string(src.Calls[1].Result)}
	before := inv.n.Load()

	// The same calls, another per-run key: both generates come from the
	// log, in order; the pure get runs live and answers differently.
	gen2 := [3]string{wop.FamilyAIEnvelope, "generate", `{"idempotencyKey":"run_replay","userMessage":"hi"}`}
	outs, errs, l := replay(t, r, j, src, nil, gen2, gen2, get)
	for i := range 2 {
		if errs[i] != nil || outs[i] != recorded[i] {
			t.Errorf("generate %d: %s %v, want the recorded %s", i, outs[i], errs[i], recorded[i])
		}
	}
	if got := inv.n.Load() - before; got != 1 {
		t.Errorf("%d calls reached the plugin, want the pure get alone", got)
	}
	s := l.Summary()
	if s.Served != 2 || s.Live != 1 || s.Branch || l.Fatal() != nil {
		t.Errorf("summary %+v, fatal %v", s, l.Fatal())
	}
	if s.Diverged != 1 || s.Divergences[0].Seq != 3 || s.Divergences[0].Reason != "answered differently than in the source run" {
		t.Errorf("the pure get's other answer is a divergence: %+v", s.Divergences)
	}
	if calls := l.Log().Calls; calls[0].Source != SourceLog || calls[2].Source != SourceLive {
		t.Errorf("sources %q %q", calls[0].Source, calls[2].Source)
	}
}

func TestReplaySourceMissingPerformsNothing(t *testing.T) {
	inv := &countingInvoker{}
	inv.answer = echoAnswers(inv)
	r, j := journalRouter(inv)
	put := [3]string{"acme.kv", "put", `{"key":"a"}`}
	src := record(t, r, j, LogLimits{}, put)
	before := inv.n.Load()

	other := [3]string{"acme.kv", "put", `{"key":"b"}`}
	_, errs, l := replay(t, r, j, src, nil, other)
	if wop.CodeOf(errs[0]) != CodeReplaySourceMissing {
		t.Fatalf("error %v, want %s", errs[0], CodeReplaySourceMissing)
	}
	if inv.n.Load() != before {
		t.Error("a call with no recorded outcome reached the plugin")
	}
	if l.Fatal() == nil || l.Fatal().Code != CodeReplaySourceMissing {
		t.Errorf("fatal %v", l.Fatal())
	}
	s := l.Summary()
	d := s.Divergences[0]
	if d.Seq != 1 || d.Key != InvocationKey("acme.kv", "put", []byte(`{"key":"b"}`)) || d.RecordedKey != src.Calls[0].Key {
		t.Errorf("the divergence names both keys: %+v", d)
	}
	// The recorded put was never made again: a second divergence.
	if s.Diverged != 2 || s.Divergences[1].Seq != 0 || s.Divergences[1].RecordedSeq != 1 {
		t.Errorf("summary %+v", s)
	}

	// A second occurrence of a recorded call has no outcome either.
	_, errs, _ = replay(t, r, j, src, nil, put, put)
	if errs[0] != nil || wop.CodeOf(errs[1]) != CodeReplaySourceMissing {
		t.Errorf("occurrences: %v", errs)
	}
}

func TestReplayOfACutOrRedactedLog(t *testing.T) {
	inv := &countingInvoker{}
	inv.answer = func(_, _ string, payload []byte) ([]byte, error) { return payload, nil }
	r, j := journalRouter(inv)
	one, two := [3]string{"acme.kv", "put", `{"n":1}`}, [3]string{"acme.kv", "put", `{"n":2}`}
	src := record(t, r, j, LogLimits{MaxCalls: 1}, one, two)
	before := inv.n.Load()
	_, errs, _ := replay(t, r, j, src, nil, one, two)
	if errs[0] != nil || wop.CodeOf(errs[1]) != CodeReplaySourceMissing || !strings.Contains(errs[1].Error(), "cut after 1 calls") {
		t.Errorf("cut log: %v", errs)
	}
	if src.CutReason == "" || !strings.Contains(errs[1].Error(), src.CutReason) {
		t.Errorf("cut log: the refusal %v does not give the log's reason %q", errs[1], src.CutReason)
	}
	if inv.n.Load() != before {
		t.Error("a call past the cut reached the plugin")
	}
	// A log cut where a direct channel's calls could not be learnt names
	// that cause.
	src.CutReason = "the plugin serving a direct channel could not be asked for the run's calls there"
	if _, errs, _ = replay(t, r, j, src, nil, one, two); !strings.Contains(errs[1].Error(), src.CutReason) {
		t.Errorf("cut log: %v, want the reason %q", errs[1], src.CutReason)
	}
	if inv.n.Load() != before {
		t.Error("a call past the cut reached the plugin")
	}

	secret := [3]string{"acme.kv", "put", `{"token":"s3cret-value"}`}
	src = record(t, r, j, LogLimits{}, secret)
	_, errs, _ = replay(t, r, j, src, nil, secret)
	if wop.CodeOf(errs[0]) != CodeReplaySourceMissing || !strings.Contains(errs[0].Error(), "sensitive") {
		t.Errorf("redacted outcome: %v", errs[0])
	}
}

func TestReplayDivergedAtRefusal(t *testing.T) {
	inv := &countingInvoker{}
	refuse := atomic.Bool{}
	inv.answer = func(_, _ string, _ []byte) ([]byte, error) {
		if refuse.Load() {
			return nil, wop.Errorf("acme.kv_gone", "gone")
		}
		return []byte(`{"v":1}`), nil
	}
	r, j := journalRouter(inv)
	get := [3]string{"acme.kv", "get", `{"key":"a"}`}

	// Recorded success, now a refusal (a pure call, run live).
	src := record(t, r, j, LogLimits{}, get)
	refuse.Store(true)
	_, errs, l := replay(t, r, j, src, nil, get)
	if wop.CodeOf(errs[0]) != CodeReplayDivergedAtRefusal || l.Fatal() == nil {
		t.Errorf("success then refusal: %v", errs[0])
	}
	// Recorded refusal, now a success.
	src = record(t, r, j, LogLimits{}, get)
	refuse.Store(false)
	_, errs, _ = replay(t, r, j, src, nil, get)
	if wop.CodeOf(errs[0]) != CodeReplayDivergedAtRefusal {
		t.Errorf("refusal then success: %v", errs[0])
	}
	// A recorded success the router refuses now (the family is gone).
	put := [3]string{"acme.kv", "put", `{"key":"a"}`}
	src = record(t, r, j, LogLimits{}, put)
	src.Calls[0].Family = "acme.gone"
	src.Calls[0].Key = InvocationKey("acme.gone", "put", []byte(put[2]))
	_, errs, _ = replay(t, r, j, src, nil, [3]string{"acme.gone", "put", put[2]})
	if wop.CodeOf(errs[0]) != CodeReplayDivergedAtRefusal {
		t.Errorf("router refusal: %v", errs[0])
	}
	// A recorded refusal of a call with effects is answered again.
	refuse.Store(true)
	src = record(t, r, j, LogLimits{}, put)
	refuse.Store(false)
	before := inv.n.Load()
	_, errs, l = replay(t, r, j, src, nil, put)
	if wop.CodeOf(errs[0]) != "acme.kv_gone" || inv.n.Load() != before || l.Fatal() != nil {
		t.Errorf("recorded refusal: %v", errs[0])
	}
}

func TestReplayLiveCallsMakeABranch(t *testing.T) {
	inv := &countingInvoker{}
	inv.answer = echoAnswers(inv)
	r, j := journalRouter(inv)
	put := [3]string{"acme.kv", "put", `{"key":"a"}`}
	src := record(t, r, j, LogLimits{}, put)
	before := inv.n.Load()
	_, errs, l := replay(t, r, j, src, func(family, method string) bool { return family == "acme.kv" }, put)
	if errs[0] != nil || inv.n.Load() != before+1 {
		t.Errorf("live put: %v, %d calls", errs[0], inv.n.Load()-before)
	}
	if s := l.Summary(); !s.Branch || s.Live != 1 || s.Served != 0 {
		t.Errorf("summary %+v", s)
	}
}

func TestWithoutMembersMatchesDecoding(t *testing.T) {
	names := []string{"idempotencyKey"}
	// Each input's result must equal the canonical JSON of the object
	// decoded, the members deleted and encoded again.
	for _, in := range []string{
		`{"idempotencyKey":"k"}`,
		`{"a":1,"idempotencyKey":"k","b":[1,{"idempotencyKey":"nested"}]}`,
		`{"idempotencyKey":"k","z":"}{,\"idempotencyKey\":"}`,
		`{"idempotencyKeyX":"kept","x":{"y":"]"},"idempotencyKey":{"a":[1,2]}}`,
		`{"a\"idempotencyKey":"kept","b":"\\","idempotencyKey":null}`,
		`{"a":"é","idempotencyKey":1e21,"c":-0}`,
		`{}`,
		`[{"idempotencyKey":"an array is left alone"}]`,
		`"a string"`,
	} {
		c, err := jcs.Transform([]byte(in))
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		got := string(withoutMembers(c, names))
		want := string(c)
		var obj map[string]json.RawMessage
		if json.Unmarshal([]byte(in), &obj) == nil && obj != nil {
			delete(obj, "idempotencyKey")
			b, _ := json.Marshal(obj)
			w, err := jcs.Transform(b)
			if err != nil {
				t.Fatal(err)
			}
			want = string(w)
		}
		if got != want {
			t.Errorf("%s:\ngot  %s\nwant %s", in, got, want)
		}
	}
}

// The host's own answers to a run (a WebAssembly pack's imports) join the
// run's log in order, and a replay gets them back from it without
// performing anything; one the source did not log fails the replay.
func TestAnswersAreLoggedAndReplayed(t *testing.T) {
	j := NewJournal(nil, nil)
	l, stop := j.Track("run_1", LogLimits{}, nil)
	clock := 1000
	now := func() ([]byte, error) { clock++; return []byte(strconv.Itoa(clock)), nil }
	for range 2 {
		if _, err := l.Answer("pack:demo", "openwop", "now_ms", []byte(`{}`), now); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Answer("pack:demo", "openwop", "random", []byte(`{"bytes":4}`), func() ([]byte, error) { return []byte(`"AQIDBA=="`), nil }); err != nil {
		t.Fatal(err)
	}
	src := l.Log()
	stop()
	if len(src.Calls) != 3 || string(src.Calls[1].Result) != "1002" || src.Calls[2].Method != "random" || src.Calls[0].Depth != 1 {
		t.Fatalf("source log = %+v", src.Calls)
	}

	replay, stop := j.Track("run_2", LogLimits{}, &ReplaySource{RunID: "run_1", Log: src})
	defer stop()
	performed := 0
	never := func() ([]byte, error) { performed++; return []byte("0"), nil }
	var got []string
	for range 2 {
		out, err := replay.Answer("pack:demo", "openwop", "now_ms", []byte(`{}`), never)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(out))
	}
	out, err := replay.Answer("pack:demo", "openwop", "random", []byte(`{"bytes":4}`), never)
	if err != nil || string(out) != `"AQIDBA=="` {
		t.Fatalf("random = %s, %v", out, err)
	}
	if performed != 0 || got[0] != "1001" || got[1] != "1002" {
		t.Fatalf("performed %d, answers %v; want 0 and [1001 1002]", performed, got)
	}
	// A third read of the clock is one the source never made.
	_, err = replay.Answer("pack:demo", "openwop", "now_ms", []byte(`{}`), never)
	if wop.CodeOf(err) != CodeReplaySourceMissing || performed != 0 {
		t.Fatalf("third now_ms: %v, performed %d", err, performed)
	}
	if s := replay.Summary(); s.Served != 3 || s.Diverged != 1 {
		t.Errorf("summary = %+v", s)
	}
}
