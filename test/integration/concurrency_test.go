package integration

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wophost/wophost/core/host"
	"github.com/wophost/wophost/sdk/wop"
)

// awaitFile polls for path, empty or not, until it exists or the
// deadline passes.
func awaitFile(t *testing.T, path string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear within %s", path, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// With max_concurrent_calls = 1 a second call waits for the slot the first
// holds in the plugin: with a short deadline it ends deadline_exceeded
// naming the limit, without reaching the plugin; with a long one it
// reaches the plugin only once the first call has ended.
func TestMaxConcurrentCallsMakesACallWaitForASlot(t *testing.T) {
	cfg := writeConfig(t, `
host {
  plugin_dir = "BIN"
}
capability "echo" {
  plugin               = "testcap"
  families             = ["test.echo"]
  max_concurrent_calls = 1
}
`)
	h := startHost(t, cfg)
	dir := t.TempDir()
	sleep := func(ctx context.Context, name string, ms int, timeout time.Duration) (json.RawMessage, error) {
		payload, _ := json.Marshal(map[string]any{"ms": ms, "started": filepath.Join(dir, name)})
		return h.Call(ctx, "test.echo", "sleep", payload, host.RunOptions{Timeout: timeout})
	}

	// The first call holds the only slot until the test cancels it.
	holdCtx, release := context.WithCancel(context.Background())
	defer release()
	held := make(chan error, 1)
	go func() {
		_, err := sleep(holdCtx, "holder", 120_000, 0)
		held <- err
	}()
	awaitFile(t, filepath.Join(dir, "holder"), time.Minute)

	// The patient call starts waiting now, behind the holder.
	type outcome struct {
		out json.RawMessage
		err error
		at  time.Time
	}
	patient := make(chan outcome, 1)
	go func() {
		out, err := sleep(context.Background(), "patient", 0, 2*time.Minute)
		patient <- outcome{out, err, time.Now()}
	}()

	// Long enough to reach the slots on a loaded machine, short enough to
	// end while the holder is still in the plugin.
	_, err := sleep(context.Background(), "hasty", 0, time.Second)
	var we *wop.Error
	if !errors.As(err, &we) || we.Code != wop.CodeDeadlineExceeded || !strings.Contains(we.Message, "max_concurrent_calls") ||
		!strings.Contains(we.Message, `capability "echo"`) {
		t.Fatalf("a call while the only slot is held: %v; want deadline_exceeded naming max_concurrent_calls of capability \"echo\"", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "hasty")); err == nil {
		t.Error("the call refused for want of a slot reached the plugin")
	}
	if _, err := os.Stat(filepath.Join(dir, "patient")); err == nil {
		t.Fatal("a second call reached the plugin while the first held the only slot")
	}
	select {
	case o := <-patient:
		t.Fatalf("the waiting call ended while the slot was held: %s, %v", o.out, o.err)
	default:
	}

	released := time.Now()
	release()
	if err := <-held; wop.CodeOf(err) != wop.CodeCancelled {
		t.Errorf("the released call: %v; want code %s", err, wop.CodeCancelled)
	}
	o := <-patient
	if o.err != nil {
		t.Fatalf("the waiting call after the slot was freed: %v", o.err)
	}
	if o.at.Before(released) {
		t.Errorf("the waiting call ended before the slot was freed")
	}
	if string(o.out) != `{"slept":true}` {
		t.Errorf("the waiting call returned %s; want {\"slept\":true}", o.out)
	}
}
