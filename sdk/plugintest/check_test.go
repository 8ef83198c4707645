package plugintest

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wophost/wophost/sdk/admission"
	"github.com/wophost/wophost/sdk/families/aienvelope"
	"github.com/wophost/wophost/sdk/families/promptlibrary"
	"github.com/wophost/wophost/sdk/internal/wire"
)

// badCalls are the sample calls the bad plugin's protocol checks make.
var badCalls = []Call{
	{Family: "test.bad", Method: "echo", Payload: json.RawMessage(`{"a":1}`), WantResult: json.RawMessage(`{"a":1}`)},
	{Family: "test.bad", Method: "other"},
	{Family: "test.bad", Method: "fail", WantCode: "test.failed"},
}

// rulesByName indexes a report's rules.
func rulesByName(r *Report) map[string]Rule {
	m := map[string]Rule{}
	for _, x := range r.Rules {
		m[x.Name] = x
	}
	return m
}

// Check reports the protocol rules outside a test, each with its text, and
// names the one rule a bad plugin breaks, with what broke it, failing the
// rules it is part of and skipping none of the others.
func TestCheckOnBadPlugin(t *testing.T) {
	if os.Getenv(kitChildEnv) != "" {
		t.Skip("child run")
	}
	bin, err := badPlugin()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		rule, failing, message string
	}{
		{"none", "", ""},
		{"record", "Protocol/Describe", `family test.bad: status "bogus": must be one of stable, experimental, deprecated`},
		{"malformed-payload", "Protocol/Errors/MalformedPayload", "want code validation_error"},
		{"vendor-code", "Protocol/Invoke/test.bad.fail", `want it to fail with code test.failed`},
	}
	for _, tc := range tests {
		t.Run(tc.rule, func(t *testing.T) {
			r := Check(t.Context(), Suite{Config: Config{Binary: bin, Env: []string{"BADPLUGIN_BREAK=" + tc.rule}, Calls: badCalls}})
			rules := rulesByName(r)
			for _, name := range []string{"Protocol", "Protocol/Describe", "Protocol/Invoke/test.bad.echo", "Protocol/Errors/UnknownMethod/test.bad", "Protocol/Deadline/Generous", "Protocol/KeepsServing"} {
				if rules[name].Text == "" {
					t.Errorf("rule %s: missing or without text: %+v", name, rules[name])
				}
			}
			failures := r.Failures()
			if tc.failing == "" {
				if r.Failed() || len(failures) != 0 {
					t.Fatalf("a plugin that breaks no rule failed: %+v", failures)
				}
				return
			}
			if len(failures) != 1 || failures[0].Name != tc.failing || !strings.Contains(failures[0].Detail, tc.message) {
				t.Fatalf("failures %+v; want only %s saying %q", failures, tc.failing, tc.message)
			}
			for _, parent := range []string{"Protocol", tc.failing[:strings.LastIndex(tc.failing, "/")]} {
				if rules[parent].Result != Fail {
					t.Errorf("rule %s is %s; a rule fails with its parts", parent, rules[parent].Result)
				}
			}
			if rules["Protocol"].Log == "" {
				t.Error("a failed check keeps no plugin log")
			}
		})
	}
}

// A sample call's WantResult must be contained in the result.
func TestCheckWantResult(t *testing.T) {
	bin, err := badPlugin()
	if err != nil {
		t.Fatal(err)
	}
	calls := []Call{{Family: "test.bad", Method: "echo", Payload: json.RawMessage(`{"a":1}`), WantResult: json.RawMessage(`{"a":2}`)}}
	r := Check(t.Context(), Suite{Config: Config{Binary: bin, Calls: calls}})
	f := r.Failures()
	if len(f) != 1 || f[0].Name != "Protocol/Invoke/test.bad.echo" || !strings.Contains(f[0].Detail, `want a result containing {"a":2}`) {
		t.Fatalf("failures %+v", f)
	}
}

// A plugin that serves a core family is checked against its contract
// too; one whose checks need what the suite does not give fails naming
// what is missing.
func TestCheckRunsTheCoreFamilyChecks(t *testing.T) {
	bin, err := badPlugin()
	if err != nil {
		t.Fatal(err)
	}
	calls := []Call{{Family: "promptLibrary", Method: "get", Payload: json.RawMessage(`{"promptId":"team/greet@1"}`)}}
	env := []string{"BADPLUGIN_FAMILY=promptLibrary"}
	// The bad plugin's promptLibrary mode breaks protocol rules of its
	// own (it serves before Configure); only the family's rules count.
	family := func(r *Report) []Rule {
		var out []Rule
		for _, x := range r.Failures() {
			if strings.HasPrefix(x.Name, "promptLibrary") {
				out = append(out, x)
			}
		}
		return out
	}
	r := Check(t.Context(), Suite{Config: Config{Binary: bin, Env: env, Calls: calls}})
	f := family(r)
	if len(f) != 1 || f[0].Name != "promptLibrary" || !strings.Contains(f[0].Detail, "need the prompts it serves") {
		t.Fatalf("failures %+v; want promptLibrary naming the prompts", f)
	}
	r = Check(t.Context(), Suite{Config: Config{Binary: bin, Env: append(env, "BADPLUGIN_BREAK=pl-missing"), Calls: calls},
		PromptLibrary: &PromptLibraryConfig{Prompts: []StoredPrompt{{Name: "team/greet", Version: "1", Raw: "---\nname: team/greet\nversion: 1\n---\nHello.  \n"}}}})
	f = family(r)
	if len(f) != 1 || f[0].Name != "promptLibrary/Missing" {
		t.Fatalf("failures %+v; want promptLibrary/Missing", f)
	}
	if rules := rulesByName(r); rules["promptLibrary/Pinned"].Result != Pass || rules["promptLibrary/Advertised"].Text == "" {
		t.Errorf("rules %+v", r.Rules)
	}
}

// The rules of Check behave as subtests do: Fatal and Skip end only
// their rule, a panic fails it, a failure fails the rules it is part of,
// names repeat with #01, and cleanups run last first when the rule ends.
func TestRuleT(t *testing.T) {
	root := &ruleT{r: &reporter{}, ctx: context.Background(), index: -1}
	var order []string
	root.Run("A", "a", func(t checkT) {
		t.Cleanup(func() { order = append(order, "first") })
		t.Cleanup(func() { order = append(order, "second") })
		t.Run("Fatal", "f", func(t checkT) {
			t.Fatal("stop")
			order = append(order, "after fatal")
		})
		t.Run("Skip", "s", func(t checkT) { t.Skip("not now") })
		t.Run("Skip", "s", func(t checkT) {})
		t.Run("Panic", "p", func(checkT) { panic("boom") })
	})
	root.Run("B", "b", func(t checkT) { t.Logf("note") })
	if strings.Join(order, ",") != "second,first" {
		t.Errorf("order %q", order)
	}
	var got []string
	for _, r := range root.r.rules {
		got = append(got, r.Name+"="+string(r.Result))
	}
	want := "A=fail A/Fatal=fail A/Skip=skip A/Skip#01=pass A/Panic=fail B=pass"
	if strings.Join(got, " ") != want {
		t.Fatalf("rules %q; want %q", got, want)
	}
	rules := rulesByName(&Report{Rules: root.r.rules})
	if rules["A/Fatal"].Detail != "stop" || rules["A/Skip"].Detail != "not now" || !strings.Contains(rules["A/Panic"].Detail, "panic: boom") || rules["B"].Log != "note" {
		t.Errorf("rules %+v", root.r.rules)
	}
}

// Check runs an in-process plugin too, and a Call's Check reports to its
// rule through a testing.TB.
func TestCheckInProcess(t *testing.T) {
	var seen string
	calls := []Call{{Family: "test.echo", Method: "echo", Payload: json.RawMessage(`{"text":"hi"}`),
		Check: func(tb testing.TB, result json.RawMessage) {
			seen = tb.Name()
			if string(result) != `{"text":"bye"}` {
				tb.Errorf("echo = %s", result)
			}
		}}}
	r := Check(t.Context(), Suite{Config: Config{InProcess: inProcessPlugin(), Calls: calls}})
	f := r.Failures()
	if len(f) != 1 || f[0].Name != "Protocol/Invoke/test.echo.echo" || f[0].Detail != `echo = {"text":"hi"}` || seen != f[0].Name {
		t.Fatalf("failures %+v (Check saw %q)", f, seen)
	}
}

// refusalPrefix is the name every refusal row's rule starts with.
const refusalPrefix = "Protocol/DirectChannel/Refusal/"

// A plugin's direct channel is held to the admission table, a rule per
// row: the bad plugin passes every row in its aiEnvelope and
// promptLibrary modes, and with direct-rules (the channel opened without
// the rules the host sends) exactly the rows of facet rules and
// operator-only methods fail, the others still pass.
func TestCheckRefusalsOnBadPlugin(t *testing.T) {
	if os.Getenv(kitChildEnv) != "" {
		t.Skip("child run")
	}
	bin, err := badPlugin()
	if err != nil {
		t.Fatal(err)
	}
	modes := []struct {
		family string
		call   Call
		rules  admission.Rules
		// rows is the number of rows, ruled the rows of the family's
		// rules (facets, operator-only methods).
		rows, ruled int
	}{
		{"aiEnvelope", Call{Family: "aiEnvelope", Method: "generate", Payload: json.RawMessage(`{"envelopeType":"plugintest.generate","userMessage":"Say hello.","idempotencyKey":"refusals"}`)}, aienvelope.Rules(), 10, 6},
		{"promptLibrary", Call{Family: "promptLibrary", Method: "get", Payload: json.RawMessage(`{"promptId":"team/greet@1"}`)}, promptlibrary.Rules(), 10, 6},
	}
	for _, m := range modes {
		want := admission.Refusals(admission.NodeCaller(grantPack, grantTypeID), m.family, m.call.Method, m.call.Payload, m.rules, time.Now())
		for _, brk := range []string{"none", "direct-rules"} {
			t.Run(m.family+"/"+brk, func(t *testing.T) {
				r := Check(t.Context(), Suite{
					Config:        Config{Binary: bin, Env: []string{"BADPLUGIN_FAMILY=" + m.family, "BADPLUGIN_BREAK=" + brk}, Config: json.RawMessage(`{}`), Calls: []Call{m.call}},
					PromptLibrary: &PromptLibraryConfig{Prompts: []StoredPrompt{{Name: "team/greet", Version: "1", Raw: "---\nname: team/greet\nversion: 1\n---\nHello.  \n"}}},
				})
				rules := rulesByName(r)
				var rows []Rule
				for _, x := range r.Rules {
					if strings.HasPrefix(x.Name, refusalPrefix) {
						rows = append(rows, x)
					}
				}
				if len(rows) != m.rows || len(want) != m.rows {
					t.Fatalf("%d refusal rules, the table %d rows; want %d: %+v", len(rows), len(want), m.rows, rows)
				}
				passed, failed := 0, 0
				for i, row := range want {
					got := rows[i]
					if got.Name != refusalPrefix+row.Rule || got.Text == "" {
						t.Errorf("rule %d is %q (text %q); want %q with a text", i, got.Name, got.Text, refusalPrefix+row.Rule)
					}
					ruled := strings.HasPrefix(row.Rule, "undeclared facet ") || strings.HasPrefix(row.Rule, "operator-only method ")
					wantResult := Pass
					if brk == "direct-rules" && ruled {
						wantResult = Fail
					}
					if got.Result != wantResult {
						t.Errorf("%s: %s (%s); want %s", got.Name, got.Result, got.Detail, wantResult)
					}
					if got.Result == Fail && !strings.Contains(got.Detail, "as the host refuses it") {
						t.Errorf("%s fails saying %q; want it to name the host's refusal", got.Name, got.Detail)
					}
					switch got.Result {
					case Pass:
						passed++
					case Fail:
						failed++
					}
				}
				t.Logf("%d refusal rows: %d passed, %d failed", len(rows), passed, failed)
				wantFailed := 0
				if brk == "direct-rules" {
					wantFailed = m.ruled
				}
				if failed != wantFailed || passed != m.rows-wantFailed {
					t.Errorf("%d rows passed, %d failed; want %d and %d", passed, failed, m.rows-wantFailed, wantFailed)
				}
				// The channel's other checks do not depend on the rules.
				for _, x := range r.Failures() {
					if strings.HasPrefix(x.Name, "Protocol/DirectChannel") && !strings.HasPrefix(x.Name, refusalPrefix) {
						t.Errorf("%s failed: %s", x.Name, x.Detail)
					}
				}
				if wantFailed == 0 && rules["Protocol/DirectChannel"].Result != Pass {
					t.Errorf("Protocol/DirectChannel is %s: %s", rules["Protocol/DirectChannel"].Result, rules["Protocol/DirectChannel"].Detail)
				}
			})
		}
	}
}

// A plugin that exits before its handshake fails the rule that started it
// with a *StartError in its own words, not go-plugin's guesses; Inspect
// returns the same.
func TestCheckOnPluginThatDoesNotStart(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "early")
	script := "#!/bin/sh\necho \"ImportError: No module named 'grpc_health'\" >&2\nexit 3\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	const want = "the process exited before completing its handshake (exit status 3); the last it wrote to stderr: ImportError: No module named 'grpc_health'"
	check := func(t *testing.T, err error, detail string) {
		t.Helper()
		var se *StartError
		var exit *wire.ExitError
		if !errors.As(err, &se) || !errors.As(err, &exit) {
			t.Fatalf("err = %v, want a StartError of an ExitError", err)
		}
		if exit.Error() != want {
			t.Errorf("error %q, want %q", exit, want)
		}
		if !strings.Contains(detail, want) || strings.Contains(detail, "This usually means") {
			t.Errorf("detail %q, want the process's words and not go-plugin's guesses", detail)
		}
	}
	r := Check(t.Context(), Suite{Config: Config{Binary: bin, Calls: badCalls}})
	f := r.Failures()
	if len(f) != 1 || f[0].Name != "Protocol" {
		t.Fatalf("failures %+v, want Protocol alone", f)
	}
	check(t, f[0].Err, f[0].Detail)
	_, _, err := Inspect(t.Context(), Config{Binary: bin})
	if err == nil {
		t.Fatal("Inspect of a plugin that does not start succeeded")
	}
	check(t, err, err.Error())
}

// A plugin that exits during Configure fails that rule in its own words,
// kept as the rule's Err.
func TestCheckOnPluginThatExitsDuringConfigure(t *testing.T) {
	if os.Getenv(kitChildEnv) != "" {
		t.Skip("child run")
	}
	bin, err := badPlugin()
	if err != nil {
		t.Fatal(err)
	}
	r := Check(t.Context(), Suite{Config: Config{Binary: bin, Env: []string{"BADPLUGIN_BREAK=exit-configure"}, Calls: badCalls}})
	rule := rulesByName(r)["Protocol/Configure"]
	const want = "Configure failed: the process exited during Configure (exit status 4); the last it wrote to stderr: badplugin: the licence server refused key BP-0000"
	var exit *wire.ExitError
	if rule.Result != Fail || !errors.As(rule.Err, &exit) || rule.Detail != want {
		t.Fatalf("rule Protocol/Configure: %s, err %v, detail %q; want it failed with %q", rule.Result, rule.Err, rule.Detail, want)
	}
}
