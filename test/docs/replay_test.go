package docs_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/wophost/wophost/core/config"
	"github.com/wophost/wophost/core/dispatch"
)

// replayPath is the page on the invocation log and replay.
const replayPath = "docs/replay.md"

// TestReplayDocBlocks checks every fenced block of the page: the sh
// transcripts run in order in a fresh demo deployment, with their output
// compared line by line (run ids pair up across blocks, so a replay names
// the run recorded above); the JSON blocks decode, closed, as an
// invocation log or a replay summary; the HCL block loads as a host
// config with the settings it shows; the HTTP exchange is sent to `host
// serve` on the deployment, and its answer must hold what is shown.
func TestReplayDocBlocks(t *testing.T) {
	root := moduleRoot(t)
	blocks := fencedBlocks(t, root, replayPath)
	if len(blocks) == 0 {
		t.Fatalf("%s has no code blocks", replayPath)
	}
	d := newDemo(t)
	ids := idMap{}
	for _, b := range blocks {
		name := fmt.Sprintf("%s:%d %s", replayPath, b.line, b.lang)
		ok := t.Run(name, func(t *testing.T) {
			switch b.lang {
			case "sh":
				d.checkTranscript(t, ids, b.text)
			case "json":
				checkReplayJSON(t, b.text)
			case "hcl":
				checkRunsBlock(t, b.text)
			case "http":
				d.checkReplayHTTP(t, ids, b.text)
			default:
				t.Errorf("a %q block: only sh, json, hcl and http blocks are checked, so only they may appear", b.lang)
			}
		})
		if !ok && b.lang == "sh" {
			t.Fatalf("%s failed; the blocks after it depend on its runs", name)
		}
	}
}

// checkReplayJSON decodes a block as an invocation log or a replay
// summary, with no member either lacks.
func checkReplayJSON(t *testing.T, text string) {
	strict := func(v any) error {
		dec := json.NewDecoder(strings.NewReader(text))
		dec.DisallowUnknownFields()
		return dec.Decode(v)
	}
	var log dispatch.InvocationLog
	errLog := strict(&log)
	if errLog == nil && len(log.Calls) > 0 {
		return
	}
	var sum dispatch.ReplaySummary
	errSum := strict(&sum)
	if errSum == nil && sum.Source != "" {
		return
	}
	t.Errorf("neither an invocation log (%v) nor a replay summary (%v)", errLog, errSum)
}

// checkRunsBlock loads the block as a host config and checks it sets the
// runs settings it shows.
func checkRunsBlock(t *testing.T, text string) {
	path := filepath.Join(t.TempDir(), "host.hcl")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, diags := config.NewLoader().Load(path)
	if diags.HasErrors() {
		t.Fatalf("the block does not load:\n%s", config.FormatDiagnostics(diags))
	}
	want := config.Runs{LogMaxCalls: 10000, LogMaxBytes: 16777216}
	if got := cfg.Host.Runs; got.LogMaxCalls != want.LogMaxCalls || got.LogMaxBytes != want.LogMaxBytes {
		t.Errorf("runs %+v, want %+v", got, want)
	}
}

// checkReplayHTTP sends the block's request to `host serve` on the demo
// deployment and checks the status line and that the answer's JSON holds
// every member shown.
func (d *demo) checkReplayHTTP(t *testing.T, ids idMap, text string) {
	req, resp, ok := strings.Cut(text, "\n\nHTTP/1.1 ")
	if !ok {
		t.Fatal("the block has no blank line and HTTP/1.1 response after its request")
	}
	reqLine := strings.Fields(strings.SplitN(req, "\n", 2)[0])
	if len(reqLine) != 3 || reqLine[0] != "POST" {
		t.Fatalf("request line %q", reqLine)
	}
	status, body, ok := strings.Cut(resp, "\n\n")
	if !ok {
		t.Fatal("the response has no body")
	}
	var wantBody any
	if err := json.Unmarshal([]byte(body), &wantBody); err != nil {
		t.Fatalf("the response body is not JSON: %v", err)
	}

	addr, stop := d.serve(t)
	defer stop()
	base := "http://" + addr
	r, err := http.Post(base+ids.substitute(reqLine[1]), "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	gotStatus, _ := bufio.NewReader(strings.NewReader(status)).ReadString('\n')
	if want := fmt.Sprintf("%d %s", r.StatusCode, http.StatusText(r.StatusCode)); strings.TrimSpace(gotStatus) != want {
		t.Errorf("status %s, the document shows %s", want, strings.TrimSpace(gotStatus))
	}
	if ct := r.Header.Get("Content-Type"); !strings.Contains(status, "Content-Type: "+ct) {
		t.Errorf("Content-Type %q is not the one shown", ct)
	}
	var got any
	if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if err := holds(got, wantBody, ids, "body"); err != nil {
		t.Error(err)
	}
}

// holds checks that got holds want: objects member by member (got may
// have more), anything else equal; strings are matched like transcript
// lines, so run ids pair up.
func holds(got, want any, ids idMap, at string) error {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: %v is not an object", at, got)
		}
		for k, v := range w {
			gv, ok := g[k]
			if !ok {
				return fmt.Errorf("%s: no member %q", at, k)
			}
			if err := holds(gv, v, ids, at+"."+k); err != nil {
				return err
			}
		}
		return nil
	case string:
		g, ok := got.(string)
		if !ok {
			return fmt.Errorf("%s: %v is not a string", at, got)
		}
		if err := ids.match(w, g, ""); err != nil {
			return fmt.Errorf("%s: %v", at, err)
		}
		return nil
	}
	if !reflect.DeepEqual(got, want) {
		return fmt.Errorf("%s: %v, want %v", at, got, want)
	}
	return nil
}
