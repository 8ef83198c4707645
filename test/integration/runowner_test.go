package integration

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// Through a real `host serve` with two plain tokens and an operator's
// token block: a run belongs to the token that made it. Another token,
// one byte off included, gets 404 for it as for a run that does not
// exist; the owner and the operator's runs:all token replay it.
func TestRunsBelongToTheirToken(t *testing.T) {
	cfg := serveConfig(t, `
    tokens = ["tok-alice", "tok-bob"]
    token "operator" {
      value  = "tok-operator"
      scopes = ["runs:all"]
    }`, "")
	d := startServe(t, cfg)
	do := func(token, path, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest("POST", d.base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	status, body := do("tok-alice", "/v1/nodes/probe.echo:execute", `{"input":{"ok":true}}`)
	var run struct {
		RunID string `json:"runId"`
	}
	if err := json.Unmarshal([]byte(body), &run); err != nil || status != 200 || run.RunID == "" {
		t.Fatalf("execute: %d %s", status, body)
	}
	replay := "/v1/runs/" + run.RunID + ":replay"
	unknownStatus, unknownBody := do("tok-bob", "/v1/runs/run_0123456789abcdef0123dead:replay", "")
	for _, c := range []struct {
		token string
		want  int
	}{
		{"tok-bob", http.StatusNotFound},
		{"tok-alicf", http.StatusUnauthorized},
		{"tok-alice", http.StatusOK},
		{"tok-operator", http.StatusOK},
	} {
		status, body := do(c.token, replay, "")
		if status != c.want {
			t.Errorf("%s replays alice's run: %d %s, want %d", c.token, status, body, c.want)
		}
		if c.want == http.StatusNotFound {
			if status != unknownStatus || strings.Replace(body, run.RunID, "run_0123456789abcdef0123dead", 1) != unknownBody {
				t.Errorf("bob's answer for alice's run %d %s differs from a run that does not exist %d %s", status, body, unknownStatus, unknownBody)
			}
		}
	}
}
