package plugintest

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/wophost/wophost/sdk/families/promptlibrary"
)

func TestPromptAnswerProblems(t *testing.T) {
	sp := StoredPrompt{Name: "p", Version: "1", Raw: "---\nname: p\n---\nhi \r\n"}
	good := promptlibrary.Prompt{PromptID: "p@1", Name: "p", Version: "1", Digest: promptlibrary.DigestOf([]byte(sp.Raw)), Raw: sp.Raw}
	encode := func(p promptlibrary.Prompt) json.RawMessage {
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if pr := promptAnswerProblems(encode(good), sp, "p@1"); len(pr) != 0 {
		t.Fatalf("a faithful answer has problems: %v", pr)
	}
	cases := map[string]func(p *promptlibrary.Prompt){
		"verbatim": func(p *promptlibrary.Prompt) { p.Raw = strings.TrimSpace(p.Raw) },
		"digest":   func(p *promptlibrary.Prompt) { p.Digest = promptlibrary.DigestOf([]byte("x")) },
		"answered": func(p *promptlibrary.Prompt) { p.Version = "2" },
		"echo":     func(p *promptlibrary.Prompt) { p.PromptID = "p" },
	}
	for want, mutate := range cases {
		p := good
		mutate(&p)
		pr := promptAnswerProblems(encode(p), sp, "p@1")
		if len(pr) == 0 || !strings.Contains(strings.Join(pr, "\n"), want) {
			t.Errorf("%s: problems %v do not mention %q", want, pr, want)
		}
	}
	if pr := promptAnswerProblems(json.RawMessage(`[1]`), sp, "p@1"); len(pr) != 1 {
		t.Errorf("non-prompt answer: %v", pr)
	}
}
