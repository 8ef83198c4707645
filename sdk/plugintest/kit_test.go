package plugintest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// kitChildEnv, when set, names the rule the bad plugin breaks in a child
// run of this test binary; "none" breaks none.
const kitChildEnv = "PLUGINTEST_KIT_BREAK"

// kitChildBinaryEnv carries the path of the bad plugin to a child run.
const kitChildBinaryEnv = "PLUGINTEST_KIT_BINARY"

// badPlugin builds internal/badplugin once for the tests that need it.
var badPlugin = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "plugintest-bad-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "badplugin")
	if runtime.GOOS == "windows" {
		bin += ".exe"
	}
	out, err := exec.Command("go", "build", "-o", bin, "./internal/badplugin").CombinedOutput()
	if err != nil {
		return "", &buildError{err: err, out: out}
	}
	return bin, nil
})

type buildError struct {
	err error
	out []byte
}

func (e *buildError) Error() string {
	return "build bad plugin: " + e.err.Error() + "\n" + string(e.out)
}

// TestKitOnBadPlugin runs the kit against a plugin that breaks one rule at
// a time and checks that exactly the subtest of that rule fails, with a
// message that names the rule. Each run is a child process of this test
// binary (TestKitChild), so that the failures the kit reports can be read
// from its output instead of failing this test.
//
// The kit's Deadline/Expired check has no switch: grpc-go refuses a call
// whose deadline has passed before it reaches the plugin, so no plugin can
// fail it.
func TestKitOnBadPlugin(t *testing.T) {
	if os.Getenv(kitChildEnv) != "" {
		t.Skip("child run")
	}
	bin, err := badPlugin()
	if err != nil {
		t.Fatal(err)
	}
	tests := []kitCase{
		{"none", "", ""},
		{"describe", "Describe", "Describe: version is empty"},
		{"record", "Describe", `family test.bad: status "bogus": must be one of stable, experimental, deprecated`},
		{"pure-methods", "PureMethods", `family test.bad declares the pure method "nope", which it does not list in methods`},
		{"schema", "ConfigSchema", `name "a" is used more than once`},
		{"serve-unconfigured", "InvokeBeforeConfigure", "succeeded before Configure"},
		{"facets", "Configure", "Configure returned no facets for family test.bad"},
		{"invoke", "Invoke/test.bad.other", "returned a result that is not valid JSON"},
		{"vendor-code", "Invoke/test.bad.fail", `got code="test.bad.failed"`},
		{"unknown-method", "Errors/UnknownMethod/test.bad", "an unknown method of family test.bad: got code=\"internal\""},
		{"unknown-family", "Errors/UnknownFamily", "an unknown family succeeded; want code not_found"},
		{"malformed-payload", "Errors/MalformedPayload", `with the malformed payload "{" succeeded; want code validation_error`},
		{"call-deadline", "Deadline/CallContextExpired", "with a passed call-context deadline"},
		{"after-deadline", "Deadline/Generous", "away failed"},
		// Whether the kit has seen the exit by then or only the failed
		// call depends on timing; both messages end the same way.
		{"keeps-serving", "KeepsServing", "the plugin process exited during the checks|a plugin must keep serving after a failed call"},
		// test.bad has neither facet rules nor operator-only methods: a
		// channel that drops the rules still refuses every row of its
		// table (TestCheckRefusalsOnBadPlugin has the families that do).
		{"direct-rules", "", ""},
	}
	runKitOnBadPlugin(t, bin, "TestKitChild", nil, tests)
}

// kitCase is one run of a kit against the bad plugin: the rule it breaks,
// the only subtest that must fail ("" for none) and what that subtest
// must say (alternatives separated by |; one must appear).
type kitCase struct {
	rule    string
	subtest string
	message string
}

// runKitOnBadPlugin runs, for each case, the test child of this binary in
// a child process against the bad plugin bin breaking the case's rule,
// with env added, and checks that exactly the case's subtest failed and
// said its message.
func runKitOnBadPlugin(t *testing.T, bin, child string, env []string, tests []kitCase) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.rule, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+child+"$", "-test.v", "-test.count=1")
			cmd.Env = append(append(os.Environ(), env...), kitChildEnv+"="+tc.rule, kitChildBinaryEnv+"="+bin)
			out, err := cmd.CombinedOutput()
			failed := leafFailures(out)
			var want []string
			if tc.subtest != "" {
				want = []string{child + "/" + tc.subtest}
			}
			if !slices.Equal(failed, want) {
				t.Fatalf("failed subtests %q; want %q\n%s", failed, want, out)
			}
			if tc.subtest == "" {
				if err != nil {
					t.Fatalf("child run failed: %v\n%s", err, out)
				}
				return
			}
			if err == nil {
				t.Fatalf("child run passed although %s failed\n%s", tc.subtest, out)
			}
			if !containsAny(subtestOutput(out, want[0]), strings.Split(tc.message, "|")) {
				t.Errorf("the output of %s does not say %q\n%s", want[0], tc.message, out)
			}
		})
	}
}

// TestKitChild runs the kit against the bad plugin; it runs only as a
// child of TestKitOnBadPlugin.
func TestKitChild(t *testing.T) {
	rule := os.Getenv(kitChildEnv)
	if rule == "" {
		t.Skip("runs only as a child of TestKitOnBadPlugin")
	}
	Run(t, Config{
		Binary: os.Getenv(kitChildBinaryEnv),
		Env:    []string{"BADPLUGIN_BREAK=" + rule},
		Calls: []Call{
			{Family: "test.bad", Method: "echo", Payload: json.RawMessage(`{"a":1}`)},
			{Family: "test.bad", Method: "other"},
			{Family: "test.bad", Method: "fail", WantCode: "test.failed"},
		},
	})
}

// containsAny reports whether out contains one of texts.
func containsAny(out []byte, texts []string) bool {
	return slices.ContainsFunc(texts, func(s string) bool { return bytes.Contains(out, []byte(s)) })
}

// subtestOutput returns what go test -v printed while the test name ran:
// the lines after its "=== RUN" up to the next "=== " line. The kit runs
// its subtests one after the other, so these are its own.
func subtestOutput(out []byte, name string) []byte {
	_, rest, ok := bytes.Cut(out, []byte("=== RUN   "+name+"\n"))
	if !ok {
		return nil
	}
	if i := bytes.Index(rest, []byte("\n=== ")); i >= 0 {
		rest = rest[:i]
	}
	return rest
}

// leafFailures lists the tests go test -v reports as failed that have no
// failed subtest of their own, in order.
func leafFailures(out []byte) []string {
	var failed []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		name, ok := strings.CutPrefix(line, "--- FAIL: ")
		if !ok {
			continue
		}
		if i := strings.LastIndex(name, " ("); i >= 0 {
			name = name[:i]
		}
		failed = append(failed, name)
	}
	var leaves []string
	for _, f := range failed {
		if !slices.ContainsFunc(failed, func(o string) bool { return strings.HasPrefix(o, f+"/") }) {
			leaves = append(leaves, f)
		}
	}
	slices.Sort(leaves)
	return leaves
}

// TestAIEnvelopeKitOnBadPlugin runs the aiEnvelope kit against the bad
// plugin serving aiEnvelope, breaking one of the kit's rules at a time,
// and checks that exactly the subtest of that rule fails.
func TestAIEnvelopeKitOnBadPlugin(t *testing.T) {
	if os.Getenv(kitChildEnv) != "" {
		t.Skip("child run")
	}
	bin, err := badPlugin()
	if err != nil {
		t.Fatal(err)
	}
	runKitOnBadPlugin(t, bin, "TestAIEnvelopeKitChild", []string{"BADPLUGIN_FAMILY=aiEnvelope"}, []kitCase{
		{"none", "", ""},
		{"ai-advertised", "Advertised", "lacks the method generate"},
		{"ai-shape", "Generate", "finishReason is empty"},
		{"ai-variables", "Variables", "generate with the variable suffix missing succeeded; want code envelope_validation_failed"},
		{"ai-idempotency", "Idempotency", "want the recorded one"},
		{"ai-async-refused", "AsyncRefused", "async generate succeeded although the await facet is not advertised"},
		{"ai-await", "Await", "await of an unknown envelopeId: got"},
		{"ai-await-facet", "Await", "want await: true"},
	})
}

// TestAIEnvelopeKitChild runs the aiEnvelope kit against the bad plugin;
// it runs only as a child of TestAIEnvelopeKitOnBadPlugin.
func TestAIEnvelopeKitChild(t *testing.T) {
	rule := os.Getenv(kitChildEnv)
	if rule == "" {
		t.Skip("runs only as a child of TestAIEnvelopeKitOnBadPlugin")
	}
	AIEnvelope(t, AIEnvelopeConfig{
		Binary:      os.Getenv(kitChildBinaryEnv),
		Env:         []string{"BADPLUGIN_FAMILY=aiEnvelope", "BADPLUGIN_BREAK=" + rule},
		Config:      json.RawMessage(`{}`),
		AsyncConfig: json.RawMessage(`{"async":true}`),
		JSONSchema:  json.RawMessage(`{"type":"object"}`),
	})
}

// TestPromptLibraryKitOnBadPlugin runs the promptLibrary kit against the
// bad plugin serving promptLibrary, breaking one of the kit's rules at a
// time, and checks that exactly the subtest of that rule fails.
func TestPromptLibraryKitOnBadPlugin(t *testing.T) {
	if os.Getenv(kitChildEnv) != "" {
		t.Skip("child run")
	}
	bin, err := badPlugin()
	if err != nil {
		t.Fatal(err)
	}
	runKitOnBadPlugin(t, bin, "TestPromptLibraryKitChild", []string{"BADPLUGIN_FAMILY=promptLibrary"}, []kitCase{
		{"none", "", ""},
		{"pl-advertised", "Advertised", "lacks the method get"},
		{"pl-verbatim", "Pinned", "raw is not the stored text verbatim"},
		{"pl-unpinned", "Unpinned", `get "team/greet@latest" answered`},
		{"pl-missing", "Missing", "want code prompt_version_not_found"},
		{"pl-mismatch", "DigestMismatch", "want code prompt_digest_mismatch"},
	})
}

// TestPromptLibraryKitChild runs the promptLibrary kit against the bad
// plugin; it runs only as a child of TestPromptLibraryKitOnBadPlugin.
func TestPromptLibraryKitChild(t *testing.T) {
	rule := os.Getenv(kitChildEnv)
	if rule == "" {
		t.Skip("runs only as a child of TestPromptLibraryKitOnBadPlugin")
	}
	PromptLibrary(t, PromptLibraryConfig{
		Binary:  os.Getenv(kitChildBinaryEnv),
		Env:     []string{"BADPLUGIN_FAMILY=promptLibrary", "BADPLUGIN_BREAK=" + rule},
		Prompts: []StoredPrompt{{Name: "team/greet", Version: "1", Raw: "---\nname: team/greet\nversion: 1\n---\nHello.  \n"}},
	})
}

// TestMCPKitOnBadPlugin runs the mcp kit against the bad plugin serving
// mcp, breaking one of the kit's rules at a time, and checks that exactly
// the subtest of that rule fails.
func TestMCPKitOnBadPlugin(t *testing.T) {
	if os.Getenv(kitChildEnv) != "" {
		t.Skip("child run")
	}
	bin, err := badPlugin()
	if err != nil {
		t.Fatal(err)
	}
	runKitOnBadPlugin(t, bin, "TestMCPKitChild", []string{"BADPLUGIN_FAMILY=mcp"}, []kitCase{
		{"none", "", ""},
		{"mcp-advertised", "Advertised", "want {maxRounds: 1..16}"},
		{"mcp-unknown-server", "UnknownServer", "serverHealth with an unknown serverId succeeded; want code not_found"},
		{"mcp-list-tools", "ListTools", "listTools with an empty-string cursor"},
		{"mcp-call-tool", "CallTool", `callTool returned resultType "input_required"`},
		{"mcp-read-resource", "ReadResource", "readResource result is not a ReadResourceResult"},
		{"mcp-error", "MCPError", "do not carry the JSON-RPC error object"},
		{"mcp-health", "ServerHealth", `serverHealth carries "sessionId"`},
	})
}

// TestMCPKitChild runs the mcp kit against the bad plugin; it runs only
// as a child of TestMCPKitOnBadPlugin.
func TestMCPKitChild(t *testing.T) {
	rule := os.Getenv(kitChildEnv)
	if rule == "" {
		t.Skip("runs only as a child of TestMCPKitOnBadPlugin")
	}
	MCP(t, MCPConfig{
		Binary:      os.Getenv(kitChildBinaryEnv),
		Env:         []string{"BADPLUGIN_FAMILY=mcp", "BADPLUGIN_BREAK=" + rule},
		Config:      json.RawMessage(`{}`),
		ServerID:    "srv",
		Tool:        "echo",
		ResourceURI: "file:///readme",
		UnknownTool: "nope",
	})
}

// TestAgentRuntimeKitOnBadPlugin runs the agentRuntime kit against the
// bad plugin serving agentRuntime, breaking one of the kit's rules at a
// time, and checks that exactly the subtest of that rule fails.
func TestAgentRuntimeKitOnBadPlugin(t *testing.T) {
	if os.Getenv(kitChildEnv) != "" {
		t.Skip("child run")
	}
	bin, err := badPlugin()
	if err != nil {
		t.Fatal(err)
	}
	runKitOnBadPlugin(t, bin, "TestAgentRuntimeKitChild", []string{"BADPLUGIN_FAMILY=agentRuntime"}, []kitCase{
		{"none", "", ""},
		{"ar-advertised", "Advertised", "does not need aiEnvelope"},
		{"ar-spawn", "Spawn", "the same idempotencyKey spawned a second instance"},
		{"ar-delegate", "Delegate", "whose skills match the task"},
		{"ar-consensus", "Consensus", "ballots go in participant order"},
		{"ar-message", "MessageSend", "messageSend to an unknown agent succeeded; want code agent_not_found"},
		{"ar-mailbox", "MessageSend", "mailbox_full is not retryable"},
	})
}

// TestAgentRuntimeKitChild runs the agentRuntime kit against the bad
// plugin; it runs only as a child of TestAgentRuntimeKitOnBadPlugin.
func TestAgentRuntimeKitChild(t *testing.T) {
	rule := os.Getenv(kitChildEnv)
	if rule == "" {
		t.Skip("runs only as a child of TestAgentRuntimeKitOnBadPlugin")
	}
	AgentRuntime(t, AgentRuntimeConfig{
		Binary:          os.Getenv(kitChildBinaryEnv),
		Env:             []string{"BADPLUGIN_FAMILY=agentRuntime", "BADPLUGIN_BREAK=" + rule},
		Config:          json.RawMessage(`{}`),
		MailboxCapacity: 2,
	})
}
