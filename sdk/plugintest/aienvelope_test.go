package plugintest

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestGenerateResultProblems(t *testing.T) {
	good := `{"envelopeType":"t","envelopeId":"e1","status":"completed","payload":"hi","text":"hi","finishReason":"stop",` +
		`"usage":{"inputTokens":1,"outputTokens":1},"model":"m","provider":"p","warnings":[]}`
	goodJSON := strings.Replace(strings.Replace(good, `"payload":"hi"`, `"payload":{"a":1}`, 1), `"text":"hi"`, `"text":"{\"a\": 1}"`, 1)
	tests := []struct {
		name, raw, typ string
		json           bool
		want           string
	}{
		{"good", good, "t", false, ""},
		{"good json", goodJSON, "t", true, ""},
		{"not an object", `[1]`, "t", false, "not a JSON object"},
		{"missing warnings", strings.Replace(good, `,"warnings":[]`, "", 1), "t", false, `lacks "warnings"`},
		{"null warnings", strings.Replace(good, `"warnings":[]`, `"warnings":null`, 1), "t", false, "want an array"},
		{"wrong type", good, "other", false, "envelopeType"},
		{"pending", strings.Replace(good, "completed", "pending", 1), "t", false, "status"},
		{"no finish", strings.Replace(good, `"finishReason":"stop"`, `"finishReason":""`, 1), "t", false, "finishReason"},
		{"no provider", strings.Replace(good, `"provider":"p"`, `"provider":""`, 1), "t", false, "provider"},
		{"text payload not the text", strings.Replace(good, `"payload":"hi"`, `"payload":"ho"`, 1), "t", false, "text as a JSON string"},
		{"json payload not the text", strings.Replace(goodJSON, `{"a":1}`, `{"a":2}`, 1), "t", true, "parsed text"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := strings.Join(GenerateResultProblems(json.RawMessage(tt.raw), tt.typ, tt.json), "\n")
			if tt.want == "" && got != "" || tt.want != "" && !strings.Contains(got, tt.want) {
				t.Errorf("problems %q; want one mentioning %q", got, tt.want)
			}
		})
	}
}
