package plugintest

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
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
