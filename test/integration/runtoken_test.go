package integration

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wophost/wophost/core/host"
)

// tokenAttempt is one call the sibling pack's forger made and what the
// host answered.
type tokenAttempt struct {
	OK      bool   `json:"ok"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// A node cannot act in a sibling node's run by naming it. The sibling
// pack speaks the raw wire, so its forger node can send any call context:
// while its holder node (which alone declares test.other) is in flight,
// the forger names the holder's run id, read from the file the holder
// wrote, with its own run token, with none and with a guessed one. Every
// such call is refused with capability_not_declared and the holder's
// family stays out of reach, while both nodes' own calls are served.
func TestNodeCannotClaimASiblingsRun(t *testing.T) {
	pack, err := bin.cache.Pack("test/packs/sibling")
	if err != nil {
		t.Fatal(err)
	}
	h := startHost(t, writeConfig(t, `
host {
  plugin_dir = "BIN"
}
capability "echo" {
  plugin   = "testcap"
  families = ["test.echo"]
}
capability "other" {
  plugin   = "testcap"
  families = ["test.other"]
}
pack "private.wophost.sibling" { path = "`+pack+`" }
`))
	dir := t.TempDir()
	runIDFile, release := filepath.Join(dir, "holder-run-id"), filepath.Join(dir, "release")
	type outcome struct {
		res *host.RunResult
		err error
	}
	held := make(chan outcome, 1)
	go func() {
		input, _ := json.Marshal(map[string]string{"runIdFile": runIDFile, "releaseFile": release})
		res, err := h.Run(context.Background(), "sibling.holder", input, host.RunOptions{Timeout: time.Minute})
		held <- outcome{res, err}
	}()
	// Whatever happens below, let the holder finish.
	t.Cleanup(func() { _ = os.WriteFile(release, nil, 0o600) })

	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := os.Stat(runIDFile); err == nil {
			break
		}
		select {
		case o := <-held:
			t.Fatalf("the holder ended before it was released: %+v %v", o.res, o.err)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("the holder never wrote its run id")
		}
	}

	input, _ := json.Marshal(map[string]string{"runIdFile": runIDFile})
	res, err := h.Run(context.Background(), "sibling.forger", input, host.RunOptions{Timeout: time.Minute})
	if err != nil {
		t.Fatalf("forger: %v", err)
	}
	var got struct {
		HolderRunID         string       `json:"holderRunId"`
		Own                 tokenAttempt `json:"own"`
		OwnUndeclared       tokenAttempt `json:"ownUndeclared"`
		SiblingOwnToken     tokenAttempt `json:"siblingOwnToken"`
		SiblingNoToken      tokenAttempt `json:"siblingNoToken"`
		SiblingGuessedToken tokenAttempt `json:"siblingGuessedToken"`
		SiblingEcho         tokenAttempt `json:"siblingEcho"`
	}
	if err := json.Unmarshal(res.Output, &got); err != nil {
		t.Fatalf("forger output %s: %v", res.Output, err)
	}
	t.Logf("forger: %s", res.Output)

	// The forger's own calls: served, and least privilege holds.
	if !got.Own.OK {
		t.Errorf("the forger's own call was refused: %+v", got.Own)
	}
	if got.OwnUndeclared.OK || got.OwnUndeclared.Code != "capability_not_declared" || !strings.Contains(got.OwnUndeclared.Message, "did not declare test.other") {
		t.Errorf("the forger's own undeclared call: %+v, want capability_not_declared", got.OwnUndeclared)
	}
	// Every call that names the holder's run without its token.
	for name, a := range map[string]tokenAttempt{
		"the holder's run id with the forger's own token": got.SiblingOwnToken,
		"the holder's run id with no token":               got.SiblingNoToken,
		"the holder's run id with a guessed token":        got.SiblingGuessedToken,
		"the holder's run id on a family both declare":    got.SiblingEcho,
	} {
		if a.OK || a.Code != "capability_not_declared" || !strings.Contains(a.Message, "may not act in run "+got.HolderRunID) {
			t.Errorf("%s: %+v, want capability_not_declared: may not act in run %s", name, a, got.HolderRunID)
		}
	}

	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var o outcome
	select {
	case o = <-held:
	case <-time.After(time.Minute):
		t.Fatal("the holder did not finish once released")
	}
	if o.err != nil {
		t.Fatalf("holder: %v", o.err)
	}
	if o.res.RunID != got.HolderRunID {
		t.Errorf("the forger named run %s, the holder ran as %s", got.HolderRunID, o.res.RunID)
	}
	var holder struct {
		Own tokenAttempt `json:"own"`
	}
	if err := json.Unmarshal(o.res.Output, &holder); err != nil || !holder.Own.OK {
		t.Errorf("the holder's own declared call, with its token: %s (%v)", o.res.Output, err)
	}

	// Once the holder has finished, its run id is not found, token or not.
	res, err = h.Run(context.Background(), "sibling.forger", input, host.RunOptions{Timeout: time.Minute})
	if err != nil {
		t.Fatalf("forger after the holder finished: %v", err)
	}
	if err := json.Unmarshal(res.Output, &got); err != nil {
		t.Fatal(err)
	}
	if got.SiblingOwnToken.Code != "not_found" || got.SiblingNoToken.Code != "not_found" {
		t.Errorf("a finished run's id: %+v %+v, want not_found", got.SiblingOwnToken, got.SiblingNoToken)
	}
}
