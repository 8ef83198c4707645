package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wophost/wophost/sdk/hostwire"
	"github.com/wophost/wophost/test/testbin"
)

// environOf reads the environment a process started with.
func environOf(t *testing.T, pid int) map[string]string {
	t.Helper()
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		t.Fatalf("environment of %d: %v", pid, err)
	}
	env := map[string]string{}
	for _, kv := range bytes.Split(bytes.TrimRight(raw, "\x00"), []byte{0}) {
		k, v, _ := strings.Cut(string(kv), "=")
		env[k] = v
	}
	return env
}

// Every child of the host (a plugin, a pack, and an MCP server the mcp
// plugin starts) sees the base set of the environment, the protocol's
// variables and what its own block passes: never the API's bearer token
// or a secret the config reads with env(), which sit in the host's
// environment, and never another child's variables. A plugin or pack
// process also gets its GOMAXPROCS from the host, half the host's own
// unless its block's env sets one; an MCP server, not the host's
// process, gets none.
func TestChildrenSeeOnlyTheirEnvironment(t *testing.T) {
	const (
		token  = "api-token-canary-3b9e1f"
		secret = "env-secret-canary-c41d07"
		passed = "passed-on-purpose-77a2"
	)
	mcpPlugin, toolbox, pack := binary(t, "./plugins/mcp"), binary(t, "./examples/mcpservers/toolbox"), mcpPack(t)
	cfg := writeConfig(t, fmt.Sprintf(`
host {
  plugin_dir = "BIN"
  http {
    listen = "127.0.0.1:0"
    tokens = [env("WOPHOST_API_TOKEN")]
  }
}
capability "echo" {
  plugin   = "testcap"
  families = ["test.echo"]
  env = {
    ECHO_MODE = "loud"
    ECHO_KEY  = env("WOPHOST_TEST_PASSED")
  }
  config {
    greeting = "hi"
    token    = env("WOPHOST_TEST_SECRET")
  }
}
capability "mcp" {
  plugin = %q
  env    = { MCP_PLUGIN_ONLY = "for-the-plugin", GOMAXPROCS = "3" }
  config {
    server "toolbox" {
      command = [%q]
      env     = { TOOLBOX_VAR = "for-the-server" }
    }
  }
}
pack "private.wophost.mcppack" {
  path = %q
  env  = { PACK_VAR = "for-the-pack" }
}
`, mcpPlugin, toolbox, pack))
	cmd := exec.Command(bin.host, "--config", cfg, "serve")
	cmd.Env = append(os.Environ(), "WOPHOST_API_TOKEN="+token, "WOPHOST_TEST_SECRET="+secret,
		"WOPHOST_TEST_PASSED="+passed, "TZ=Etc/UTC", "OPENAI_API_KEY="+secret, "GOMAXPROCS=5")
	d := startServeCommand(t, cmd)

	// The MCP server starts on first use.
	r := request(t, "POST", d.base+"/v1/nodes/mcppack.call:execute",
		`{"input":{"method":"listTools","request":{"serverId":"toolbox"}}}`,
		map[string]string{"Authorization": "Bearer " + token})
	if r.status != 200 || !strings.Contains(r.body, "wordcount") {
		t.Fatalf("listTools through the pack: %d %s\n%s", r.status, r.body, d.log())
	}

	protocol := func(name string) bool {
		return hostwire.IsReservedEnv(name) || name == hostwire.Handshake.MagicCookieKey || name == "GOMAXPROCS"
	}
	children := []struct {
		name string
		bin  string
		// own are the variables its block passes; allowed says which
		// other names it may see beyond the base set.
		own     map[string]string
		allowed func(string) bool
		// baseSet: it sees the host's base set; a contained pack does
		// not, without env.read.
		baseSet bool
		// gomaxprocs is its GOMAXPROCS, "" for none: the host runs at 5,
		// so its processes get 2, and the mcp plugin's block says 3.
		gomaxprocs string
	}{
		{"plugin", bin.testcap, map[string]string{"ECHO_MODE": "loud", "ECHO_KEY": passed}, protocol, true, "2"},
		{"pack", filepath.Join(pack, "mcppack"), map[string]string{"PACK_VAR": "for-the-pack"}, protocol, false, "2"},
		{"mcp plugin", mcpPlugin, map[string]string{"MCP_PLUGIN_ONLY": "for-the-plugin"}, protocol, true, "3"},
		{"stdio MCP server", toolbox, map[string]string{"TOOLBOX_VAR": "for-the-server"}, func(string) bool { return false }, true, ""},
	}
	var procs []testbin.Process
	deadline := time.Now().Add(30 * time.Second)
	for {
		procs = testbin.Descendants(d.cmd.Process.Pid)
		if len(procs) >= len(children) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, c := range children {
		t.Run(c.name, func(t *testing.T) {
			var pid int
			for _, p := range procs {
				if strings.HasPrefix(p.Command, c.bin) {
					pid = p.PID
				}
			}
			if pid == 0 {
				t.Fatalf("no process of %s among the host's descendants: %+v", c.bin, procs)
			}
			env := environOf(t, pid)
			for k, v := range env {
				if strings.Contains(v, token) || strings.Contains(v, secret) {
					t.Errorf("%s=%s carries a secret of the host's", k, v)
				}
				if _, own := c.own[k]; !own && !hostwire.IsBaseEnv(k) && !c.allowed(k) {
					t.Errorf("%s sees %s, which is neither in the base set, nor the protocol's, nor passed to it", c.name, k)
				}
			}
			for k, v := range c.own {
				if env[k] != v {
					t.Errorf("%s: %s = %q, want %q as its block passes", c.name, k, env[k], v)
				}
			}
			if got, set := env["GOMAXPROCS"]; got != c.gomaxprocs || set != (c.gomaxprocs != "") {
				t.Errorf("%s: GOMAXPROCS = %q (set %v), want %q", c.name, got, set, c.gomaxprocs)
			}
			switch {
			case c.baseSet && (env["TZ"] != "Etc/UTC" || env["PATH"] == ""):
				t.Errorf("%s lacks the base set: TZ=%q PATH=%q", c.name, env["TZ"], env["PATH"])
			case !c.baseSet && (env["TZ"] != "" || env["PATH"] != ""):
				t.Errorf("%s, contained, sees the host's base set: TZ=%q PATH=%q", c.name, env["TZ"], env["PATH"])
			}
		})
	}
	if code := d.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit %d after SIGTERM:\n%s", code, d.log())
	}
}

// packState runs `host packs` on cfg and returns the pack's state and
// error.
func packState(t *testing.T, cfg, name string) (state, errText string) {
	t.Helper()
	res := runHost(t, "", "--config", cfg, "--json", "packs")
	var list []struct{ Name, State, Error string }
	if err := json.Unmarshal([]byte(res.stdout), &list); err != nil {
		t.Fatalf("host packs: %v\n%s\n%s", err, res.stdout, res.stderr)
	}
	for _, p := range list {
		if p.Name == name {
			return p.State, p.Error
		}
	}
	t.Fatalf("pack %s not listed:\n%s", name, res.stdout)
	return "", ""
}

// A pack whose entry is a symbolic link to a binary outside the pack is
// refused, and that binary never runs; a link that stays inside the pack
// works.
func TestPackEntrySymlinkMustStayInside(t *testing.T) {
	config := func(pack string) string {
		return writeConfig(t, fmt.Sprintf(`
host { plugin_dir = "BIN" }
capability "echo" {
  plugin   = "testcap"
  families = ["test.echo"]
}
pack "private.wophost.probe" { path = %q }
`, pack))
	}

	t.Run("outside", func(t *testing.T) {
		pack := probePack(t)
		entry := filepath.Join(pack, "probe")
		// The binary outside is a wrapper that leaves a mark when it runs
		// and then serves the pack, so that running it would go unnoticed
		// but for the mark.
		outside := t.TempDir()
		real := filepath.Join(outside, "probe-real")
		if err := os.Rename(entry, real); err != nil {
			t.Fatal(err)
		}
		marker := filepath.Join(outside, "ran")
		wrapper := filepath.Join(outside, "probe")
		if err := os.WriteFile(wrapper, []byte("#!/bin/sh\ntouch "+marker+"\nexec "+real+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(wrapper, entry); err != nil {
			t.Fatal(err)
		}
		state, errText := packState(t, config(pack), "private.wophost.probe")
		if state != "refused" {
			t.Fatalf("a pack whose entry leads outside it is %s (%s), want refused", state, errText)
		}
		for _, w := range []string{"pack_validation_failed", "runtime.entry", entry, "outside the pack directory"} {
			if !strings.Contains(errText, w) {
				t.Errorf("refusal %q does not mention %q", errText, w)
			}
		}
		if _, err := os.Stat(marker); err == nil {
			t.Error("the binary outside the pack ran")
		}
	})

	t.Run("inside", func(t *testing.T) {
		pack := probePack(t)
		entry := filepath.Join(pack, "probe")
		if err := os.MkdirAll(filepath.Join(pack, "bin"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(entry, filepath.Join(pack, "bin", "probe")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("bin/probe", entry); err != nil {
			t.Fatal(err)
		}
		// Degraded: the probe's optional peers are not configured here.
		if state, errText := packState(t, config(pack), "private.wophost.probe"); state != "degraded" || errText != "" {
			t.Fatalf("a pack whose entry links inside it is %s (%s), want loaded", state, errText)
		}
	})
}

// file() reads through a symbolic link that stays in the config's
// directory, and refuses one that leads outside it, at the call.
func TestFileFunctionSymlinkMustStayInside(t *testing.T) {
	secretDir := t.TempDir()
	secretFile := filepath.Join(secretDir, "secret.txt")
	if err := os.WriteFile(secretFile, []byte("outside-secret-5e21"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, "host { plugin_dir = \"BIN\" }\ncapability \"echo\" {\n  plugin   = \"testcap\"\n  families = [\"test.echo\"]\n  config {\n    greeting = file(\"./x\")\n  }\n}\n")
	dir := filepath.Dir(cfg)
	if err := os.Symlink(secretFile, filepath.Join(dir, "x")); err != nil {
		t.Fatal(err)
	}
	res := runHost(t, "", "--config", cfg, "validate")
	if res.code == 0 {
		t.Fatalf("validate accepted a file() through a link outside the config dir:\n%s", res.stdout)
	}
	if !strings.Contains(res.stderr, "host.hcl:6:") || !strings.Contains(res.stderr, "leads outside the config file's directory") {
		t.Errorf("want a diagnostic at host.hcl:6 saying the file leads outside the config dir:\n%s", res.stderr)
	}
	if strings.Contains(res.stdout+res.stderr, "outside-secret-5e21") {
		t.Errorf("the contents of the file outside were shown:\n%s%s", res.stdout, res.stderr)
	}

	// The same link to a file inside the directory is read.
	if err := os.MkdirAll(filepath.Join(dir, "texts"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "texts", "greeting.txt"), []byte("hello-through-a-link"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "x")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("texts/greeting.txt", filepath.Join(dir, "x")); err != nil {
		t.Fatal(err)
	}
	res = runHost(t, "", "--config", cfg, "call", "test.echo.greet")
	if res.code != 0 || !strings.Contains(res.stdout, "hello-through-a-link") {
		t.Fatalf("file() through a link inside the config dir: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
}
