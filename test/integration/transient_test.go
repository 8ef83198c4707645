package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wophost/wophost/core/host"
	"github.com/wophost/wophost/core/httpstatus"
	"github.com/wophost/wophost/sdk/families/agentruntime"
	"github.com/wophost/wophost/sdk/wop"
	"github.com/wophost/wophost/test/testbin"
)

// voteServer is an OpenAI-compatible endpoint on which every agent votes
// "accept". Once held, the next request waits until released (or until
// its client goes away), and arrived reports that it came.
type voteServer struct {
	*httptest.Server
	mu      sync.Mutex
	hold    bool
	arrived chan struct{}
	release chan struct{}
}

func newVoteServer(t *testing.T) *voteServer {
	s := &voteServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		s.mu.Lock()
		held := s.hold
		s.hold = false
		s.mu.Unlock()
		if held {
			close(s.arrived)
			select {
			case <-s.release:
			case <-r.Context().Done():
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1795947243,"model":"fixture-model",`+
			`"choices":[{"index":0,"message":{"role":"assistant","content":"{\"vote\":\"accept\",\"rationale\":\"fixture\"}"},"finish_reason":"stop"}],`+
			`"usage":{"prompt_tokens":5,"completion_tokens":4,"total_tokens":9}}`)
	}))
	t.Cleanup(s.Close)
	return s
}

// holdNext makes the next request wait; the returned channels report its
// arrival and let it go.
func (s *voteServer) holdNext() (arrived <-chan struct{}, release chan<- struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hold = true
	s.arrived, s.release = make(chan struct{}), make(chan struct{})
	return s.arrived, s.release
}

// The council's consensus with the aiEnvelope plugin killed while an
// agent's turn waits on the provider: council.decide answers, or fails
// retryable at the top (and 503 over HTTP); it never returns a permanent
// consensus_failed over a restarting plugin. Once the plugin is back, the
// same call succeeds. That a plugin's first callback may come long after
// go-plugin's broker dropped the connection information of host services
// (as under host serve) is proven without idling, by
// TestConfigureConnectsToHostServicesAtOnce (sdk/plugin) and
// TestHostCallerFirstUseLongAfterTheID (sdk/internal/wire).
func TestCouncilAcrossAIEnvelopeKill(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a plugin")
	}
	provider := newVoteServer(t)
	pack, err := bin.cache.Pack("examples/packs/council")
	if err != nil {
		t.Fatal(err)
	}
	aiBinary := binary(t, "./plugins/aienvelope")
	cfg := writeConfig(t, fmt.Sprintf(`
host { plugin_dir = "BIN" }
capability "ai" {
  plugin = %q
  config {
    default_provider = "chat"
    provider "chat" {
      type     = "openai"
      base_url = "%s/v1"
      model    = "fixture-model"
    }
  }
}
capability "prompts" {
  plugin   = %q
  families = ["promptLibrary"]
  config { dir = %q }
}
capability "agents" { plugin = %q }
pack "community.wophost.council" { path = %q }
`, aiBinary, provider.URL, binary(t, "./plugins/promptlib"), filepath.Join(t.TempDir(), "prompts"),
		binary(t, "./plugins/agentrt"), pack))
	res := runHost(t, "", "--config", cfg, "prompts", "publish",
		testbin.SourceDir("examples/prompts/council-reviewer.prompt"), testbin.SourceDir("examples/prompts/council-maintainer.prompt"))
	if res.code != 0 {
		t.Fatalf("publish: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	h := startHost(t, cfg)
	decide := func() (*agentruntime.ConsensusResult, error) {
		out, err := h.Run(context.Background(), "council.decide", json.RawMessage(`{"proposal":"Ship v2 on Monday."}`),
			host.RunOptions{Timeout: time.Minute})
		if err != nil {
			return nil, err
		}
		var r agentruntime.ConsensusResult
		if err := json.Unmarshal(out.Output, &r); err != nil {
			t.Fatalf("council.decide output %s: %v", out.Output, err)
		}
		return &r, nil
	}

	if r, err := decide(); err != nil || !r.Converged {
		t.Fatalf("council.decide before the kill: %+v, %v", r, err)
	}

	arrived, release := provider.holdNext()
	type outcome struct {
		r   *agentruntime.ConsensusResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		r, err := decide()
		done <- outcome{r, err}
	}()
	select {
	case <-arrived:
	case <-time.After(time.Minute):
		t.Fatal("no agent turn reached the provider")
	}
	if err := syscall.Kill(pluginPID(t, aiBinary), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	close(release)
	var got outcome
	select {
	case got = <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("council.decide did not answer after the kill")
	}
	if got.err != nil {
		we := wop.AsError(got.err)
		if !we.Retryable {
			t.Fatalf("council.decide across the kill failed for good: %s %s", we.Error(), we.Details)
		}
		// A run that ran is answered as its outcome; a retryable one is
		// never kept under an idempotency key, so a retry runs again.
		if httpstatus.Kept(true, we) {
			t.Errorf("a retryable %s would be kept under an idempotency key", we.Code)
		}
		t.Logf("across the kill: %s (retryable)", we.Error())
	} else {
		t.Logf("across the kill: answered, converged %v after %d round(s)", got.r.Converged, got.r.Rounds)
	}

	waitUntil(t, "the aiEnvelope plugin to be back", func() bool {
		for _, r := range h.Registry().Records() {
			if r.Name == "ai" && r.State == "ready" && r.Restarts >= 1 {
				return h.Registry().Has(agentruntime.Family, "")
			}
		}
		return false
	})
	if r, err := decide(); err != nil || !r.Converged {
		t.Fatalf("council.decide retried once the plugin is back: %+v, %v", r, err)
	}
}
